"""Reading capture files: the reader returns what dpkt's own readers return on good
files, and on damaged ones stops at the damage with a message that says where and
why - a partial report, never a crash. The CLI's exit statuses and messages."""
import io
import json
import os
import subprocess
import sys
import tracemalloc

import dpkt
import pytest
from simflow import Sim, bulk_pcap, write_pcap, write_pcapng
from tuskcli import TUSK

from diag.core.analyze import analyze
from diag.core.pcapread import CaptureError, Reader


@pytest.fixture(scope="module")
def sim():
    return Sim(segments=300, loss=(100,)).run()


def cli(*args):
    return subprocess.run([sys.executable, TUSK, "diag", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("nano", [False, True])
def test_pcap_records_match_dpkt(tmp_path, sim, nano):
    path = write_pcap(tmp_path / "a.pcap", sim.packets, nano=nano)
    with open(path, "rb") as handle:
        expected = [(float(ts), bytes(buf)) for ts, buf in dpkt.pcap.Reader(handle)]
    with Reader(path) as reader:
        got = [(ts, bytes(frame)) for ts, index, frame in reader]
        assert reader.format == "pcap" and reader.damage is None
    assert [f for _, f in got] == [f for _, f in expected]
    assert [t for t, _ in got] == pytest.approx([t for t, _ in expected], abs=1e-6)


def test_pcapng_records_interfaces_and_times(tmp_path, sim):
    path = write_pcapng(tmp_path / "a.pcapng", sim.packets)
    with Reader(path) as reader:
        got = list(reader)
        assert [i.name for i in reader.interfaces] == ["outside", "inside"]
        assert reader.damage is None
    assert [(reader.interfaces[i].name, bytes(f)) for _, i, f in got] == \
        [(where, data) for _, where, data in sim.packets]
    # nanosecond resolution (if_tsresol 9) read as such (to a double's precision)
    assert [t for t, _, _ in got] == pytest.approx([t for t, _, _ in sim.packets], abs=5e-7)


def test_concatenated_pcapng_sections_keep_their_interfaces(tmp_path, sim):
    first = write_pcapng(tmp_path / "1.pcapng", sim.packets[:100])
    second = write_pcapng(tmp_path / "2.pcapng", sim.packets[100:],
                          interfaces=("inside", "outside"))
    both = tmp_path / "both.pcapng"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    with Reader(both) as reader:
        names = [reader.interfaces[i].name for _, i, _ in reader]
    assert names == [where for _, where, _ in sim.packets]
    report = analyze([both])
    assert report["flows"][0]["bytes"]["c2s"] == 300 * 1460


def test_not_a_capture_and_empty_files_are_refused_by_name(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello, this is not a capture\n")
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    with pytest.raises(CaptureError, match=r"notes.txt: not a pcap or pcapng file \(it starts "
                                           r"with 68656c6c\)"):
        Reader(junk)
    with pytest.raises(CaptureError, match=r"empty.pcap: empty or too short"):
        Reader(empty)
    done = cli("analyze", junk, empty, tmp_path / "missing.pcap")
    assert done.returncode == 3 and done.stdout == ""
    assert "notes.txt: not a pcap or pcapng file" in done.stderr
    assert "empty.pcap: empty or too short" in done.stderr
    assert "missing.pcap: No such file or directory" in done.stderr


def test_one_unreadable_file_among_good_ones_is_reported_not_fatal(tmp_path, sim):
    good = write_pcapng(tmp_path / "good.pcapng", sim.packets)
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"\0" * 100)
    done = cli("analyze", "--json", good, junk)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"][1]["error"].endswith("junk.pcap: not a pcap or pcapng file (it starts "
                                                "with 00000000)")
    assert len(report["flows"]) == 1


@pytest.mark.parametrize("cut", [30, 100, 1001, -7, -1])
def test_truncated_files_give_a_partial_report(tmp_path, sim, cut):
    for writer, name in ((write_pcap, "t.pcap"), (write_pcapng, "t.pcapng")):
        data = writer(tmp_path / name, sim.packets).read_bytes()
        cut_path = tmp_path / f"cut-{name}"
        cut_path.write_bytes(data[:cut])
        report = analyze([cut_path])
        entry = report["files"][0]
        assert entry["error"] is not None and "stopped at byte" in entry["error"], entry
        assert "cut short" in entry["error"]
        assert entry["error"] in report["warnings"]
        if cut < 0:   # all but the last record
            assert entry["packets"] == len(sim.packets) - 1


def test_a_record_claiming_a_huge_length_stops_reading_without_allocating_it(tmp_path, sim):
    path = write_pcap(tmp_path / "big.pcap", sim.packets[:10])
    data = bytearray(path.read_bytes())
    data[24 + 8:24 + 12] = (0x7FFFFFF0).to_bytes(4, "little")   # first record's caplen
    path.write_bytes(bytes(data))
    report = analyze([path])
    assert report["files"][0]["packets"] == 0
    assert "record claims 2147483632 bytes" in report["files"][0]["error"]
    ng = write_pcapng(tmp_path / "big.pcapng", sim.packets[:10])
    data = bytearray(ng.read_bytes())
    shb = int.from_bytes(data[4:8], "little")
    data[shb + 4:shb + 8] = (0x7FFFFFF0).to_bytes(4, "little")  # first IDB's length
    ng.write_bytes(bytes(data))
    report = analyze([ng])
    assert "block of impossible length 2147483632" in report["files"][0]["error"]


def test_memory_does_not_grow_with_the_length_of_the_capture(tmp_path):
    """A long flow at 1x and 4x the length (both past every thinning threshold): the
    reader streams and the report's series are thinned, so the peak of Python
    allocations stays the same."""
    peaks = []
    for segments in (20000, 80000):
        path = bulk_pcap(tmp_path / f"{segments}.pcap", segments)
        tracemalloc.start()
        report = analyze([path])
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert report["flows"][0]["bytes"]["c2s"] == segments * 1448
        assert report["packets"] == 2 * segments + 2
    assert peaks[1] < 1.2 * peaks[0], peaks


def test_cli_text_report(tmp_path):
    sim = Sim(segments=1500, rtt=0.04, bandwidth=1e9, server={"wscale": None}).run()
    path = write_pcapng(tmp_path / "w.pcapng", sim.packets)
    done = cli("analyze", path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{path}: pcapng, {len(sim.packets)} packets on outside, inside"
    assert "10.0.0.1:40000 -> 10.0.1.1:5201" in done.stdout
    assert ("  verdict [problem]: window-limited: server window 64 KiB at 40 ms caps this flow at "
            "13.1 Mbit/s") in done.stdout
    assert "    server SYN/ACK: MSS 1460, no wscale, SACK-permitted, no timestamps" in lines
    assert cli("analyze").returncode == 2
    assert cli("analyze", "--flows", "0", path).returncode == 2


def test_cli_reads_inherited_descriptors_under_the_names_given(tmp_path, sim):
    """How the agent's sandbox, which may open no file itself, hands files over."""
    path = write_pcap(tmp_path / "x.pcap", sim.packets)
    fd = os.open(path, os.O_RDONLY)
    try:
        done = subprocess.run([sys.executable, TUSK, "diag", "analyze", "--json", "--fd",
                               f"{fd}=capture-7.pcap"], pass_fds=[fd], capture_output=True,
                              text=True, timeout=60)
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["files"]
    assert (entry["name"], entry["packets"]) == ("capture-7.pcap", len(sim.packets))
    bad = cli("analyze", "--fd", "capture-7.pcap")
    assert bad.returncode == 2 and "expected N=NAME" in bad.stderr
    assert "name at least one FILE (or --fd)" in cli("analyze", "--json").stderr


def test_reader_reads_from_any_path_like(tmp_path, sim):
    path = write_pcap(tmp_path / "x.pcap", sim.packets[:3])
    with Reader(str(path)) as reader:
        assert len(list(reader)) == 3
    assert isinstance(io.BytesIO, type)


def test_time_running_backwards_in_a_damaged_file_is_survived(tmp_path, sim):
    """Found by the fuzz test: a packet stamped before its connection began."""
    packets = list(sim.packets)
    when, where, data = packets[50]
    packets[50] = (when - 61695.97, where, data)
    report = analyze([write_pcap(tmp_path / "back.pcap", packets)])
    assert report["flows"][0]["bytes"]["c2s"] == 300 * 1460
