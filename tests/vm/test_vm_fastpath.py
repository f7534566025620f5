"""Automatic promotion of elephants to the flowtable fast path (issue 35), judged from
the guest scenario policy-auto-fastpath (tests/vm/guest/scenarios/policy_auto_fastpath.py)
on Tusk's kernel: a connection of a default class stays on the slow path for its first
megabyte and is offloaded past it, its bytes still counted (the flowtable's counter);
never never promotes; a class's own threshold holds; a randomised class is promoted
with its translation; promoted connections are masqueraded ones, and one dropped as the
Flows page drops it gets nothing more through. Applying a policy with auto classes turns
conntrack's accounting on, without which no connection would ever reach the threshold."""

import collectors
import pytest
from saved import load
from test_seqrand import IPS_OFFLOAD

CLASSES = {"elephant": 1, "stay": 2, "patient": 3, "rand": 4}   # ordinals (ct mark >> 17)
CLASS_SHIFT = 17
FW_S_V4 = "10.10.2.1"           # fw's outside address: the masquerade's
IPS_SRC_NAT = 1 << 4
DROPPED_AFTER = 2_000_000       # what the client sends after the drop


@pytest.fixture(scope="module")
def folder(scenario):
    return scenario("policy-auto-fastpath")


def step(folder, name, which):
    saved = load(folder, f"{name}-{which}.json")
    entry = saved["entry"]
    return saved["sent"], entry, bool(entry["status"] & IPS_OFFLOAD)


def test_applying_auto_classes_turns_conntrack_accounting_on(folder):
    assert (folder / "acct.txt").read_text().strip() == "1"


@pytest.mark.parametrize("name", ["elephant", "rand"])
def test_a_default_class_promotes_a_connection_past_its_first_megabyte(folder, name):
    _, small, offloaded = step(folder, name, "small")
    assert not offloaded, small
    assert sum(small["bytes"]) < 1_000_000
    sent, past, offloaded = step(folder, name, "past")
    assert offloaded, past
    assert past["mark"] >> CLASS_SHIFT == CLASSES[name]
    # the flowtable's counter: 6 MB more, on the fast path, in conntrack's count
    more_sent, more, offloaded = step(folder, name, "more")
    assert offloaded, more
    assert more["bytes"][0] - past["bytes"][0] >= more_sent - sent, (past, more)
    received, sent = map(int, (folder / f"{name}-received.txt").read_text().split())
    assert received == sent - (DROPPED_AFTER if name == "elephant" else 0)
    # masqueraded towards outside: the promoted connection is a translated one
    assert past["reply"]["dst"] == FW_S_V4 and past["status"] & IPS_SRC_NAT, past


def test_a_promoted_connection_dropped_as_the_flows_page_does_stops(folder):
    dropped = load(folder, "elephant-dropped.json")
    assert dropped["entry"]["status"] & IPS_OFFLOAD, dropped
    after = load(folder, "elephant-after-drop.json")
    assert after["received_after"] == after["received_before"] == dropped["received"], after
    assert after["entries"] == [], after["entries"]


def test_a_randomised_class_is_promoted_with_its_translation(folder):
    _, entry, _ = step(folder, "rand", "more")
    assert entry["helper"] == "seqrand-bi" and entry["seqadj_orig"], entry
    assert load(folder, "after-seqadj.json")["flowtable_packets_translated"] > 100


def test_never_keeps_a_connection_on_the_slow_path(folder):
    for which in ("small", "past", "more"):
        _, entry, offloaded = step(folder, "stay", which)
        assert not offloaded, (which, entry)
    _, entry, _ = step(folder, "stay", "more")
    assert sum(entry["bytes"]) > 8_000_000


def test_a_class_threshold_of_its_own_holds(folder):
    for which in ("small", "past", "more"):
        _, entry, offloaded = step(folder, "patient", which)
        assert not offloaded, (which, entry)
    _, entry, offloaded = step(folder, "patient", "late")
    assert offloaded, entry


def test_a_policy_change_decides_again_and_the_first_policy_promotes_once_more(folder):
    """Applied while the connection is on the fast path, a policy whose class promotes only
    past 50 MB: the table's replacement ends the fast path and the new rule keeps the
    30 MB connection off it; the first policy again puts it back."""
    changed = load(folder, "patient-changed.json")["entry"]
    assert not changed["status"] & IPS_OFFLOAD, changed
    assert sum(changed["bytes"]) > 30_000_000
    restored = load(folder, "patient-restored.json")["entry"]
    assert restored["status"] & IPS_OFFLOAD, restored
    assert restored["mark"] >> CLASS_SHIFT == CLASSES["patient"]
    received, sent = map(int, (folder / "patient-received.txt").read_text().split())
    assert received == sent


def test_the_ruleset_promotes_by_the_class_ordinal_and_counts_on_the_fast_path(folder):
    ruleset = (folder / "ruleset.txt").read_text()
    # promoted: the mark's fast-path bit set as the connection goes to the flowtable
    promote = "ct mark set ct mark | 0x00010000 flow add @fastpath"
    assert f"ct bytes > 1000000 {promote}" in ruleset
    assert f"ct bytes > 20000000 {promote}" in ruleset
    flowtable = ruleset.split("flowtable fastpath {")[1].split("\n\t}")[0]
    assert "\n\t\tcounter" in flowtable, flowtable


def test_an_interface_made_after_the_policy_loaded_joins_the_fast_path(folder):
    """At boot the firewall loads the confirmed policy before networkd makes the VLANs and
    bonds its zones name, and the kernel refuses a flowtable over a device that does not
    exist: the boot step loads the policy with the flowtable over the devices there are,
    and the agent adds the others when they appear (the appliance failed its boot with a
    policy on a VLAN and a bond before)."""
    said = load(folder, "late-boot.json")
    assert said["applied"] == ["late7", "veth-c", "veth-s"], said
    assert said["deleted"] == ["veth-c", "veth-s"], said       # the kernel let it go
    assert said["boot"]["exit"] == 0 and said["boot"]["out"].strip().endswith("[false, true]"), \
        said["boot"]
    assert "policy revision" in said["boot"]["out"] and "late7 when it appears" in \
        said["boot"]["out"], said["boot"]
    assert said["booted"] == ["veth-c", "veth-s"], said
    assert said["attach"]["exit"] == 0 and said["attach"]["out"].strip() == '[["late7"], []]', \
        said["attach"]
    assert said["attached"] == ["late7", "veth-c", "veth-s"], said
    assert said["attach_again"]["out"].strip() == "[[], []]", said["attach_again"]
    _, more, offloaded = step(folder, "late", "more")
    assert offloaded, more
    received, sent = map(int, (folder / "late-received.txt").read_text().split())
    assert received == sent
    # what the client sent past 1.5 MB took the fast path, not the forward hook
    probe = (folder / "late-probe.txt").read_text()
    slow = int(probe.split("counter packets ")[1].split()[0])
    assert slow < 10, probe


def test_a_bypass_of_the_ids_hook_puts_the_flow_on_the_fast_path_but_not_past_the_policy(
        scenario):
    """The IDS hook's bypass (flows/core/hook.py) on Tusk's kernel: a class that never
    takes the fast path has its connection offloaded to the hook's flowtable once the
    server's address is bypassed; a port the policy drops stays dropped."""
    folder = scenario("hook-bypass")
    assert load(folder, "bypassed-client.json")["end"]["sum_received"]["bytes"] > 0
    entries = [e for e in load(folder, "bypassed-entries.json")
               if e["orig"]["proto"] == 6 and e["orig"]["dport"] == 5202]
    assert any(e["status"] & IPS_OFFLOAD for e in entries), entries
    table = (folder / "hook.txt").read_text()
    assert "flowtable bypass" in table and "flow add @bypass" in table, table
    assert load(folder, "dropped.json") == {"connected": False}


def exported(folder, tmp_path):
    """What tusk-flowexport sent in the guest (flowexport.bin), replayed over loopback into
    nfdump's nfcapd here and read back with nfdump: the records as the collector has
    them, with the observation domain of each."""
    return collectors.replay((folder / "flowexport.bin").read_bytes(), tmp_path / "nfcapd")


def test_flow_export_counts_the_fast_paths_bytes_and_says_it_took_it(folder, tmp_path):
    """Issue 40: each connection's records add up to what crossed - on the fast path
    too, whose packets conntrack counts through the flowtable's counter - and carry the
    fast path in their observation domain (bit 0: the mark's fast-path bit, set when a
    class promotes), with the class's ordinal in bits 1-15."""
    status = load(folder, "flowexport-status.json")
    assert status["lost_events"] == 0 and not any(status["send_errors"].values()), status
    records = exported(folder, tmp_path)
    for name, ordinal in CLASSES.items():
        port = {"elephant": 5301, "stay": 5302, "patient": 5303, "rand": 5304}[name]
        mine = [r for r in records if r["dst_port"] == port]
        received, _ = map(int, (folder / f"{name}-received.txt").read_text().split())
        total = sum(r["in_bytes"] for r in mine)
        # IP bytes counted, payload received: the headers on top, never less
        assert received <= total <= 1.08 * received, (name, total, received, len(mine))
        domains = {r["domain"] for r in mine}
        fast = name != "stay"
        assert domains <= {ordinal << 1, ordinal << 1 | 1}, (name, domains)
        assert (ordinal << 1 | 1 in domains) == fast, (name, domains)
        # masqueraded: the record carries the address the server saw
        assert {r["src4_xlt_ip"] for r in mine} == {FW_S_V4}, (name, mine[:1])
