"""What a [sysctl] name with a `*` writes. `net.ipv4.conf.*.rp_filter` stands for all,
default and every tuned interface, and the interfaces' names come from the machine: a
bond or VLAN an admin names, a NIC udev renames. The refusals (forwarding, the BPF JIT's
hardening, the unprivileged port start, anything outside the network stack) were checked
on the name in the profile only, so `net.ipv4.*.all.forwarding` on a box with a bond
called `conf` wrote /proc/sys/net/ipv4/conf/all/forwarding. Now they are checked, by the
same function, on the pattern (could any interface name make it a refused sysctl?) and
on every path the planner and the applier are about to write (does this one?).

A name with a dot (the VLAN eth0.100) is one directory of /proc/sys, not two: a path is
built from its parts, never from a dotted string, and a name that is no directory name
(`..`) is refused rather than let it climb out of its directory."""
import json
import os

import fakehw
import pytest
from tunetree import snapshot, tune

from tuning.core import applier, hardware, planner
from tuning.core import profile as profiles
from tuning.core.errors import Code, TuneError
from tuning.core.host import TreeHost
from tuning.core.report import Write

# every interface's forwarding switch is on, as tusk-boot firewall leaves it
FORWARDING = {f"net/ipv{v}/conf/{c}/{k}": "1" for v in (4, 6)
              for c in ("all", "default", "eth0", "conf") for k in ("forwarding", "mc_forwarding")}


def build(tmp_path, *names, sysctls=None):
    """A two-core box with one-queue NICs of these names."""
    nics = [fakehw.Nic(name, "ixgbe", f"0000:01:00.{i}", 10000, first_irq=40 + 10 * i)
            for i, name in enumerate(names)]
    machine = fakehw.Machine(cores=2, nics=nics, sysctls={**FORWARDING, **(sysctls or {})})
    return fakehw.build(machine, str(tmp_path / "tree"))


def profile_dir(tmp_path, text):
    directory = tmp_path / "profiles"
    directory.mkdir(exist_ok=True)
    (directory / "site.conf").write_text(text)
    return str(directory)


def forged(tmp_path, sysctls):
    """A profile as the planner receives it, as if it had got past load's checks: what
    the planner and the applier refuse on their own."""
    path = str(tmp_path / "forged.conf")
    return profiles.Profile("forged", path, "", ["forged"], {"sysctl": {
        name: profiles.Setting(value, path, "forged") for name, value in sysctls.items()}})


class ForgedTuner(applier.Tuner):
    def __init__(self, host, state_dir, profile):
        super().__init__(host, state_dir)
        self.forged = profile

    def profile(self, name):
        return self.forged


def test_a_bond_named_conf_cannot_turn_a_pattern_into_the_forwarding_switch(tmp_path):
    """The attack as reported: net.ipv4.*.all.forwarding and an interface named conf
    make /proc/sys/net/ipv4/conf/all/forwarding. tusk-tune refuses the profile before it
    reads the machine, and nothing is written."""
    root = build(tmp_path, "eth0", "conf")
    directory = profile_dir(tmp_path, "[sysctl]\n# off\nnet.ipv4.*.all.forwarding = 0\n")
    before = snapshot(root)
    for command in ("plan", "apply"):
        result = tune(root, "--no-policy", "--profile-dir", directory, command, "site")
        assert result.returncode == Code.PROFILE, (command, result.stdout)
        assert ("[sysctl] net.ipv4.*.all.forwarding: not a sysctl a profile may set: an "
                "interface named conf would make it net.ipv4.conf.all.forwarding, and "
                "forwarding is the boot step's") in result.stderr, result.stderr
        assert result.stdout == ""
    assert snapshot(root) == before
    assert not (tmp_path / "tree" / "state" / "applied.json").exists()


@pytest.mark.parametrize("name, reason", [
    ("net.ipv6.*.all.forwarding", "an interface named conf would make it "
     "net.ipv6.conf.all.forwarding, and forwarding is the boot step's"),
    ("net.ipv4.*.default.mc_forwarding", "an interface named conf would make it "
     "net.ipv4.conf.default.mc_forwarding, and forwarding is the boot step's"),
    ("net.ipv4.conf.*.mc_forwarding", "forwarding is the boot step's"),
    ("net.ipv6.conf.*.mc_forwarding", "forwarding is the boot step's"),
    ("net.ipv4.conf.all.forwarding", "forwarding is the boot step's"),
    ("net.ipv4.ip_forward", "forwarding is the boot step's"),
    ("net.core.bpf_jit_enable", "the BPF JIT's hardening"),
    ("net.*.conf.all.forwarding", "allowed: net.core., net.ipv4., net.ipv6., net.netfilter."),
    # a * the planner does not fill in: the last part, or a second one
    ("net.ipv4.*", "unknown key: not a sysctl name"),
    ("net.core.*", "unknown key: not a sysctl name"),
    ("net.ipv4.*.*.forwarding", "unknown key: not a sysctl name"),
])
def test_every_spelling_that_can_reach_a_refused_sysctl_is_refused(tmp_path, name, reason):
    root = build(tmp_path, "eth0", "conf")
    directory = profile_dir(tmp_path, f"[sysctl]\n# x\n{name} = 0\n")
    before = snapshot(root)
    result = tune(root, "--no-policy", "--profile-dir", directory, "apply", "site")
    assert result.returncode == Code.PROFILE, result.stdout
    assert f"[sysctl] {name}: " in result.stderr and reason in result.stderr, result.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("name", [
    "net.ipv4.*.all.forwarding", "net.ipv4.conf.*.forwarding", "net.ipv6.conf.*.forwarding"])
def test_the_planner_refuses_an_expansion_onto_forwarding_whatever_load_let_through(
        tmp_path, name):
    """A profile that got past load: the planner checks every path it expands to with
    the same function, names the sysctl and the interface, and apply writes nothing."""
    root = build(tmp_path, "eth0", "conf")
    host = TreeHost(root)
    profile = forged(tmp_path, {name: "0"})
    with pytest.raises(TuneError) as error:
        planner.plan(profile, hardware.detect(host), host)
    assert error.value.code == Code.PROFILE
    text = str(error.value)
    assert f"[sysctl] {name}: with interface conf it is " in text, text
    assert "not a sysctl a profile may set: forwarding is the boot step's" in text
    before = snapshot(root)
    with pytest.raises(TuneError):
        ForgedTuner(host, str(tmp_path / "state"), profile).apply("forged")
    assert snapshot(root) == before and host.writes == []


def test_a_vlans_dot_is_one_directory_and_its_forwarding_switch_is_refused_too(tmp_path):
    """eth0.100's directory is /proc/sys/net/ipv4/conf/eth0.100; sysctl(8) writes its
    name net.ipv4.conf.eth0/100.forwarding. A check on the dotted name
    net.ipv4.conf.eth0.100.forwarding (six parts) would not see the forwarding switch."""
    root = build(tmp_path, "eth0.100", sysctls={"net/ipv4/conf/eth0.100/forwarding": "1"})
    host = TreeHost(root)
    with pytest.raises(TuneError) as error:
        planner.plan(forged(tmp_path, {"net.ipv4.conf.*.forwarding": "0"}),
                     hardware.detect(host), host)
    assert ("with interface eth0.100 it is net.ipv4.conf.eth0/100.forwarding: not a sysctl "
            "a profile may set") in str(error.value), str(error.value)


def test_a_vlans_sysctl_is_written_in_its_own_directory_and_named_as_sysctl_names_it(
        tmp_path):
    root = build(tmp_path, "eth0.100")
    directory = profile_dir(tmp_path, "[sysctl]\n# loose\nnet.ipv4.conf.*.rp_filter = 2\n"
                            "# only all and default have it here\n"
                            "net.ipv4.conf.*.accept_local = 1\n")
    (tmp_path / "tree/proc/sys/net/ipv4/conf/all/accept_local").write_text("0\n")
    (tmp_path / "tree/proc/sys/net/ipv4/conf/default/accept_local").write_text("0\n")
    result = tune(root, "--no-policy", "--json", "--profile-dir", directory, "apply", "site")
    assert result.returncode == 0, result.stderr
    applied = json.loads(result.stdout)
    assert [w["label"] for w in applied["written"]] == [
        f"/proc/sys/net/ipv4/conf/{c}/{k}" for k, names in (
            ("rp_filter", ("all", "default", "eth0.100")), ("accept_local", ("all", "default")))
        for c in names]
    assert (tmp_path / "tree/proc/sys/net/ipv4/conf/eth0.100/rp_filter").read_text() == "2\n"
    assert {"kind": "unsupported", "message": "sysctl net.ipv4.conf.eth0/100.accept_local does "
            "not exist here (not in this kernel, module not loaded, or not in this network "
            "namespace): skipped"} in applied["plan"]["warnings"], applied["plan"]["warnings"]


@pytest.mark.parametrize("iface", ["all", "default"])
def test_an_interface_named_all_or_default_is_written_once(tmp_path, iface):
    root = build(tmp_path, iface, "eth0")
    host = TreeHost(root)
    directory = profile_dir(tmp_path, "[sysctl]\n# loose\nnet.ipv4.conf.*.rp_filter = 2\n")
    plan = planner.plan(profiles.load("site", [directory]), hardware.detect(host), host)
    assert [w.label for w in plan.writes] == [
        f"/proc/sys/net/ipv4/conf/{c}/rp_filter" for c in ("all", "default", "eth0")]


@pytest.mark.parametrize("iface", ["..", ".", "", "a/b"])
def test_an_interface_name_that_would_leave_its_directory_is_refused(tmp_path, iface):
    """The kernel gives no interface such a name, and a directory listing shows none:
    the planner does not rely on either. conf/../ip_forward is ip_forward."""
    root = build(tmp_path, "eth0")
    host = TreeHost(root)
    machine = hardware.detect(host)
    machine.nics[0].name = iface
    profile = forged(tmp_path, {"net.ipv4.conf.*.ip_forward": "1"})
    with pytest.raises(TuneError) as error:
        planner.plan(profile, machine, host)
    assert error.value.code == Code.INTERFACE
    assert f"interface {iface!r} cannot be a directory of /proc/sys" in str(error.value), \
        str(error.value)


def test_apply_refuses_a_refused_sysctl_in_the_plan_it_is_given(tmp_path, monkeypatch):
    """The applier checks again what it is about to write: a planner that let a refused
    sysctl through (here one that adds a write of its own) still writes nothing."""
    root = build(tmp_path, "eth0")
    host = TreeHost(root)
    directory = profile_dir(tmp_path, "[sysctl]\n# budget\nnet.core.netdev_budget = 600\n")
    real_plan = planner.plan

    def leaky_plan(*args, **kwargs):
        plan = real_plan(*args, **kwargs)
        plan.writes.append(Write("file", ("/proc/sys/net/ipv4/conf/all/forwarding",), "1", "0",
                                 "leaked", "words"))
        return plan
    monkeypatch.setattr(planner, "plan", leaky_plan)
    before = snapshot(root)
    with pytest.raises(TuneError) as error:
        applier.Tuner(host, str(tmp_path / "state"), [directory]).apply("site")
    assert error.value.code == Code.PROFILE
    assert ("/proc/sys/net/ipv4/conf/all/forwarding: net.ipv4.conf.all.forwarding is not a "
            "sysctl a profile may set: forwarding is the boot step's") in str(error.value)
    assert snapshot(root) == before and host.writes == []


def test_rollback_does_not_write_a_refused_sysctl_from_the_state_file(tmp_path):
    """A state file with originals of refused sysctls (one an older tusk-tune wrote, or a
    forged one): rollback restores the rest and skips those, saying why."""
    root = build(tmp_path, "eth0")
    host = TreeHost(root)
    tuner = applier.Tuner(host, str(tmp_path / "state"))
    os.makedirs(tmp_path / "state")
    originals = [Write("file", (path,), old, "0", "old", "words").as_dict() for path, old in (
        ("/proc/sys/net/core/netdev_budget", "300"),
        ("/proc/sys/net/ipv4/conf/all/forwarding", "0"),
        ("/proc/sys/kernel/random/boot_id", "x"),
        ("/proc/sys/net/core/../../kernel/random/boot_id", "x"))]
    (tmp_path / "state" / "applied.json").write_text(json.dumps({
        "boot_id": host.boot_id(), "originals": originals, "applied": {}}))
    host.write("/proc/sys/net/core/netdev_budget", "600")
    result = tuner.rollback()
    assert [w.label for w in result.written] == ["/proc/sys/net/core/netdev_budget"]
    assert host.writes[1:] == [("/proc/sys/net/core/netdev_budget", "300")]
    skipped = dict(result.skipped)
    assert "forwarding is the boot step's" in skipped["/proc/sys/net/ipv4/conf/all/forwarding"]
    assert "allowed: net.core." in skipped["/proc/sys/kernel/random/boot_id"]
    assert "not a path tusk-tune writes" in \
        skipped["/proc/sys/net/core/../../kernel/random/boot_id"]


def test_every_name_pattern_matches_the_whole_name_not_up_to_a_final_newline():
    """`$` also matches before a final newline: every pattern in tuning matches the
    whole string, so "throughput\\n" is no profile name."""
    with pytest.raises(ValueError):
        profiles.profile_name("throughput\n")
    assert profiles.profile_name("throughput") == "throughput"
    for pattern, good in ((profiles.NAME, "throughput"), (profiles.SYSCTL, "net.core.x"),
                          (profiles.IFACE, "eth0"), (hardware.PCI_ADDRESS, "0000:01:00.0")):
        # .match as well: other apps (the backup's restore) check names with it
        assert pattern.match(good) and pattern.fullmatch(good)
        for bad in (good + "\n", good + "/x", good + " x"):
            assert pattern.match(bad) is None and pattern.fullmatch(bad) is None, (pattern, bad)
    assert profiles.sysctl_refused("net.core.netdev_budget\n")
    assert profiles.sysctl_refused("net.core.netdev_budget") is None
    assert profiles.section_schema("interface eth0\n") is None
    assert profiles.section_schema("interface eth0") is profiles.INTERFACE_SCHEMA
    assert hardware.QUEUE_IRQ.search("eth0-TxRx-3\n") is None
    assert hardware.QUEUE_IRQ.search("eth0-TxRx-3").group(2) == "3"
    assert hardware.pci_function(None, "/sys/devices/pci0000:00/0000:01:00.0\n") is None
    assert hardware.pci_function(None, "/sys/devices/pci0000:00/0000:01:00.0") == \
        "/sys/devices/pci0000:00/0000:01:00.0"


def test_a_profile_file_whose_name_ends_in_a_newline_is_not_listed(tmp_path):
    (tmp_path / "site\n.conf").write_text("[main]\n# s\nsummary = s\n")
    (tmp_path / "site.conf").write_text("[main]\n# s\nsummary = s\n")
    assert list(profiles.available([str(tmp_path)])) == ["site"]


def test_tusk_tune_refuses_a_profile_argument_ending_in_a_newline(tmp_path):
    root = build(tmp_path, "eth0")
    result = tune(root, "--no-policy", "plan", "--", "throughput\n")
    assert result.returncode == 2, result.stdout
    assert "is not a profile name" in result.stderr
