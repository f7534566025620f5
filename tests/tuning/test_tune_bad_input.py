"""Bad input to tusk-tune, as an operator gives it (the CLI in its own process):
broken profiles, unknown interfaces, out-of-range values. Each gets an error that
names the file, section and key (or the interface) and why, a stable exit status,
and the machine is left exactly as it was: no write, no state."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fakehw
import pytest
from tunetree import TUNE, snapshot, tune

from policy.core.revisions import Store
from tuning.core.errors import Code

HERE = Path(__file__).parent

BROKEN = {
    "syntax": ("[main\nsummary = x\n", Code.PROFILE, "line 1: no [section] header before it"),
    "duplicate key": ("[link]\n# a\ntxqueuelen = 1\n# b\ntxqueuelen = 2\n", Code.PROFILE,
                      "line 5: a key given twice in its section"),
    "unknown section": ("[irqs]\naffinity = spread\n", Code.PROFILE, "[irqs]: unknown section"),
    "unknown key": ("[rings]\nrx_max = 4096\n", Code.PROFILE,
                    "[rings] rx_max: unknown key (known: rx, tx)"),
    # fraglist GRO is off limits: it is how forwarded segments reached seqadj with
    # headers it never rewrote (kernel-patches/0012); a profile cannot turn it on
    "fraglist GRO": ("[features]\nrx-gro-list = on\n", Code.PROFILE,
                     "[features] rx-gro-list: unknown key (known: gro, gso, tso, lro)"),
    "wrong keyword": ("[irq]\naffinity = everywhere\n", Code.VALUE,
                      "[irq] affinity: 'everywhere' is not one of keep, spread"),
    "not a number": ("[rings]\nrx = lots\n", Code.VALUE,
                     "[rings] rx: 'lots' is neither 'keep' or 'max' nor a whole number"),
    "out of range": ("[link]\ntxqueuelen = 0\n", Code.VALUE,
                     "[link] txqueuelen: 0 is outside 1..1000000"),
    "not a power of two": ("[rps]\nsock_flow_entries = 30000\n", Code.VALUE,
                           "[rps] sock_flow_entries: 30000 is not a power of two"),
    "bad sysctl name": ("[sysctl]\nnet/core/x = 1\n", Code.PROFILE,
                        "[sysctl] net/core/x: unknown key"),
    "sysctl outside the allow-list": (
        "[sysctl]\n# harmless, but not the network's\nkernel.printk_ratelimit = 9\n",
        Code.PROFILE, "[sysctl] kernel.printk_ratelimit: not a sysctl a profile may set "
        "(allowed: net.core., net.ipv4., net.ipv6., net.netfilter.)"),
    "forwarding": ("[sysctl]\n# on\nnet.ipv6.conf.*.forwarding = 1\n", Code.PROFILE,
                   "[sysctl] net.ipv6.conf.*.forwarding: not a sysctl a profile may set: "
                   "forwarding is the boot step's"),
    "BPF JIT hardening": ("[sysctl]\n# no\nnet.core.bpf_jit_harden = 0\n", Code.PROFILE,
                          "[sysctl] net.core.bpf_jit_harden: not a sysctl a profile may set"),
    "text before the first section": ("summary = x\n[main]\n", Code.PROFILE,
                                      "line 1: no [section] header before it"),
    "a line that is no key": ("[main]\nsummary = x\njust words\n", Code.PROFILE,
                              "line 3: not a [section], key = value or # comment"),
    "unknown include": ("[main]\ninclude = turbo\n", Code.PROFILE, "no profile 'turbo'"),
    "include cycle": ("[main]\ninclude = broken\n", Code.PROFILE, "includes itself"),
}
# valid profiles that ask for more than this machine (10g-in-gen2-x1) has
IMPOSSIBLE = {
    "unknown interface": ("[interface eth9]\nmtu = 9000\n", Code.INTERFACE,
                          "[interface eth9]: no interface eth9 on the tree"),
    "MTU above the NIC's maximum": ("[interface eth1]\nmtu = 9800\n", Code.VALUE,
                                    "[interface eth1] mtu: MTU 9800 is outside eth1's "
                                    "68..9710 (driver ixgbe)"),
    "ring above the NIC's maximum": ("[rings]\nrx = 8192\n", Code.VALUE,
                                     "[rings] rx: 8192 descriptors: eth0's rx ring holds at "
                                     "most 4096"),
    "more queues than the NIC has": ("[channels]\ncombined = 128\n", Code.VALUE,
                                     "[channels] combined: 128 queues: eth0 has at most 4 "
                                     "combined channels"),
}


@pytest.fixture
def tree(tmp_path):
    return fakehw.build(fakehw.MACHINES["10g-in-gen2-x1"], str(tmp_path / "tree"))


def check_refused(tmp_path, tree, text, code, message):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "broken.conf").write_text(text)
    before = snapshot(tree)
    for command in ("plan", "apply"):
        result = tune(tree, "--no-policy", "--profile-dir", str(profiles), command, "broken")
        assert result.returncode == code, (command, result.stdout, result.stderr)
        assert message in result.stderr, result.stderr
        assert str(profiles / "broken.conf") in result.stderr or code == Code.PROFILE
        assert result.stdout == ""
    assert snapshot(tree) == before
    assert not (tmp_path / "tree" / "state" / "applied.json").exists()


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_profile_is_refused_and_nothing_is_written(tmp_path, tree, case):
    check_refused(tmp_path, tree, *BROKEN[case])


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_what_the_machine_cannot_do_is_refused_and_nothing_is_written(tmp_path, tree, case):
    check_refused(tmp_path, tree, *IMPOSSIBLE[case])


def test_every_problem_of_a_profile_is_reported_at_once(tmp_path, tree):
    text = "[rings]\nrx = lots\ntx = 0\n[irq]\naffinity = everywhere\n"
    (tmp_path / "many.conf").write_text(text)
    result = tune(tree, "--no-policy", "--profile-dir", str(tmp_path), "plan", "many")
    assert result.returncode == Code.VALUE
    assert len(result.stderr.strip().splitlines()) == 3, result.stderr


@pytest.mark.parametrize("profile", ["/etc/passwd", "../profiles/throughput", "--root=/"])
def test_a_profile_is_a_name_never_a_path(tmp_path, tree, profile):
    """tusk-tune is run by the agent with a job's profile: only a name in the profile
    directories is looked up, never a file elsewhere (nor an option)."""
    before = snapshot(tree)
    result = tune(tree, "--no-policy", "plan", "--", profile)
    assert result.returncode == 2, result.stdout
    assert f"argument profile: {profile!r} is not a profile name" in result.stderr
    assert snapshot(tree) == before


def test_an_unreadable_profile_is_named_without_its_content(tmp_path, tree):
    """A root-only file in a profile directory (a link, a stray file): the error says
    which file, which line and what is wrong with it, never what the line holds."""
    secret = tmp_path / "profiles" / "shadow.conf"
    secret.parent.mkdir()
    secret.write_text("root:tusk-secret-line:19000:0:99999:7:::\n[main]\n")
    secret.chmod(0o600)
    result = tune(tree, "--no-policy", "--profile-dir", str(secret.parent), "plan", "shadow")
    assert result.returncode == Code.PROFILE, result.stdout
    assert result.stderr == (f"error[PROFILE]: {secret}: line 1: no [section] header "
                             "before it\n")
    secret.write_bytes(b"[main]\nsummary = \xff tusk-secret-line\n")
    result = tune(tree, "--no-policy", "--profile-dir", str(secret.parent), "plan", "shadow")
    assert result.returncode == Code.PROFILE, result.stdout
    assert "tusk-secret" not in result.stderr and "not UTF-8 text" in result.stderr


def test_unknown_profile_namespace_and_empty_state(tmp_path, tree):
    result = tune(tree, "--no-policy", "plan", "turbo")
    assert result.returncode == Code.PROFILE and "no profile 'turbo' (there are: " in result.stderr
    result = tune(tree, "--no-policy", "--netns", "tusk-no-such-ns", "plan")
    assert (result.returncode == Code.TARGET
            and "no network namespace tusk-no-such-ns" in result.stderr)
    for command in ("verify", "rollback"):
        result = tune(tree, "--no-policy", command)
        assert result.returncode == Code.STATE and "nothing applied in this boot" in result.stderr


def test_state_from_an_earlier_boot_is_not_rolled_back(tmp_path, tree):
    assert tune(tree, "--no-policy", "apply").returncode == 0
    assert tune(tree, "--no-policy", "verify").returncode == 0
    (tmp_path / "tree" / "proc/sys/kernel/random/boot_id").write_text("another-boot\n")
    result = tune(tree, "--no-policy", "rollback")
    assert result.returncode == Code.STATE, result.stdout


def test_verify_exits_1_on_drift(tmp_path, tree):
    assert tune(tree, "--no-policy", "apply").returncode == 0
    (tmp_path / "tree" / "sys/class/net/eth1/tx_queue_len").write_text("1000\n")
    result = tune(tree, "--no-policy", "verify")
    assert result.returncode == 1
    assert "/sys/class/net/eth1/tx_queue_len: set 10000, now 1000" in result.stdout



def test_the_live_policy_revision_names_the_classes_in_the_mtu_check(tmp_path, tree):
    """Without --policy, the MTU check reads the live revision of the policy store."""
    store = Store(str(tmp_path / "policy"))
    revision = store.create("test", "apply", (HERE / "policy-storage.yaml").read_text(), "")
    store.set_confirmed(revision.id)
    result = tune(tree, "--policy-dir", str(tmp_path / "policy"), "--profile-dir",
                  str(HERE / "profiles"), "plan", "site-jumbo")
    assert result.returncode == 0, result.stderr
    assert "mtu: class backup: eth0 (MTU 1500) -> eth1 (MTU 9000)" in result.stdout
    assert "class replication" not in result.stdout, "it clamps MSS: no warning"


def test_a_missing_ethtool_is_named_with_its_package(tmp_path):
    """On the running system (here a scratch namespace with one veth pair, one end of which the
    profile names), tusk-tune without ethtool says what to install."""
    namespace = f"tusk-tune-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        subprocess.run(["ip", "-n", namespace, "link", "add", "dm0", "type", "veth",
                        "peer", "name", "dm1"],
                       check=True)
        (tmp_path / "dummy.conf").write_text("[interface dm0]\n# tune it\ntxqueuelen = 500\n")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "ip").symlink_to(shutil.which("ip"))
        result = subprocess.run(
            [sys.executable, str(TUNE), "--no-policy", "--netns", namespace, "--state-dir",
             str(tmp_path / "state"), "--profile-dir", str(tmp_path), "plan", "dummy"],
            capture_output=True, text=True, env={**os.environ, "PATH": str(bin_dir)})
    finally:
        subprocess.run(["ip", "netns", "del", namespace])
    assert result.returncode == Code.IO, result.stderr
    assert "ethtool: not installed" in result.stderr and "Debian package ethtool" in result.stderr


VLAN_NETWORK = """version = 2
[[interfaces]]
name = "eth9"
role = "management"
dhcp = true
[[interfaces]]
name = "eth0"
[[interfaces]]
name = "eth1"
mtu = 9000
[[vlans]]
name = "eth1.100"
parent = "eth1"
id = 100
"""
VLAN_POLICY = """version: 1
zones:
  - {name: office, interfaces: [eth0]}
  - {name: storage, interfaces: [eth1.100]}
classes:
  - {name: backup, from: office, to: storage, action: accept}
"""


def test_the_mtu_check_takes_a_vlans_mtu_from_the_network_configuration(tmp_path, tree):
    """No NIC shows eth1.100: the box's network configuration gives it eth1's 9000 (a VLAN
    without an MTU of its own has its parent's), so the class into it is warned about."""
    (tmp_path / "policy.yaml").write_text(VLAN_POLICY)
    args = ("--policy", str(tmp_path / "policy.yaml"), "--profile-dir", str(HERE / "profiles"),
            "plan", "site-jumbo")
    result = tune(tree, *args)
    assert result.returncode == 0, result.stderr
    assert "class backup" not in result.stdout, "without a network.toml eth1.100 is unknown"
    os.makedirs(os.path.join(tree, "etc/tusk"))
    with open(os.path.join(tree, "etc/tusk/network.toml"), "w") as handle:
        handle.write(VLAN_NETWORK)
    result = tune(tree, *args)
    assert result.returncode == 0, result.stderr
    assert ("mtu: class backup: eth0 (MTU 1500) -> eth1.100 (MTU 9000): segments sized for "
            "eth1.100 must be cut down to eth0's") in result.stdout
    result = tune(tree, "--network", str(tmp_path / "none.toml"), *args)
    assert "class backup" not in result.stdout, "--network names the file read"


def test_a_broken_network_configuration_is_named(tmp_path, tree):
    (tmp_path / "network.toml").write_text("version = 2\n[[interfaces]]\nname = 5\n")
    result = tune(tree, "--network", str(tmp_path / "network.toml"), "--policy",
                  str(HERE / "policy-storage.yaml"), "plan")
    assert result.returncode == Code.IO
    assert f"{tmp_path / 'network.toml'}: the network configuration cannot be read: " \
        in result.stderr, result.stderr
