"""The appliance's firewall at boot (appliance/boot.py, Applier.boot) against real
nftables in the lab's fw namespace: the last confirmed revision comes back, a revision
left pending counts as rolled back, a box without a confirmed policy forwards nothing
(also after its first apply rolls back), and table inet tusk_host lets only the
management interface reach the firewall itself. boot.load_firewall, tusk-firewall's
step, fails closed: with an invalid network.toml, or a host table the kernel refuses,
the dashboard ports answer on no interface, port 22 never, and forwarding is off until
a forward ruleset is loaded, and stays off when none can be."""
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from kit import wait_until
from tuskcli import ROOT, run_tusk

from lab.namespaces import FW_C_V4, FW_S_V4, SERVER_V4

sys.path.insert(0, os.path.join(ROOT, "webui"))
from appliance import boot  # noqa: E402
from policy.core import render_boot  # noqa: E402
from policy.core.applier import Applier  # noqa: E402
from tusklib.target import Target  # noqa: E402

POLICY = """
version: 1
zones:
  - {name: inside, interfaces: [veth-c]}
  - {name: outside, interfaces: [veth-s]}
services:
  - {name: web, protocol: tcp, ports: [80]}
classes:
  - {name: web, from: inside, to: outside, services: [web], action: accept}
"""


@pytest.fixture
def state(lab, tmp_path):
    lab.ns(lab.fw, "nft", "flush", "ruleset")
    directory = tmp_path / "policy"
    directory.mkdir()
    yield directory
    if (directory / "pending.json").exists():
        run_tusk("rollback", netns=lab.fw, state_dir=directory, check=False)
    lab.ns(lab.fw, "nft", "flush", "ruleset")
    lab.ns(lab.fw, "sysctl", "-q", "-w", *[f"{key}=1" for key in boot.FORWARDING])  # the lab's


def tusk(lab, state, *args):
    return run_tusk(*args, netns=lab.fw, state_dir=state, check=True)


def ruleset(lab):
    return lab.ns(lab.fw, "nft", "list", "ruleset").stdout


def forwards(lab):
    """Does a ping from client reach server through fw?"""
    return lab.ns(lab.client, "ping", "-c", "1", "-W", "1", SERVER_V4, check=False).returncode == 0


def test_boot_loads_the_last_confirmed_revision_and_drops_a_pending_one(lab, state, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    tusk(lab, state, "confirm")
    (tmp_path / "q.yaml").write_text(POLICY.replace("name: web, from", "name: other, from"))
    tusk(lab, state, "apply", tmp_path / "q.yaml", "--timeout", "600")
    lab.ns(lab.fw, "nft", "flush", "ruleset")            # a reboot: the kernel forgot it all
    revision = Applier(str(state), netns=lab.fw).boot()
    assert revision.id == 1
    live = ruleset(lab)
    assert "classes[0] web" in live and "classes[0] other" not in live
    assert not (state / "pending.json").exists()
    meta = json.loads((state / "revisions" / "000002" / "meta.json").read_text())
    assert meta["outcome"] == "rolled back: the firewall restarted before it was confirmed"


def test_no_confirmed_policy_fails_closed_even_after_a_first_rollback(lab, state, tmp_path):
    assert forwards(lab)                                  # nothing loaded: the lab forwards
    (state / "failsafe.nft").write_text(render_boot.failsafe())
    assert Applier(str(state), netns=lab.fw).boot() is None
    assert "fail closed" in ruleset(lab) and not forwards(lab)
    # the first apply on a new box, rolled back: back to the fail-closed table, not open
    (tmp_path / "p.yaml").write_text(POLICY.replace("protocol: tcp, ports: [80]",
                                                    "protocol: icmp"))
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    assert forwards(lab)
    tusk(lab, state, "rollback")
    assert "fail closed" in ruleset(lab) and not forwards(lab)


def test_a_refused_revision_leaves_the_fail_closed_table(lab, state, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    tusk(lab, state, "confirm")
    # the kernel refuses it at the next boot (here: an interface-less typo in the file)
    stored = state / "revisions" / "000001" / "ruleset.nft"
    stored.write_text(stored.read_text().replace("policy drop;", "policy dropp;", 1))
    lab.ns(lab.fw, "nft", "flush", "ruleset")
    with pytest.raises(Exception) as error:
        Applier(str(state), netns=lab.fw).boot()
    assert "loading revision 1 failed" in str(error.value)
    assert "table inet tusk" not in ruleset(lab)      # one transaction: nothing half-loaded
    lab.ns(lab.fw, "nft", "-f", "-", input=render_boot.failsafe())
    assert not forwards(lab)


def listen(lab, port):
    """A server accepting on port in fw, once it listens."""
    server = subprocess.Popen(["ip", "netns", "exec", lab.fw, sys.executable, "-c",
                               "import socket,sys; s=socket.socket(); s.setsockopt(socket."
                               "SOL_SOCKET, socket.SO_REUSEADDR,1); s.bind(('0.0.0.0', "
                               "int(sys.argv[1]))); s.listen(8)\nwhile True: "
                               "s.accept()[0].close()", str(port)])
    wait_until(lambda: lab.ns(lab.fw, "ss", "-Hltn", f"sport = :{port}").stdout, 10,
               f"a listener on port {port} in {lab.fw}")
    return server


def reaches(lab, namespace, address, port):
    code = ("import socket,sys; s=socket.socket(); s.settimeout(1.5); "
            "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))")
    return lab.ns(namespace, sys.executable, "-c", code, address, str(port),
                  check=False).returncode == 0


@pytest.mark.parametrize("mgmt", ["veth-c", None])
def test_host_table_lets_only_the_management_interface_in(lab, state, nft_check, mgmt):
    """None: no valid management interface - the dashboard answers on none."""
    text = render_boot.host(mgmt)
    assert nft_check(text).returncode == 0
    server = listen(lab, 443)
    try:
        lab.ns(lab.fw, "nft", "-f", "-", input=text)
        assert reaches(lab, lab.client, FW_C_V4, 443) == (mgmt is not None)
        assert not reaches(lab, lab.server, FW_S_V4, 443)
        assert not reaches(lab, lab.client, FW_C_V4, 8009)    # not a management port
        counters = ruleset(lab)
        assert "not for the firewall itself" in counters
    finally:
        server.kill()
        server.wait()


# -- tusk-firewall's step as a whole: boot.load_firewall ----------------------------------

VALID = '[management]\ninterface = "veth-c"\naddress = "dhcp"\n'
INVALID = '[management]\ninterface = "veth-c"\naddress = "10.10.1.0/24"\n'
OFF, ON = (" ".join(f"{key}={value}" for key in boot.FORWARDING) for value in (0, 1))


class Recording(Target):
    """The fw namespace, noting whether table inet tusk was live at each forwarding write."""

    def __init__(self, netns):
        super().__init__(netns)
        self.forwarding = []

    def run(self, argv, stdin=None):
        if argv[0] == "sysctl":
            loaded = super().run(["nft", "list", "table", "inet", "tusk"]).ok
            self.forwarding.append((" ".join(argv[3:]), loaded))
        return super().run(argv, stdin)


def forwarding(lab):
    return [lab.ns(lab.fw, "sysctl", "-n", key).stdout.strip() for key in boot.FORWARDING]


@pytest.fixture
def listeners(lab):
    servers = [listen(lab, port) for port in (22, 80, 443)]
    yield
    for server in servers:
        server.kill()
        server.wait()


@pytest.fixture
def owned(lab):
    """own(table): the table exists in fw, owned by a live nft process: the kernel then
    refuses every change to it from anyone else (a real refusal, as a kernel lacking what
    the table needs would give)."""
    holders = []

    def own(table):
        holder = subprocess.Popen(["ip", "netns", "exec", lab.fw, "nft", "-i"],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        holder.stdin.write(f"add table inet {table} {{ flags owner; }}\n")
        holder.stdin.flush()
        holders.append(holder)
        wait_until(lambda: table in ruleset(lab), 5, f"nft -i creating {table}")
    yield own
    for holder in holders:
        holder.kill()
        holder.wait()


def boot_firewall(lab, state, tmp_path, network_toml, ha_toml=None):
    (tmp_path / "network.toml").write_text(network_toml)
    (state / "failsafe.nft").write_text(render_boot.failsafe())
    if ha_toml is not None:
        (tmp_path / "ha.toml").write_text(ha_toml)
    lab.ns(lab.fw, "sysctl", "-q", "-w", *[f"{key}=1" for key in boot.FORWARDING])
    target = Recording(lab.fw)
    status = boot.load_firewall(target, str(tmp_path / "network.toml"), str(state),
                                str(tmp_path / "warning"), str(tmp_path / "ha.toml"))
    warning = tmp_path / "warning"
    return status, target, warning.read_text().strip() if warning.exists() else ""


def open_ports(lab):
    return {(side, port) for side, (namespace, address) in
            {"management": (lab.client, FW_C_V4), "traffic": (lab.server, FW_S_V4)}.items()
            for port in (22, 80, 443) if reaches(lab, namespace, address, port)}


def test_a_valid_network_toml_opens_80_and_443_on_its_interface_only(
        lab, state, tmp_path, listeners):
    status, target, warning = boot_firewall(lab, state, tmp_path, VALID)
    assert (status, warning) == (0, "")
    assert open_ports(lab) == {("management", 80), ("management", 443)}
    # off first; on only once the fail-closed table was live
    assert target.forwarding == [(OFF, False), (ON, True)]
    assert forwarding(lab) == ["1", "1"]


def test_an_invalid_network_toml_leaves_the_console_only(lab, state, tmp_path, listeners):
    status, _, warning = boot_firewall(lab, state, tmp_path, INVALID)
    assert open_ports(lab) == set()
    assert warning.startswith("the dashboard answers on no interface: network.toml has no "
                              "valid management interface")
    assert status == 0 and forwarding(lab) == ["1", "1"]     # the fail-closed table is live


HA = """\
[ha]
enabled = true
role = "secondary"
vrid = 7
sync_interface = "veth-s"
sync_address = "10.10.2.1/24"
peer_address = "10.10.2.2"

[[virtual]]
interface = "veth-c"
addresses = ["10.10.1.254/24"]
"""


def host_rules(lab):
    listed = lab.ns(lab.fw, "nft", "list", "table", "inet", "tusk_host").stdout
    return [line.strip() for line in listed.splitlines() if "tusk: HA" in line]


def test_an_ha_pair_gets_vrrp_and_the_peers_sync_through_the_host_table(
        lab, state, tmp_path, listeners):
    status, _, warning = boot_firewall(lab, state, tmp_path, VALID, HA)
    assert (status, warning) == (0, "")
    assert host_rules(lab) == [
        'iifname "veth-c" meta l4proto vrrp accept comment "tusk: HA: VRRP on the segments '
        'with virtual addresses"',
        'iifname "veth-s" ip saddr 10.10.2.2 udp dport 3780 accept comment "tusk: HA: '
        'connection state from the peer"',
        'iifname "veth-s" ip saddr 10.10.2.2 tcp dport 3781 accept comment "tusk: HA: status '
        'and configuration from the peer"']
    assert open_ports(lab) == {("management", 80), ("management", 443)}
    # disabled, or no file at all: the box alone, nothing of the pair admitted
    boot_firewall(lab, state, tmp_path, VALID, HA.replace("enabled = true", "enabled = false"))
    assert host_rules(lab) == []


ROUTED = """version = 2
[[interfaces]]
name = "veth-c"
role = "management"
dhcp = true
[[interfaces]]
name = "veth-s"
role = "traffic"
addresses = ["10.10.2.1/24"]
[routing.bgp]
asn = 65001
[[routing.bgp.neighbours]]
address = "10.10.2.2"
remote_as = 65010
"""


def test_a_bgp_neighbour_reaches_port_179_and_nobody_else_does(lab, state, tmp_path,
                                                               listeners):
    """network.toml's routing at boot: the neighbour (server) reaches BGP's port on fw,
    the client side does not; without routing, nobody does."""
    bgp = listen(lab, 179)
    try:
        status, _, warning = boot_firewall(lab, state, tmp_path, ROUTED)
        assert (status, warning) == (0, "")
        assert reaches(lab, lab.server, FW_S_V4, 179)
        assert not reaches(lab, lab.client, FW_C_V4, 179)
        assert open_ports(lab) == {("management", 80), ("management", 443)}
        boot_firewall(lab, state, tmp_path, ROUTED.split("[routing.bgp]")[0])
        assert not reaches(lab, lab.server, FW_S_V4, 179)
    finally:
        bgp.kill()
        bgp.wait()


def test_an_unusable_ha_toml_leaves_the_box_alone_and_says_so(lab, state, tmp_path, listeners):
    status, _, warning = boot_firewall(lab, state, tmp_path, VALID,
                                       HA.replace("vrid = 7", "vrid = 700"))
    assert status == 0 and host_rules(lab) == []
    assert warning == "ha.toml cannot be used: this box runs alone (journalctl -u tusk-firewall)"
    assert open_ports(lab) == {("management", 80), ("management", 443)}


def test_a_refused_host_table_still_drops_the_dashboard_ports(
        lab, state, tmp_path, listeners, owned, capsys):
    own = owned
    own("tusk_host")
    status, _, warning = boot_firewall(lab, state, tmp_path, VALID)
    assert open_ports(lab) == set()
    assert "lockdown" in ruleset(lab)
    assert warning.startswith("table inet tusk_host was refused: nothing reaches the box but "
                              "the console")
    assert status == 1
    # nft -c refused it - for the interface, then for none - before any load was tried
    log = capsys.readouterr().out
    assert log.count("table inet tusk_host refused, nothing of it loaded: error[NFT_CHECK]: "
                     "nft -c refused the ruleset: ") == 2, log


def test_forwarding_stays_off_when_no_forward_ruleset_loads(
        lab, state, tmp_path, owned, capsys):
    owned("tusk")                          # the policy and the fail-closed table: refused
    status, target, warning = boot_firewall(lab, state, tmp_path, VALID)
    assert forwarding(lab) == ["0", "0"] and not forwards(lab)
    assert [value for value, _ in target.forwarding] == [OFF]
    assert warning == "no forward ruleset could be loaded: nothing is forwarded"
    assert status == 1
    assert ("table inet tusk (fail-closed) refused, nothing of it loaded: error[NFT_CHECK]: "
            "nft -c refused the ruleset: ") in capsys.readouterr().out


def test_the_boot_tables_wait_for_the_appliers_lock(lab, state, tmp_path):
    """tusk-boot loads its tables under the lock every apply, confirm and rollback takes:
    while someone else holds it, none of them is loaded."""
    done = {}
    step = threading.Thread(target=lambda: done.update(
        status=boot_firewall(lab, state, tmp_path, VALID)[0]))
    with open(state / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        step.start()
        time.sleep(1)                      # what it would load meanwhile, it loads in 1 s
        assert "table inet" not in ruleset(lab) and step.is_alive()
        fcntl.flock(lock, fcntl.LOCK_UN)
    step.join(timeout=20)
    assert done == {"status": 0}
    live = ruleset(lab)
    assert "table inet tusk_host" in live and "fail closed" in live
