"""Golden networkd files: each network/NN_case/ folder holds a line of intent, a
network.toml and, under expected/, every file the systemd-networkd backend renders for it
(expected/run/systemd/network/10-tusk-eth1.network, ..., expected/etc/hostname), byte
for byte. UPDATE_GOLDEN=1 rewrites expected/ from the renderer instead (then read the diff
before committing it).

Also here: every key of every expected file is one of the keys checked against systemd
258's and 257's manual pages (networkd.py's docstring), and apply() on a --root tree
whose host programs are a recording script (tests/appliancetree.py): what it writes,
removes and deletes, what it asks networkd, and that a second apply changes nothing. The
real networkd bringing these files up is the VM tier's.
"""
import difflib
import os
import re
import shutil

import pytest
from appliancetree import Appliance, Nic

from network.core import networkd
from network.core.errors import Code, NetworkError
from network.core.normalise import load, parse
from tusklib.commands import Runner

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "network")
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
CASES = sorted(d for d in os.listdir(HERE) if re.fullmatch(r"\d\d_[a-z0-9_]+", d))

# The keys the renderer may write, per kind of file and section: each checked against
# systemd.network(5), systemd.netdev(5), resolved.conf(5) and timesyncd.conf(5).
KEYS = {
    ".network": {"Match": {"Name"},
                 "Link": {"RequiredForOnline", "MTUBytes", "ActivationPolicy"},
                 "Network": {"DHCP", "Address", "LinkLocalAddressing", "IPv6AcceptRA",
                             "ConfigureWithoutCarrier", "Bond", "VLAN", "Bridge"},
                 "BridgeVLAN": {"VLAN"},
                 "Route": {"Destination", "Gateway", "Metric"}},
    ".netdev": {"NetDev": {"Name", "Kind"}, "VLAN": {"Id"},
                "Bond": {"Mode", "TransmitHashPolicy", "MIIMonitorSec", "LACPTransmitRate"},
                "Bridge": {"STP", "MulticastSnooping", "VLANFiltering"}},
    "resolved.conf.d": {"Resolve": {"DNS", "FallbackDNS"}},
    "timesyncd.conf.d": {"Time": {"NTP", "FallbackNTP"}},
}


def case_path(case, *names):
    return os.path.join(HERE, case, *names)


def expected_files(case):
    """{"/run/systemd/network/10-tusk-x.network": text, ...} of a case's expected/."""
    top = case_path(case, "expected")
    found = {}
    for directory, _, names in os.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as handle:
                found["/" + os.path.relpath(path, top)] = handle.read()
    return found


def render_case(case):
    return networkd.NetworkdBackend().render(load(case_path(case, "network.toml")))


def test_there_are_cases():
    assert len(CASES) >= 10, CASES
    numbers = [case[:2] for case in CASES]
    assert len(numbers) == len(set(numbers)), f"two cases share a number: {CASES}"


@pytest.mark.parametrize("case", CASES)
def test_case_is_complete(case):
    for name in ("intent.txt", "network.toml", "expected"):
        assert os.path.exists(case_path(case, name)), f"{case}/{name} is missing"
    with open(case_path(case, "intent.txt"), encoding="utf-8") as handle:
        assert len(handle.read().strip().splitlines()) == 1, f"{case}/intent.txt: one line"


@pytest.mark.parametrize("case", CASES)
def test_render_matches_expected(case):
    actual = render_case(case)
    if UPDATE:
        shutil.rmtree(case_path(case, "expected"), ignore_errors=True)
        for path, text in actual.items():
            target = case_path(case, "expected", path.lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
        return
    expected = expected_files(case)
    assert sorted(actual) == sorted(expected), f"{case}: other files rendered than expected/"
    diff = "".join(line for path in sorted(expected) if actual[path] != expected[path]
                   for line in difflib.unified_diff(
                       expected[path].splitlines(keepends=True),
                       actual[path].splitlines(keepends=True),
                       fromfile=f"{case}/expected{path}", tofile=f"{case} render {path}"))
    if diff:
        pytest.fail(f"{case}: rendered files differ from expected/ (UPDATE_GOLDEN=1 rewrites "
                    f"them):\n{diff}", pytrace=False)


def kind_of(path):
    for kind in KEYS:
        if path.endswith(kind) or f"/{kind}/" in path:
            return kind
    return None


def keys(text):
    """(section, key) of each setting of a systemd ini-style file."""
    section = None
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif line and not line.startswith("#"):
            yield section, line.split("=", 1)[0]


@pytest.mark.parametrize("case", CASES)
def test_expected_files_use_only_checked_keys(case):
    for path, text in expected_files(case).items():
        kind = kind_of(path)
        if kind is None:
            assert path in (networkd.HOSTNAME_FILE, networkd.TIMEZONE_FILE), path
            continue
        for section, key in keys(text):
            assert key in KEYS[kind].get(section, ()), f"{case}: {path}: [{section}] {key}="


# -- apply() on a --root tree ------------------------------------------------------------------

BASE = """\
version = 2
[[interfaces]]
name = "eth0"
role = "management"
addresses = ["192.168.1.2/24"]
[[interfaces]]
name = "eth1"
[[interfaces]]
name = "eth2"
[[interfaces]]
name = "eth3"
"""
BOND = """
[[bonds]]
name = "bond0"
members = ["eth2", "eth3"]
addresses = ["10.2.0.1/24"]
"""


def vlan(name="eth1.100", parent="eth1", id=100):
    return f"""
[[vlans]]
name = "{name}"
parent = "{parent}"
id = {id}
addresses = ["10.100.0.1/24"]
"""


@pytest.fixture
def box(tmp_path):
    """An appliance tree whose networkd runs (systemctl is-active says so)."""
    box = Appliance(tmp_path / "root", *(Nic(f"eth{n}") for n in range(4)))
    box.behave({})
    box.backend = networkd.NetworkdBackend(Runner(box.root, box.table))
    return box


def apply(box, text):
    before = len(box.calls())
    lines = box.backend.apply(parse(text))
    return lines, box.commands()[before:]


def add_link(box, name):
    """The link as the kernel would show it once networkd created it."""
    os.makedirs(box.path(f"/sys/class/net/{name}"), exist_ok=True)


def test_apply_writes_every_file_and_a_second_apply_changes_nothing(box):
    box.write("/run/systemd/network/20-operator.network", "[Match]\nName=eth9\n")
    lines, commands = apply(box, BASE + BOND + vlan())
    rendered = box.backend.render(parse(BASE + BOND + vlan()))
    for path, text in rendered.items():
        assert box.read(path) == text
        assert f"wrote {path}" in lines
    assert os.readlink(box.path("/etc/localtime")) == "../usr/share/zoneinfo/UTC"
    assert ("networkctl", "reload") in commands
    for unit in ("systemd-resolved.service", "systemd-timesyncd.service"):
        assert ("systemctl", "try-restart", unit) in commands
    reconfigured = {c[2] for c in commands if c[:2] == ("networkctl", "reconfigure")}
    assert reconfigured == {"eth0", "eth1", "eth2", "eth3"}, "bond0, eth1.100 do not exist yet"
    assert box.read("/run/systemd/network/20-operator.network") == "[Match]\nName=eth9\n"

    add_link(box, "bond0")
    add_link(box, "eth1.100")
    lines, commands = apply(box, BASE + BOND + vlan())
    assert lines == ["nothing to change: the machine is as configured"]
    assert commands == []


def test_a_removed_vlan_and_bond_are_deleted_and_their_files_removed(box):
    apply(box, BASE + BOND + vlan())
    add_link(box, "bond0")
    add_link(box, "eth1.100")
    lines, commands = apply(box, BASE)
    assert ("ip", "link", "delete", "dev", "bond0") in commands
    assert ("ip", "link", "delete", "dev", "eth1.100") in commands
    assert commands.index(("ip", "link", "delete", "dev", "bond0")) < \
        commands.index(("networkctl", "reload"))
    assert set(box.network_files()) == {f"10-tusk-eth{n}.network" for n in range(4)}
    assert "removed /run/systemd/network/10-tusk-bond0.netdev" in lines
    assert "deleted bond0: no longer configured" in lines
    reconfigured = {c[2] for c in commands if c[:2] == ("networkctl", "reconfigure")}
    assert reconfigured == {"eth1", "eth2", "eth3"}, "the parent and the former members"


@pytest.mark.parametrize("change", [
    pytest.param(vlan(id=101), id="vlan-id"),
    pytest.param(vlan(parent="eth2"), id="vlan-parent"),
])
def test_a_vlan_that_changed_what_a_live_link_cannot_is_created_anew(box, change):
    apply(box, BASE + vlan())
    add_link(box, "eth1.100")
    lines, commands = apply(box, BASE + change)
    assert ("ip", "link", "delete", "dev", "eth1.100") in commands
    assert "deleted eth1.100: changed" in lines
    parent = parse(BASE + change).link("eth1.100").parent
    assert ("networkctl", "reconfigure", parent) in commands, "networkd creates it anew"


def test_a_bond_tusk_did_not_make_is_made_anew_as_configured(box):
    """A leftover bond0, or the built-in driver's own (round-robin) on a kernel started
    without bonding.max_bonds=0: networkd would keep it, mode and all."""
    add_link(box, "bond0")
    lines, commands = apply(box, BASE + BOND)
    assert commands.index(("ip", "link", "delete", "dev", "bond0")) < \
        commands.index(("networkctl", "reload"))
    assert "deleted bond0: not made from Tusk's files" in lines
    assert {"eth2", "eth3"} <= {c[2] for c in commands if c[:2] == ("networkctl", "reconfigure")}
    add_link(box, "bond0")                   # networkd's, from Tusk's file: kept from now on
    lines, commands = apply(box, BASE + BOND)
    assert commands == []


def test_a_configured_vlan_that_is_missing_is_created_though_no_file_changed(box):
    """As after a rollback whose deletion went through but whose files did not change."""
    apply(box, BASE + vlan())
    lines, commands = apply(box, BASE + vlan())
    assert commands[-2:] == [("networkctl", "reload"), ("networkctl", "reconfigure", "eth1")]
    assert not any(line.startswith("wrote") for line in lines)


def test_an_mtu_change_does_not_recreate_the_bond(box):
    apply(box, BASE + BOND)
    add_link(box, "bond0")
    lines, commands = apply(box, BASE + BOND.replace("members", "mtu = 9000\nmembers"))
    assert [c for c in commands if c[0] == "ip"] == []
    assert ("networkctl", "reconfigure", "bond0") in commands


def test_a_failing_step_names_the_link(box):
    apply(box, BASE + vlan())
    box.behave({"networkctl reconfigure": {"rc": 1, "stderr": "Interface eth1.100 busy"}})
    add_link(box, "eth1.100")
    with pytest.raises(NetworkError) as caught:
        apply(box, BASE + vlan().replace("10.100.0.1/24", "10.100.0.2/24"))
    problem = caught.value.problems[0]
    assert (problem.code, problem.path) == (Code.APPLY, "vlans[0]")
    assert "eth1.100: `networkctl reconfigure eth1.100` failed (exit 1): Interface eth1.100 " \
           "busy" in problem.message


def test_networkd_not_running_gets_the_files_only(box):
    box.behave({"systemctl is-active": {"rc": 3}})
    lines, commands = apply(box, BASE)
    assert "systemd-networkd is not running: it reads these files when it starts" in lines
    assert [c for c in commands if c[0] != "systemctl"] == []


ROUTING = """
[routing]
router_id = "10.0.0.1"

[routing.bgp]
asn = 65001

[[routing.bgp.neighbours]]
address = "10.0.0.2"
remote_as = 65010
password = "k3y"
"""


ROUTED_BASE = BASE.replace('name = "eth1"\n', 'name = "eth1"\naddresses = ["10.0.0.1/24"]\n')


def test_routing_starts_frr_reloads_it_and_stops_it(box):
    """The appliance's FRR (network/core/frr.py's SystemFrr): the first apply with routing
    checks the file with vtysh -C, writes the daemons and frr.conf (root's and FRR's
    group's: it holds the password) and enables and starts frr.service (no daemon-reload:
    PID 1 does not feed the hardware watchdog during one); the next reloads
    the running daemons with frr-reload.py (errors only in its log); one without routing
    stops and disables it, once. A box that never had routing never touches FRR."""
    base = ROUTED_BASE
    lines, commands = apply(box, base)
    assert not [c for c in commands if "frr.service" in c or c[0] in ("vtysh", "frr-reload")]
    box.behave({"systemctl is-active": {"rc": 3}})
    lines, commands = apply(box, base + ROUTING)
    assert commands[0][:2] == ("vtysh", "-C")
    assert ("systemctl", "enable", "--now", "--no-reload", "frr.service") in commands
    conf = box.path("/etc/frr/frr.conf")
    assert os.stat(conf).st_mode & 0o777 == 0o640
    assert "neighbor 10.0.0.2 password k3y" in box.read("/etc/frr/frr.conf")
    assert "bgpd=yes" in box.read("/etc/frr/daemons")
    assert "started FRR (frr.service) with the routing configuration" in lines
    assert not any("k3y" in line for line in lines)
    box.behave({"systemctl is-active": {"rc": 0}})
    lines, commands = apply(box, base + ROUTING.replace("65010", "65011"))
    assert ("frr-reload", "--reload", "--log-level", "error", "--stdout",
            "/etc/frr/frr.conf") in commands
    assert "remote-as 65011" in box.read("/etc/frr/frr.conf")
    lines, commands = apply(box, base)
    assert ("systemctl", "disable", "--now", "--no-reload", "frr.service") in commands and \
        "stopped FRR" in lines
    lines, commands = apply(box, base)
    assert not [c for c in commands if "frr.service" in c]


def test_a_file_frrs_parser_refuses_changes_nothing_on_the_appliance(box):
    base = ROUTED_BASE
    box.behave({"vtysh -C": {"rc": 2, "stdout": "line 7: % Unknown command: neighbor"}})
    with pytest.raises(NetworkError) as refused:
        box.backend.apply(parse(base + ROUTING))
    assert refused.value.problems[0].path == "routing"
    assert "Unknown command" in str(refused.value.problems[0])
    assert not any(name.startswith("10-tusk-") for name in box.network_files())
    assert [c[0] for c in box.commands()] == ["vtysh"]
