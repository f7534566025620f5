"""TUSK-MIB (webui/snmp/TUSK-MIB.txt) and its responder (snmp/core/mib.py,
passpersist.py): the snapshot's rows typed and clamped as the MIB declares them, a forged
or damaged snapshot giving fewer rows and never a broken line, the pass_persist protocol
of net-snmp 5.9 played against StringIO, the snapshot file read without following a
link, and the module itself checked by smilint against the base modules vendored in
tests/mibs. Plain Python."""
import ast
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from snmp.core import mib, passpersist
from tusklib.names import MAX_CLASSES, NAME_MAX

MODULE = Path(__file__).resolve().parents[2] / "webui" / "snmp" / "TUSK-MIB.txt"
BASE_MIBS = Path(__file__).resolve().parents[1] / "mibs"
R = ".1.3.6.1.4.1.8072.9999.9999.58"
NOW = 1764547260.0
SNAPSHOT = {
    "version": 1, "time": 1764547200.9, "ha_role": "backup", "ruleset_loaded": True,
    "conntrack_entries": 12, "conntrack_limit": 262144,
    "drops": {"default_deny": [5, 300], "invalid": [1, 40]},
    "seqadj": {name: arc for arc, name in enumerate(mib.SEQADJ, 100)},
    "classes": [["bulk", 10, 1000], ["web", 3, 180]],
    "loss": [["nic.rx_missed", "nic.rx_missed@eth0", 4], ["softnet.dropped", "softnet.dropped", 0]],
}


def oid(text):
    return passpersist.parse_oid(text)


def rows(snapshot, **kwargs):
    return [("." + ".".join(map(str, o)), kind, value)
            for o, kind, value in mib.table(snapshot, now=NOW, **kwargs)]


def test_a_snapshot_becomes_the_modules_rows_in_oid_order():
    C64, G32, U32, INT, STR = (mib.COUNTER64, mib.GAUGE32, mib.UNSIGNED32, mib.INTEGER,
                               mib.OCTET_STRING)
    assert rows(SNAPSHOT) == [
        (f"{R}.1.1.1.0", U32, 1764547200), (f"{R}.1.1.2.0", U32, 60),
        (f"{R}.1.1.3.0", INT, mib.OK), (f"{R}.1.1.4.0", INT, 3), (f"{R}.1.1.5.0", INT, 1),
        (f"{R}.1.1.6.0", G32, 12), (f"{R}.1.1.7.0", G32, 262144),
        (f"{R}.1.1.8.0", C64, 5), (f"{R}.1.1.9.0", C64, 300),
        (f"{R}.1.1.10.0", C64, 1), (f"{R}.1.1.11.0", C64, 40),
        *((f"{R}.1.2.{arc}.0", C64, 99 + arc) for arc in range(1, 12)),
        (f"{R}.1.3.1.2.1", STR, "bulk"), (f"{R}.1.3.1.2.2", STR, "web"),
        (f"{R}.1.3.1.3.1", C64, 10), (f"{R}.1.3.1.3.2", C64, 3),
        (f"{R}.1.3.1.4.1", C64, 1000), (f"{R}.1.3.1.4.2", C64, 180),
        (f"{R}.1.4.1.2.1", STR, "nic.rx_missed"), (f"{R}.1.4.1.2.2", STR, "softnet.dropped"),
        (f"{R}.1.4.1.3.1", STR, "nic.rx_missed@eth0"), (f"{R}.1.4.1.3.2", STR, "softnet.dropped"),
        (f"{R}.1.4.1.4.1", C64, 4), (f"{R}.1.4.1.4.2", C64, 0),
    ]
    assert mib.ROOT == (1, 3, 6, 1, 4, 1, 8072, 9999, 9999, 58)


def test_values_are_clamped_to_their_types_or_left_out():
    top64, top32 = (1 << 64) - 1, (1 << 32) - 1
    found = {o: v for o, _, v in mib.table({
        "version": 1, "time": 1e12, "conntrack_entries": 1 << 40, "conntrack_limit": top32,
        "drops": {"default_deny": [top64, 1 << 64], "invalid": [-1, True]},
        "seqadj": {"sack_blocks_translated": 1.0, "tcp_options_malformed": float("nan"),
                   "icmp_quotes_translated": "5", "icmp_quotes_dropped": None,
                   "flowtable_packets_translated": 10 ** 400},
        "ha_role": "MASTER", "ruleset_loaded": 1,
    }, now=NOW)}

    def value(suffix):
        return found.get(oid(f"{R}.{suffix}"))
    assert value("1.1.1.0") == top32                   # a time past 2106 latches too
    assert value("1.1.6.0") == top32 and value("1.1.7.0") == top32     # gauges latch
    assert value("1.1.8.0") == top64 and value("1.1.9.0") is None     # 2**64: left out
    assert value("1.1.10.0") is None and value("1.1.11.0") is None    # -1, a bool
    assert value("1.1.4.0") is None and value("1.1.5.0") is None      # "MASTER", 1
    assert not [o for o in found if o[:len(mib.ROOT) + 2] == oid(f"{R}.1.2")]


def test_text_is_printable_ascii_within_the_columns_size():
    table = mib.table({"version": 1, "classes": [
        ["evil\nPONG\r\n", 1, 2], ["x" * 300, 3, 4], ["caf\u00e9\u2028", 5, 6], ["", 7, 8],
        [7, 9, 10], ["ok", "many", -1], "bulk", ["short"], None,
    ], "loss": [["nic.rx_crc", "nic.rx_crc@" + "e" * 100, 1]]}, now=NOW)
    names = {o[-1]: v for o, k, v in table if o[:-1] == oid(f"{R}.1.3.1.2")}
    assert names == {1: "evil?PONG??", 2: "x" * NAME_MAX, 3: "caf??", 6: "ok"}
    assert [o[-1] for o, _, _ in table if o[:-1] == oid(f"{R}.1.3.1.3")] == [1, 2, 3]
    counter = mib.get(table, oid(f"{R}.1.4.1.3.1"))
    assert len(counter[2]) == mib.LOSS_TEXT_MAX
    for _, kind, value in table:
        assert kind != mib.OCTET_STRING or (value.isascii() and value.isprintable())


@pytest.mark.parametrize("snapshot", [None, [], "text", 5, {}, {"version": 2},
                                      {"version": True}, {"version": "1"}])
def test_what_is_not_a_snapshot_is_said_so(snapshot):
    assert mib.table(snapshot) == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.MALFORMED)]


@pytest.mark.parametrize("shape", [
    {"drops": [1, 2]}, {"drops": {"invalid": 5}}, {"seqadj": [1]}, {"classes": {"a": 1}},
    {"loss": "nic"}, {"classes": [[["a"], 1, 2]]}, {"time": "now"}, {"time": float("inf")},
    {"time": -5}, {"ha_role": ["master"]}, {"conntrack_entries": {}},
])
def test_a_damaged_part_gives_fewer_rows_and_no_exception(shape):
    table = mib.table({"version": 1, **shape})
    assert (mib.SNAPSHOT_STATE, mib.INTEGER, mib.OK) in table
    assert len(table) <= 3 and all(passpersist.answer(row) for row in table)


def test_the_age_follows_the_clock_on_the_same_table():
    table = mib.table(SNAPSHOT, now=NOW)
    mib.update_age(table, NOW + 3600)
    assert mib.get(table, mib.SNAPSHOT_AGE)[2] == 3660
    mib.update_age(table, 0)                    # a clock set back: no negative age
    assert mib.get(table, mib.SNAPSHOT_AGE)[2] == 0


def test_get_and_next_after_walk_the_table():
    table = mib.table(SNAPSHOT, now=NOW)
    assert mib.get(table, oid(f"{R}.1.1.6.0"))[2] == 12
    assert mib.get(table, oid(f"{R}.1.1.6")) is None
    assert mib.next_after(table, oid(f"{R}.1.1.6"))[0] == oid(f"{R}.1.1.6.0")
    assert mib.next_after(table, oid(".1"))[0] == oid(f"{R}.1.1.1.0")
    assert mib.next_after(table, oid(f"{R}.1.4.1.4.2")) is None
    walked, at = [], mib.ROOT
    while (row := mib.next_after(table, at)) is not None:
        walked.append(row)
        at = row[0]
    assert walked == table


def test_the_largest_snapshot_the_agent_can_write_fits_the_readers_limit():
    top = (1 << 64) - 1
    largest = {"version": 1, "time": 4102444800.999, "ha_role": "cluster",
               "ruleset_loaded": False, "conntrack_entries": top, "conntrack_limit": top,
               "drops": {name: [top, top] for name in mib.DROPS},
               "seqadj": {name: top for name in mib.SEQADJ},
               "classes": [[f"c{n:0{NAME_MAX - 1}d}", top, top] for n in range(MAX_CLASSES)],
               "loss": [["seqadj.icmp_quotes_dropped", "seqadj.icmp_quotes_dropped@"
                         + f"{n:015d}", top] for n in range(mib.LOSS_MAX)]}
    assert len(mib.snapshot_text(largest).encode()) <= mib.SNAPSHOT_MAX


# -- the protocol --------------------------------------------------------------------------

def converse(text, table=None):
    """What the responder answers to text from snmpd."""
    out = io.StringIO()
    passpersist.serve(io.StringIO(text), out,
                      lambda: mib.table(SNAPSHOT, now=NOW) if table is None else table)
    return out.getvalue()


def test_ping_get_and_getnext_across_the_tables():
    assert converse("PING\n") == "PONG\n"
    assert converse(f"get\n{R}.1.1.4.0\n") == f"{R}.1.1.4.0\ninteger\n3\n"
    assert converse(f"get\n{R}.1.1.1.0\n") == f"{R}.1.1.1.0\nunsigned\n1764547200\n"
    assert converse(f"get\n{R}.1.1.6.0\n") == f"{R}.1.1.6.0\ngauge\n12\n"
    assert converse(f"getnext\n{R}\n") == f"{R}.1.1.1.0\nunsigned\n1764547200\n"
    assert converse(f"getnext\n{R}.1.1.11.0\n") == f"{R}.1.2.1.0\ncounter64\n100\n"
    assert converse(f"getnext\n{R}.1.2.11.0\n") == f"{R}.1.3.1.2.1\nstring\nbulk\n"
    assert converse(f"getnext\n{R}.1.3.1.4.2\n") == f"{R}.1.4.1.2.1\nstring\nnic.rx_missed\n"
    assert converse(f"getnext\n{R}.1.3.1.2.2\n") == f"{R}.1.3.1.3.1\ncounter64\n10\n"
    assert converse(f"get\n{R}.1.3.1.2.3\n") == "NONE\n"
    assert converse(f"get\n{R}.1.1\n") == "NONE\n"


def test_the_end_of_the_subtree_and_what_lies_beyond_are_none():
    assert converse(f"getnext\n{R}.1.4.1.4.2\n") == "NONE\n"
    assert converse(f"getnext\n{R}.2\n") == "NONE\n"
    assert converse(f"getnext\n{R[:-3]}.59\n") == "NONE\n"
    assert converse(f"getnext\n{R}\n", table=[]) == "NONE\n"
    stray = [((1, 3, 6, 1, 4, 1, 8072, 9999, 9999, 59, 1), mib.INTEGER, 1)]
    assert converse(f"getnext\n{R}\n", table=stray) == "NONE\n"


@pytest.mark.parametrize("garbage", [
    "", "iso.3.6", "1.3.6.1.x", "..1.3", ".1..3", ".1.3.", "-1.3", ".1.3.6 ", " .1.3",
    ".1.3.\u0664", ".1.3.4294967296", ".1" + ".1" * 128, ".1.3.6\x00.1", "NONE",
])
def test_what_is_not_a_dotted_number_is_none(garbage):
    assert converse(f"get\n{garbage}\ngetnext\n{garbage}\nPING\n") == "NONE\nNONE\nPONG\n"


def test_a_set_is_refused_as_each_version_of_snmpd_sends_it():
    set_593 = f"set\n{R}.1.1.4.0\ninteger 2\n\n"          # net-snmp 5.9.3: a blank line too
    set_later = f"set\n{R}.1.1.4.0\nstring \"PONG\"" # later: no line break at all
    after = f"PING\nget\n{R}.1.1.6.0\n"
    expected = f"not-writable\nPONG\n{R}.1.1.6.0\ngauge\n12\n"
    assert converse(set_593 + after) == expected
    assert converse(set_later + after) == expected
    assert converse(f"set\n{R}.1.1.4.0\n") == "not-writable\n"


def test_an_empty_line_or_the_end_of_input_ends_it():
    assert converse("PING\n\nPING\n") == "PONG\n"
    assert converse("get\n") == "" and converse("getnext") == ""
    assert converse("frobnicate\nPING\n") == "PONG\n"


def test_no_value_can_add_a_line_to_an_answer():
    forged = [(mib.ROOT + (1,), mib.OCTET_STRING, "a\nPONG"), (mib.ROOT + (2,),
              mib.OCTET_STRING, ""), (mib.ROOT + (3,), mib.INTEGER, "1\n2"),
              (mib.ROOT + (4,), mib.COUNTER64, 1 << 64), (mib.ROOT + (5,), mib.GAUGE32, True),
              (mib.ROOT + (6,), "Opaque", 1), (mib.ROOT + (7,), mib.OCTET_STRING, b"x")]
    answers = [converse(f"get\n{R}.{n}\n", table=forged) for n in range(1, 8)]
    assert answers == [f"{R}.1\noctet\n61 0a 50 4f 4e 47\n", f"{R}.2\noctet\n\n",
                       "NONE\n", "NONE\n", "NONE\n", "NONE\n", "NONE\n"]


# -- the snapshot file ---------------------------------------------------------------------

def state(table):
    return mib.get(table, mib.SNAPSHOT_STATE)[2]


def test_the_file_is_read_again_only_when_it_changed(tmp_path, monkeypatch):
    path = tmp_path / "counters.json"
    path.write_text(mib.snapshot_text(SNAPSHOT))
    load, reads = passpersist.SnapshotFile(str(path)), []
    table = mib.table
    monkeypatch.setattr(mib, "table", lambda *a, **k: reads.append(1) or table(*a, **k))
    first = load()
    assert state(first) == mib.OK and load() is first and len(reads) == 1
    stamp = path.stat()
    path.write_text(mib.snapshot_text({**SNAPSHOT, "conntrack_entries": 99}))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))     # same size and time
    assert mib.get(load(), oid(f"{R}.1.1.6.0"))[2] == 12 and len(reads) == 1
    replacement = tmp_path / "new.json"
    replacement.write_text(mib.snapshot_text({**SNAPSHOT, "conntrack_entries": 99}))
    replacement.replace(path)                                       # the agent's rename
    assert mib.get(load(), oid(f"{R}.1.1.6.0"))[2] == 99 and len(reads) == 2


def test_a_file_that_is_not_a_snapshot_leaves_the_state_alone(tmp_path):
    path = tmp_path / "counters.json"
    load = passpersist.SnapshotFile(str(path), limit=1 << 16)
    assert load() == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.MISSING)]
    for content in (b"{", b"\xff\xfe", b"[" * 50_000, b'{"version": 1, "time": '
                    + b"9" * 5000 + b"}", b"NaN", json.dumps([SNAPSHOT]).encode()):
        path.write_bytes(content)
        assert load() == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.MALFORMED)], content[:20]
    path.write_bytes(b" " * (1 << 16) + b"{}")
    assert load() == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.UNREADABLE)]
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(mib.snapshot_text(SNAPSHOT))
    path.symlink_to(target)
    assert load() == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.UNREADABLE)]
    path.unlink()
    os.mkfifo(path)                                     # opened without blocking
    assert load() == [(mib.SNAPSHOT_STATE, mib.INTEGER, mib.UNREADABLE)]


# -- the module ----------------------------------------------------------------------------

def smi(tool, *args, module=MODULE):
    if shutil.which(tool) is None:
        pytest.fail(f"missing: {tool} (Debian package smitools) - run `make test`, which "
                    "installs it")
    # SMIPATH alone: -c /dev/null keeps /etc/smi.conf's paths (net-snmp's MIBs) out
    return subprocess.run([tool, "-c", "/dev/null", *args, str(module)], capture_output=True,
                          text=True, env={**os.environ, "SMIPATH": str(BASE_MIBS)})


def test_smilint_finds_nothing_at_its_most_pedantic_level(tmp_path):
    found = smi("smilint", "-l", "6", "-s", "-m")
    # smilint exits 0 whatever it found: its output is the verdict
    assert (found.returncode, found.stdout + found.stderr) == (0, "")
    broken = tmp_path / MODULE.name
    broken.write_text(MODULE.read_text().replace("tuskLossPackets     Counter64",
                                                 "tuskLossPackets     Gauge32"))
    refused = smi("smilint", "-l", "6", "-m", module=broken)
    assert "sequence-type-mismatch" in refused.stdout + refused.stderr


def test_every_row_is_an_object_of_the_module_with_its_type():
    found = smi("smidump", "-f", "python")
    nodes = ast.literal_eval(found.stdout[found.stdout.index("MIB = ") + 6:])["nodes"]
    kinds = {"Unsigned32": mib.UNSIGNED32, "Gauge32": mib.GAUGE32, "Counter64": mib.COUNTER64,
             "TruthValue": mib.INTEGER, "Enumeration": mib.INTEGER,
             "OctetString": mib.OCTET_STRING}
    objects = {}
    for node in nodes.values():
        if node["nodetype"] in ("scalar", "column") and node["access"] == "readonly":
            syntax = node["syntax"]["type"]
            kind = syntax.get("basetype") or syntax["name"]
            objects[tuple(map(int, node["oid"].split(".")))] = (kinds[kind], syntax)
    seen = set()
    for row_oid, kind, value in mib.table(SNAPSHOT, now=NOW):
        declared = row_oid[:-1]         # a scalar's .0, a column's single index
        assert declared in objects, row_oid
        seen.add(declared)
        assert objects[declared][0] == kind, row_oid
        syntax = objects[declared][1]
        if syntax.get("basetype") == "Enumeration":
            assert str(value) in {n["number"] for n in syntax.values() if isinstance(n, dict)}
        if "range" in syntax:
            assert int(syntax["range"]["min"]) <= len(value) <= int(syntax["range"]["max"])
    assert seen == set(objects)             # the full snapshot has every object
