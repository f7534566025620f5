"""A randomised connection on the fast path that a backup learns from a dump of the
master's table, then carries on (guest scenario ha-fastpath, kernel-patches/0019).
tests/vm/unfix/0019-offloaded-entries-dumped-without-timeout.patch undoes 0019: the
dump has no timeout, fwB never learns the connection, and these fail."""
import pytest
from saved import load
from test_seqrand import offset

PORT = 5201
TCP_CONNTRACK_ESTABLISHED = 3
IPS_OFFLOAD = 1 << 14


@pytest.fixture(scope="module")
def fastpath(scenario):
    return scenario("ha-fastpath")


def fwb_entry(folder, client_port):
    entries = [e for e in load(folder, "b-entries.json") if e["orig"]
               and e["orig"]["proto"] == 6 and e["orig"]["sport"] == client_port
               and e["orig"]["dport"] == PORT]
    assert len(entries) == 1, entries
    return entries[0]


def test_a_dump_of_an_offloaded_entry_has_its_timeout_and_tcp_state(fastpath):
    entry = load(fastpath, "a-offloaded.json")
    assert entry["status"] & IPS_OFFLOAD, "the connection never took the fast path"
    assert entry["timeout"] and entry["timeout"] > 0, entry
    assert entry["tcp_state"] == TCP_CONNTRACK_ESTABLISHED, entry


def test_a_backup_learns_it_from_the_dump_with_its_offsets(fastpath):
    said = load(fastpath, "flow.json")
    assert said["learnt"], said.get("why")
    ours, theirs = load(fastpath, "a-offloaded.json"), fwb_entry(fastpath, said["client_port"])
    assert theirs["tcp_state"] == TCP_CONNTRACK_ESTABLISHED, theirs
    assert theirs["helper"] == "seqrand-bi", theirs
    for direction in ("seqadj_orig", "seqadj_reply"):
        assert offset(theirs[direction]) == offset(ours[direction]) != 0, (ours, theirs)
    health = load(fastpath, "sync-b.json")
    assert health["injected"] >= 1 and health["inject_failures"] == 0, health


def test_the_backup_carries_the_flow_on_when_the_master_dies(fastpath):
    said = load(fastpath, "flow.json")
    assert said["error"] == "" and said.get("echoed_after_failover", 0) >= 60, said
