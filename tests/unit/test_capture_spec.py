"""Capture settings (webui/diag/core/capture.py): every bad field is named with its
reason, all of them at once, before anything starts; and the dumpcap command line
that a good spec becomes. The filter is compiled by the real tcpdump."""
import dataclasses
import os
import shutil

import pytest

from diag.core import capture
from diag.core.capture import LIMITS, Spec, SpecError, argv, check_filter, files_of, validate

KNOWN = {"eth1", "eth3", "lan0"}


@pytest.fixture(autouse=True, scope="module")
def tcpdump():
    if shutil.which("tcpdump") is None:
        pytest.fail("missing: tcpdump (Debian package tcpdump) - run `make test`, which "
                    "installs it")


def errors(spec, known=KNOWN, quota_mb=None):
    with pytest.raises(SpecError) as raised:
        validate(spec, known, quota_mb)
    return [(problem.path, problem.message) for problem in raised.value.problems]


def test_the_defaults_are_valid_and_within_their_bounds():
    spec = Spec(interfaces=("eth1",))
    assert validate(spec, KNOWN, quota_mb=2048) is spec
    for name, (low, high, default) in LIMITS.items():
        assert low <= getattr(spec, name) == default <= high
    assert spec.format == "pcapng" and spec.max_bytes == spec.max_mb * 1_000_000


def test_a_spec_survives_the_job_arguments():
    spec = Spec(interfaces=("eth1", "eth3"), filter="tcp port 5201", max_packets=5,
                max_mb=20, max_seconds=30, snaplen=128, ring_files=4, format="pcapng")
    assert Spec.from_dict(spec.as_dict()) == spec


@pytest.mark.parametrize("changes, field, message", [
    ({"interfaces": ()}, "interfaces", "choose at least one interface"),
    ({"interfaces": ("eth9",)}, "interfaces", "no interface eth9 on the firewall (it has "
                                              "eth1, eth3, lan0)"),
    ({"interfaces": ("eth1; reboot",)}, "interfaces", "'eth1; reboot' is not an interface name"),
    ({"interfaces": ("-w/etc/x",)}, "interfaces", "is not an interface name"),
    ({"interfaces": ("eth1", "eth1")}, "interfaces", "an interface is named twice"),
    ({"max_packets": 0}, "max_packets", "must be a whole number from 1 to 100000000"),
    ({"max_packets": 100_000_001}, "max_packets", "from 1 to 100000000"),
    ({"max_mb": 0}, "max_mb", "from 1 to 1000000"),
    ({"max_seconds": 86_401}, "max_seconds", "from 1 to 86400"),
    ({"max_seconds": 1.5}, "max_seconds", "must be a whole number"),
    ({"max_seconds": True}, "max_seconds", "must be a whole number"),
    ({"snaplen": 63}, "snaplen", "from 64 to 262144"),
    ({"snaplen": 262_145}, "snaplen", "from 64 to 262144"),
    ({"ring_files": 101}, "ring_files", "from 0 to 100"),
    ({"ring_files": 8, "max_mb": 10}, "ring_files", "8 files of 10 MB in all would be under "
                                                    "2 MB each"),
    ({"format": "erf"}, "format", "must be one of pcapng, pcap"),
    ({"format": "pcap", "interfaces": ("eth1", "eth3")}, "format",
     "a pcap file holds one interface"),
    ({"filter": "tcp port"}, "filter", "can't parse filter expression: syntax error"),
    ({"filter": "port 99999"}, "filter", "illegal port number 99999 > 65535"),
    ({"filter": "ip6 and tcp[13] & 2 != 0"}, "filter", "expression rejects all packets"),
    ({"filter": "tcp " * 300}, "filter", "longer than 1000 characters"),
    ({"filter": 5}, "filter", "must be text"),
])
def test_each_bad_field_is_named_with_the_reason(changes, field, message):
    spec = dataclasses.replace(Spec(interfaces=("eth1",)), **changes)
    found = errors(spec)
    assert [f for f, _ in found] == [field], found
    assert message in found[0][1]


def test_a_byte_limit_above_the_quota_is_refused():
    assert errors(Spec(interfaces=("eth1",), max_mb=51), quota_mb=50) == [
        ("max_mb", "more than the capture storage quota (50 MB)")]
    validate(Spec(interfaces=("eth1",), max_mb=50), KNOWN, quota_mb=50)


def test_every_problem_is_reported_at_once():
    spec = Spec(interfaces=("eth9", "eth1"), filter="tcp port", snaplen=1, format="pcap")
    assert sorted(f for f, _ in errors(spec)) == ["filter", "format", "interfaces", "snaplen"]
    with pytest.raises(SpecError, match="(?m)^error\\[FILTER\\]: filter: can't parse"):
        validate(spec, KNOWN)


def test_the_agent_checks_without_the_interface_list():
    validate(Spec(interfaces=("eth9",)))          # dumpcap itself names a missing one


@pytest.mark.parametrize("text", ["", "  ", "tcp port 5201", "host 10.0.0.1 and not icmp",
                                  "vlan and tcp", "ip6 and tcp"])
def test_good_filters_compile(text):
    assert check_filter(text) is None


def test_the_command_line_for_both_sides_in_pcapng():
    spec = Spec(interfaces=("eth1", "eth3"), filter="tcp port 5201", max_packets=2000,
                max_mb=10, max_seconds=60, snaplen=256)
    assert argv(spec, "/c/x.pcapng") == [
        "dumpcap", "-s", "256", "-i", "eth1", "-f", "tcp port 5201",
        "-i", "eth3", "-f", "tcp port 5201", "-c", "2000", "-a", "duration:60", "-n",
        "-a", "filesize:10000", "-w", "/c/x.pcapng"]


def test_the_command_line_in_a_namespace_pcap_without_a_filter():
    spec = Spec(interfaces=("lan0",), format="pcap", max_mb=1, max_seconds=5, snaplen=64,
                max_packets=1)
    assert argv(spec, "/c/x.pcap", netns="lab-fw") == [
        "ip", "netns", "exec", "lab-fw", "dumpcap", "-s", "64", "-i", "lan0", "-c", "1",
        "-a", "duration:5", "-P", "-a", "filesize:1000", "-w", "/c/x.pcap"]


def test_the_command_line_of_a_ring_buffer_keeps_max_mb_in_all():
    spec = Spec(interfaces=("eth1",), max_mb=100, ring_files=4)
    call = argv(spec, "/c/x.pcapng")
    assert call[-6:] == ["-b", "files:4", "-b", "filesize:25000", "-w", "/c/x.pcapng"]
    assert "filesize:100000" not in " ".join(call)   # no stop at the first file's end


def test_ring_files_are_found_oldest_first(tmp_path):
    base = tmp_path / "capture-7-20261123T070000Z.pcapng"
    assert files_of(base) == []
    for name in ("capture-7-20261123T070000Z_00003_20261123070003.pcapng",
                 "capture-7-20261123T070000Z_00002_20261123070002.pcapng",
                 "capture-70-20261123T070000Z.pcapng", "other.pcapng"):
        (tmp_path / name).touch()
    assert [os.path.basename(f) for f in files_of(base)] == [
        "capture-7-20261123T070000Z_00002_20261123070002.pcapng",
        "capture-7-20261123T070000Z_00003_20261123070003.pcapng"]
    base.touch()
    assert files_of(base) == [str(base)]


def test_the_packet_count_is_read_from_what_dumpcap_prints():
    reader = capture._Stderr(None)
    reader.text = ("Capturing on 'eth1'\nFile: x\n\rPackets: 19 \rPackets: 20 "
                   "\rPackets captured: 20\nPackets received/dropped on interface 'eth1': "
                   "20/0 (pcap:0/dumpcap:0/flushed:0/ps_ifdrop:0) (100.0%)\n")
    assert [int(n) for n in capture._PACKETS.findall(reader.text)] == [19, 20, 20]
    assert capture._PACKETS.findall("\rPackets: 1") == []   # a number still being written
    reader.text = ("Capturing on 'nope'\ndumpcap: There is no device named \"nope\".\n"
                   "(No such device exists)\n")
    assert reader.error(1) == 'dumpcap: There is no device named "nope". (No such device exists)'
