"""The configurations docs/HA.md warns against, each with a randomised flow through a
pair of firewalls on Tusk's kernel (guest scenario ha-hazards, in a boot of its own that
make test runs in its second session): what each costs, and what protects against it."""
import pytest
from saved import load
from test_seqrand import assert_translated, offset
from test_vm_ha import entry_of, flow_of


@pytest.fixture(scope="module")
def hazards(beside_scenario):
    return beside_scenario("ha-hazards")


def hazard_run(folder, run):
    said, flow = flow_of(folder, run)
    entry = entry_of(folder, f"{run}-b-entries.json", said["client_port"])
    return said, flow, entry


def test_a_state_filter_still_gives_the_backup_the_offsets(hazards):
    """conntrackd with `State Accept { ESTABLISHED ... }` never syncs the SYN-time
    events; since kernel-patches/0018 every later event carries the offsets, so fwB
    still learns them and the flow goes on through it (tests/vm/unfix/0018-events-
    without-offsets.patch undoes that: fwB's entry has none, and this fails)."""
    said, flow, entry = hazard_run(hazards, "filter")
    r_o, r_r = flow.offsets()
    assert entry["helper"] == "seqrand-bi", entry
    assert (offset(entry["seqadj_orig"]), offset(entry["seqadj_reply"])) == (r_o, r_r), entry
    assert said["error"] == "" and "stalled" not in said and said["echoed"] >= 60, said
    assert_translated(flow)


def test_loose_tracking_picks_the_flow_up_midstream_untranslated(hazards):
    """nf_conntrack_tcp_loose=1 on a backup whose sync comes late: the flow's first
    packets through it make a midstream entry, which seqrand cannot translate (counted)."""
    said, _, _ = hazard_run(hazards, "loose")
    gap = load(hazards, "loose-b-seqadj-gap.json")
    assert gap["seqrand_skipped_midstream"] >= 1, (gap, said)
    picked_up = entry_of(hazards, "loose-b-entries-gap.json", said["client_port"])
    assert picked_up["seqadj_orig"] is None and picked_up["seqadj_reply"] is None, picked_up
    # what it forwarded untranslated was nothing the endpoints could use
    assert said["during_gap"] == 0, said


def test_a_late_sync_heals_a_connection_picked_up_midstream(hazards):
    """The late sync's offsets update of that entry is refused (0018: the entry has no
    seqadj extension), so conntrackd makes the entry again, with the offsets: the flow
    goes on (tests/vm/unfix/0018-update-ignored-without-extension.patch undoes the
    refusal: the update is dropped in silence, the flow stays stalled, this fails)."""
    said, flow, entry = hazard_run(hazards, "loose")
    r_o, r_r = flow.offsets()
    assert (offset(entry["seqadj_orig"]), offset(entry["seqadj_reply"])) == (r_o, r_r), entry
    assert said["error"] == "" and "stalled" not in said, said
    assert said["echoed"] >= said["before_failover"] + 30, said


def test_strict_tracking_waits_for_the_sync_without_a_midstream_entry(hazards):
    said, flow, entry = hazard_run(hazards, "strict")
    gap = load(hazards, "strict-b-seqadj-gap.json")
    assert gap["seqrand_skipped_midstream"] == 0, gap
    assert not [e for e in load(hazards, "strict-b-entries-gap.json")
                if e["orig"] and e["orig"]["sport"] == said["client_port"]]
    assert said["during_gap"] == 0, said
    r_o, r_r = flow.offsets()
    assert (offset(entry["seqadj_orig"]), offset(entry["seqadj_reply"])) == (r_o, r_r), entry
    assert said["error"] == "" and "stalled" not in said, said
