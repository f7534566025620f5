"""Apply, confirm and roll back against real nftables in the lab's fw namespace.

Each test starts from an empty fw (no table inet tusk) and its own state directory.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from kit import wait_until
from tuskcli import TUSK, run_tusk

MINIMAL = """
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: web, protocol: tcp, ports: [{port}]}}
classes:
  - name: {name}
    from: inside
    to: outside
    services: [web]
    action: accept
"""

TIMEOUT = 10   # the smallest confirm timeout the engine accepts


def policy(tmp_path, name, port=80, extra=""):
    path = tmp_path / f"{name}.yaml"
    path.write_text(MINIMAL.format(name=name, port=port) + extra)
    return path


def live(lab):
    """The class names in the live table, or None when there is no table."""
    result = lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk", check=False)
    if result.returncode != 0:
        return None
    return sorted({line.split("comment \"tusk: classes[")[1].split("] ")[1].rstrip('"')
                   for line in result.stdout.splitlines() if 'comment "tusk: classes[' in line})


def outcome(state, rev):
    with open(state / "revisions" / f"{rev:06d}" / "meta.json") as handle:
        return json.load(handle)["outcome"]


@pytest.fixture
def fw(lab, tmp_path):
    lab.ns(lab.fw, "nft", "delete", "table", "inet", "tusk", check=False)
    state = tmp_path / "state"

    def tusk(*args, check=True):
        return run_tusk(*args, netns=lab.fw, state_dir=state, check=check)
    tusk.state = state
    yield tusk
    # let no watchdog of this test act on the next one
    if (state / "pending.json").exists():
        tusk("rollback", check=False)


def test_apply_then_confirm_keeps_the_ruleset(lab, fw, tmp_path):
    result = fw("apply", policy(tmp_path, "alpha"), "--timeout", TIMEOUT)
    assert "revision 1 applied" in result.stdout
    assert live(lab) == ["alpha"]
    fw("confirm")
    # the watchdog, the only one that rolls back, ends within a tick of the confirm
    wait_until(lambda: not _watchdogs(fw.state), 5, "the watchdog ending after the confirm")
    assert live(lab) == ["alpha"], "a confirmed revision must stay"
    assert outcome(fw.state, 1) == "confirmed"
    history = fw("history").stdout
    assert "confirmed *" in history


def test_unconfirmed_apply_rolls_back_by_itself(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    fw("apply", policy(tmp_path, "beta"), "--timeout", TIMEOUT)
    assert live(lab) == ["beta"]
    wait_until(lambda: live(lab) == ["alpha"], TIMEOUT + 5, "rollback to alpha")
    # the watchdog restores the ruleset first, then records the outcome
    wait_until(lambda: outcome(fw.state, 2) != "pending", 5, "the outcome to be recorded")
    assert outcome(fw.state, 2) == f"rolled back: not confirmed within {TIMEOUT} s"
    assert fw("confirm", check=False).returncode == 24   # NOT_PENDING


def test_first_apply_unconfirmed_removes_the_table(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"), "--timeout", TIMEOUT)
    assert live(lab) == ["alpha"]
    wait_until(lambda: live(lab) is None, TIMEOUT + 5, "the table to go away")


def test_rollback_survives_sigkill_of_the_applying_process(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    argv = [sys.executable, TUSK, "policy", "--netns", lab.fw, "--state-dir", str(fw.state),
            "apply", "--wait", "--timeout", str(TIMEOUT), str(policy(tmp_path, "beta"))]
    applier = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    wait_until(lambda: live(lab) == ["beta"], 10, "beta to be live")
    assert applier.poll() is None, "apply --wait must still be waiting for confirmation"
    os.killpg(applier.pid, signal.SIGKILL)
    applier.wait()
    assert applier.returncode == -signal.SIGKILL
    assert live(lab) == ["beta"]
    wait_until(lambda: live(lab) == ["alpha"], TIMEOUT + 5, "rollback after SIGKILL")
    wait_until(lambda: outcome(fw.state, 2) != "pending", 5, "the outcome to be recorded")
    assert outcome(fw.state, 2).startswith("rolled back: not confirmed")


def _watchdogs(state):
    result = subprocess.run(["pgrep", "-f", f"tusklib.commit policy {state}"],
                            capture_output=True, text=True)
    return [int(pid) for pid in result.stdout.split()]


def test_recover_rolls_back_when_the_watchdog_died_too(lab, fw, tmp_path):
    """A power cut kills the watchdog with everything else; recover at start-up acts."""
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    fw("apply", policy(tmp_path, "beta"), "--timeout", TIMEOUT)
    wait_until(lambda: _watchdogs(fw.state), 5, "the watchdog to start")
    for pid in _watchdogs(fw.state):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _watchdogs(fw.state), 5, "the killed watchdog gone")
    # recover rolls back only what is overdue: past the confirm deadline
    deadline = json.loads((fw.state / "pending.json").read_text())["deadline"]
    wait_until(lambda: time.time() > deadline, TIMEOUT + 5, "the confirm deadline to pass")
    assert live(lab) == ["beta"], "nothing is left to roll back without the watchdog"
    assert fw("recover").stdout.strip() == "rolled back"
    assert live(lab) == ["alpha"]


def test_recover_rearms_a_watchdog_for_a_pending_revision(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"), "--timeout", 30)
    for pid in _watchdogs(fw.state):
        os.kill(pid, signal.SIGKILL)
    assert fw("recover").stdout.strip() == "watching"
    wait_until(lambda: _watchdogs(fw.state), 5, "a new watchdog")
    fw("confirm")
    wait_until(lambda: not _watchdogs(fw.state), 5, "the watchdog to leave after confirm")


def test_rollback_now_restores_the_confirmed_revision(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    fw("apply", policy(tmp_path, "beta"))
    result = fw("rollback")
    assert "revision 2 rolled back" in result.stdout
    assert live(lab) == ["alpha"]
    assert outcome(fw.state, 2) == "rolled back by root"


def test_rollback_to_an_earlier_revision_is_a_new_confirmable_apply(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    fw("apply", policy(tmp_path, "beta"))
    fw("confirm")
    fw("rollback", "1", "--timeout", TIMEOUT)
    assert live(lab) == ["alpha"]
    fw("confirm")
    history = fw("history").stdout.splitlines()
    assert "rollback to 1" in history[2] and history[2].endswith("confirmed *")
    diff = fw("diff", "--revision", "2", "--revision", "3").stdout
    assert '-\tcounter class_beta {' in diff and '+\tcounter class_alpha {' in diff


def test_a_rollback_to_a_revision_from_before_the_hardware_table_removes_it(lab, fw,
                                                                           tmp_path):
    """Every ruleset deletes and makes again table tusk_offload, the hardware fast path
    (empty here: no class has hardware: true). A revision stored by a release before it
    does not name that table: rolling back to one must still remove the table a later
    revision left, whose rules would promote connections by another policy's ordinals."""
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    stored = fw.state / "revisions" / "000001" / "ruleset.nft"
    assert "}\ntable inet tusk_offload\ndelete table inet tusk_offload\n" in stored.read_text()
    stored.write_text(stored.read_text().replace(
        "table inet tusk_offload\ndelete table inet tusk_offload\n", ""))
    fw("apply", policy(tmp_path, "beta"))
    # what a pending revision with hardware classes leaves in place
    lab.ns(lab.fw, "nft", "-f", "-", input="table inet tusk_offload {\n chain forward {\n"
           "  type filter hook forward priority filter + 1; policy accept;\n"
           '  counter comment "a later revision\'s"\n }\n}\n')
    fw("rollback")          # restores revision 1's stored ruleset
    assert live(lab) == ["alpha"]
    assert lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk_offload",
                  check=False).returncode != 0


def test_a_rollback_to_a_revision_from_before_the_bridge_table_closes_the_bridges(lab, fw,
                                                                               tmp_path):
    """Every ruleset makes table bridge tusk_bridge anew. A revision stored by a release
    before it does not name it: rolling back to one must not leave a later revision's
    bridged classes in place - the bridges fail closed, as that revision's table would
    have them."""
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    stored = fw.state / "revisions" / "000001" / "ruleset.nft"
    text = stored.read_text()
    start = text.index("# The classes of the policy's bridged zones")
    stored.write_text(text[:start])
    fw("apply", policy(tmp_path, "beta"))
    # what a pending revision's bridged classes leave in place (accepting all, here)
    lab.ns(lab.fw, "nft", "-f", "-", input="table bridge tusk_bridge\n"
           "delete table bridge tusk_bridge\ntable bridge tusk_bridge {\n chain forward {\n"
           "  type filter hook forward priority filter; policy accept;\n }\n}\n")
    fw("rollback")
    assert live(lab) == ["alpha"]
    listed = lab.ns(lab.fw, "nft", "list", "table", "bridge", "tusk_bridge").stdout
    assert "policy drop;" in listed and "no bridged zone - nothing crosses a bridge" in listed


def test_applying_over_a_pending_apply_supersedes_it(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    fw("apply", policy(tmp_path, "beta"), "--timeout", TIMEOUT)
    fw("apply", policy(tmp_path, "gamma"), "--timeout", TIMEOUT)
    assert live(lab) == ["gamma"]
    assert outcome(fw.state, 2) == "superseded by 3"
    wait_until(lambda: live(lab) == ["alpha"], TIMEOUT + 5, "rollback to the confirmed alpha")


def test_a_refused_apply_leaves_the_previous_ruleset_in_place(lab, fw, tmp_path):
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    before = lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk").stdout
    # seqrand needs Tusk's kernel: the host kernel refuses, naming the class
    result = fw("apply", policy(tmp_path, "beta", extra="    seqrand: initiator\n"), check=False)
    assert result.returncode == 20, result.stderr   # CAPABILITY
    assert "classes[0].seqrand: class 'beta' needs the kernel's 'seqrand' conntrack helper" \
        in result.stderr
    assert lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk").stdout == before
    assert outcome(fw.state, 2).startswith("refused: classes[0].seqrand")
    assert not (fw.state / "pending.json").exists()


def test_fastpath_is_refused_without_flowtables(lab, fw, tmp_path):
    result = fw("apply", policy(tmp_path, "beta", extra="    fastpath: true\n"), check=False)
    assert result.returncode == 20, result.stderr
    assert "classes[0].fastpath: class 'beta' needs flowtables (CONFIG_NF_FLOW_TABLE)" \
        in result.stderr
    assert live(lab) is None


def test_auto_classes_stay_on_the_slow_path_of_a_kernel_without_flowtables(lab, fw, tmp_path):
    """The default (fastpath: auto) asks for nothing this kernel lacks: no flowtable, no
    promotion rule; the revision and the CLI say so. Its hash is that of the ruleset for a
    kernel with flowtables, so the dashboard compares a draft with it as on the box."""
    import hashlib

    from policy.core.normalise import load_policy_file
    from policy.core.render import render
    path = policy(tmp_path, "gamma")
    result = fw("apply", path, "--timeout", TIMEOUT)
    assert "fast path of the auto classes: off: the kernel has no flowtable" in result.stdout
    listing = lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk").stdout
    assert "flowtable" not in listing and "flow add" not in listing
    assert live(lab) == ["gamma"]
    with open(fw.state / "revisions" / "000001" / "meta.json") as handle:
        meta = json.load(handle)
    canonical = render(load_policy_file(path))
    assert "flow add @fastpath" in canonical
    assert meta["canonical_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert meta["auto_fastpath"].startswith("off: ")
    # never: nothing to say
    fw("apply", policy(tmp_path, "delta", extra="    fastpath: never\n"), "--timeout", TIMEOUT)
    with open(fw.state / "revisions" / "000002" / "meta.json") as handle:
        assert "auto_fastpath" not in json.load(handle)


def test_a_nonexistent_interface_is_refused_before_anything_is_applied(lab, fw, tmp_path):
    path = tmp_path / "eth9.yaml"
    path.write_text(policy(tmp_path, "alpha").read_text().replace("veth-s", "eth9"))
    result = fw("apply", path, check=False)
    assert result.returncode == 17, result.stderr   # INTERFACE
    assert f"zones[1].interfaces[0]: eth9 does not exist on namespace {lab.fw}" in result.stderr
    assert live(lab) is None
    assert fw("check", path, check=False).returncode == 17


def test_invalid_policy_records_nothing_and_changes_nothing(lab, fw, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.format(name="alpha", port=70000))
    result = fw("apply", bad, check=False)
    assert result.returncode == 14
    assert "services[0].ports[0]: 70000 is above 65535" in result.stderr
    assert live(lab) is None
    assert fw("history").stdout == ""


def test_confirm_timeout_outside_its_range_is_refused(lab, fw, tmp_path):
    result = fw("apply", policy(tmp_path, "alpha"), "--timeout", 3, check=False)
    assert result.returncode == 14
    assert "confirm_timeout: 3 s is outside 10..3600 s" in result.stderr
    assert live(lab) is None


def test_check_and_diff_against_the_live_revision(lab, fw, tmp_path):
    assert fw("check", policy(tmp_path, "alpha")).returncode == 0
    fw("apply", policy(tmp_path, "alpha"))
    fw("confirm")
    diff = fw("diff", policy(tmp_path, "alpha", port=443)).stdout
    assert "--- revision 1" in diff
    assert ('-\t\ttcp dport 80 ct mark set 0x00020000 counter name "class_alpha" accept') \
        in diff
    assert ('+\t\ttcp dport 443 ct mark set 0x00020000 counter name "class_alpha" accept') \
        in diff
    status = fw("status").stdout
    assert "confirmed revision: 1" in status and "table inet tusk loaded: yes" in status
    # the host kernel has neither Tusk's helper nor flowtables; nftables itself is there
    assert "kernel seqrand helper: missing" in status
    assert "kernel seqrand-bi helper: missing" in status
    assert "kernel flowtable: missing" in status
    assert "kernel seqrand on the fast path: missing" in status


def test_capability_probe_tells_present_from_missing(lab):
    """The probe asks the kernel: the stock ftp helper is there, seqrand is not, nor a
    fast path that translates sequence numbers (the VM scenario policy-fastpath applies
    a class with both on Tusk's kernel)."""
    from policy.core.capabilities import has_fastpath_seqadj, has_helper
    from tusklib.target import Target
    target = Target(lab.fw)
    assert has_helper(target, "ftp")
    assert not has_helper(target, "seqrand")
    assert not has_fastpath_seqadj(target)
