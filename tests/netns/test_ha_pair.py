"""Two firewalls as one (issue 23, docs/HA.md), on this kernel with plain flows: the
keepalived.conf and conntrackd.conf that ha/core/render.py writes, run by the real
daemons in two firewall namespaces.

    client --[inside segment]-- fwA, fwB --[outside segment]-- server
                                 fwA ====[sync link]==== fwB

Each segment is a bridge in a namespace of its own; the client's and the server's
gateways are the pair's virtual addresses. Both firewalls forward only connections they
know (a ruleset that drops new packets other than SYNs, nf_conntrack_tcp_loose=0): a
connection survives the failover only if conntrackd put it into the backup's table. Each
firewall's own input is the host table tusk-boot loads for a pair (render_boot.host):
VRRP on the segments and the peer's conntrackd on the sync link, nothing else.
The randomised flow's failover, on Tusk's kernel, is the VM tier's."""
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from ha.core import config as ha_config
from ha.core import render, status
from lab.paths import ROOT
from pcaps import netns
from policy.core import render_boot

PREFIX = f"tt{os.getpid() % 100000}-ha"
NS = {name: f"{PREFIX}-{name}" for name in ("client", "server", "in", "out", "a", "b")}
INSIDE, OUTSIDE = ipaddress.ip_network("198.51.100.0/24"), ipaddress.ip_network("203.0.113.0/24")
VIP_IN, VIP_OUT = "198.51.100.1", "203.0.113.1"
CLIENT, SERVER = "198.51.100.10", "203.0.113.10"
OWN = {"a": ("198.51.100.2", "203.0.113.2", "192.168.255.1"),
       "b": ("198.51.100.3", "203.0.113.3", "192.168.255.2")}
PORT = 5301
NOTIFY = ROOT / "rootfs-overlay" / "usr" / "lib" / "tusk" / "ha-notify"
RULESET = """\
table inet tusk_ha_test {
    chain forward {
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        ct state new tcp flags & (syn | ack) == syn accept
        ct state new ip protocol icmp accept
    }
}
"""


def ns(name, *argv, check=True, **kwargs):
    return subprocess.run(["ip", "netns", "exec", NS[name], *map(str, argv)], check=check,
                          capture_output=True, text=True, **kwargs)


def document(side):
    primary = side == "a"
    own_in, own_out, sync = OWN[side]
    peer = OWN["b" if primary else "a"][2]
    return {"ha": {"enabled": True, "role": "primary" if primary else "secondary",
                   "vrid": 42, "advert_ms": 250, "preempt": False,
                   "sync_interface": "sync0", "sync_address": f"{sync}/30",
                   "peer_address": peer},
            "virtual": [{"interface": "inside0", "addresses": [f"{VIP_IN}/24"]},
                        {"interface": "outside0", "addresses": [f"{VIP_OUT}/24"]}]}


class Pair:
    """The namespaces, links and both firewalls' daemons; down() removes all of it."""

    def __init__(self, directory):
        self.dir = directory
        self.daemons = {}

    def up(self):
        for name in NS:
            subprocess.run(["ip", "netns", "add", NS[name]], check=True)
            ns(name, "ip", "link", "set", "lo", "up")
        for switch in ("in", "out"):
            ns(switch, "ip", "link", "add", "br0", "type", "bridge")
            ns(switch, "ip", "link", "set", "br0", "up")
        # each end's port on its segment's bridge
        for host, switch, port in (("client", "in", "eth0"), ("a", "in", "inside0"),
                                   ("b", "in", "inside0"), ("server", "out", "eth0"),
                                   ("a", "out", "outside0"), ("b", "out", "outside0")):
            peer = f"{host}-{port}"[:15]
            subprocess.run(["ip", "link", "add", "tmp-ha0", "type", "veth", "peer", "name",
                            "tmp-ha1"], check=True)
            subprocess.run(["ip", "link", "set", "tmp-ha0", "netns", NS[host], "name", port],
                           check=True)
            subprocess.run(["ip", "link", "set", "tmp-ha1", "netns", NS[switch], "name", peer],
                           check=True)
            ns(switch, "ip", "link", "set", peer, "master", "br0", "up")
            ns(host, "ip", "link", "set", port, "up")
        subprocess.run(["ip", "link", "add", "tmp-ha0", "type", "veth", "peer", "name",
                        "tmp-ha1"], check=True)
        for end, side in (("tmp-ha0", "a"), ("tmp-ha1", "b")):
            subprocess.run(["ip", "link", "set", end, "netns", NS[side], "name", "sync0"],
                           check=True)
            ns(side, "ip", "link", "set", "sync0", "up")
        ns("client", "ip", "addr", "add", f"{CLIENT}/24", "dev", "eth0")
        ns("client", "ip", "route", "add", "default", "via", VIP_IN)
        ns("server", "ip", "addr", "add", f"{SERVER}/24", "dev", "eth0")
        ns("server", "ip", "route", "add", "default", "via", VIP_OUT)
        for side in ("a", "b"):
            own_in, own_out, sync = OWN[side]
            ns(side, "ip", "addr", "add", f"{own_in}/24", "dev", "inside0")
            ns(side, "ip", "addr", "add", f"{own_out}/24", "dev", "outside0")
            ns(side, "ip", "addr", "add", f"{sync}/30", "dev", "sync0")
            ns(side, "sysctl", "-qw", "net.ipv4.ip_forward=1",
               "net.netfilter.nf_conntrack_tcp_loose=0")
            ns(side, "nft", "-f", "-", input=RULESET)
            # the box's own input as tusk-boot loads it for the pair: VRRP and the
            # peer's state sync get through, nothing else does
            ns(side, "nft", "-f", "-", input=render_boot.host(
                None, ha=ha_config.from_document(document(side))))
            self.start(side)
        return self

    def start(self, side):
        """Both daemons of one firewall, with the configuration the renderer writes."""
        run = self.dir / side
        run.mkdir(exist_ok=True)
        model = ha_config.from_document(document(side))
        (run / "keepalived.conf").write_text(render.keepalived_conf(model, state_dir=run,
                                                                    notify=NOTIFY))
        (run / "conntrackd.conf").write_text(render.conntrackd_conf(model, state_dir=run))
        self.daemons[side] = [
            subprocess.Popen(["ip", "netns", "exec", NS[side], "conntrackd", "-C",
                              run / "conntrackd.conf"], stdout=subprocess.DEVNULL,
                             stderr=open(run / "conntrackd.log", "w")),
            subprocess.Popen(["ip", "netns", "exec", NS[side], "keepalived", "--dont-fork",
                              "--log-console", "--vrrp", "-f", run / "keepalived.conf",
                              "-p", run / "keepalived.pid", "-r", run / "vrrp.pid"],
                             stdout=open(run / "keepalived.log", "w"), stderr=subprocess.STDOUT)]

    def reboot(self, side):
        """What a firewall that died has after it boots again."""
        for link, address in (("inside0", VIP_IN), ("outside0", VIP_OUT)):
            ns(side, "ip", "addr", "del", f"{address}/24", "dev", link, check=False)
        for name in ("conntrackd.lock", "conntrackd.ctl", "state"):
            (self.dir / side / name).unlink(missing_ok=True)
        ns(side, "conntrack", "-F", check=False)
        for link in ("inside0", "outside0", "sync0"):
            ns(side, "ip", "link", "set", link, "up")
        self.start(side)

    def state(self, side):
        try:
            return (self.dir / side / "state").read_text().strip()
        except OSError:
            return None

    def wait_state(self, side, state, seconds=20):
        deadline = time.monotonic() + seconds
        while self.state(side) != state:
            assert time.monotonic() < deadline, \
                f"fw{side.upper()} is {self.state(side)}, not {state}; " + self.logs(side)
            time.sleep(0.1)

    def settled(self):
        """fwA master, fwB backup - and still so after fwB's master-down interval (three
        adverts of 250 ms and a skew, about 0.9 s: wide enough for a loaded test machine)
        has passed a few times: fwB hears fwA's adverts."""
        self.wait_state("a", "MASTER")
        time.sleep(3)
        assert (self.state("a"), self.state("b")) == ("MASTER", "BACKUP"), self.logs("b")
        assert self.has("a", VIP_IN) and self.has("a", VIP_OUT)
        assert not self.has("b", VIP_IN) and not self.has("b", VIP_OUT)

    def logs(self, side):
        return "".join(f"\n--- {name}:\n{(self.dir / side / name).read_text()[-2000:]}"
                       for name in ("keepalived.log", "conntrackd.log")
                       if (self.dir / side / name).exists())

    def has(self, side, address):
        return f"inet {address}/" in ns(side, "ip", "-4", "addr", "show").stdout

    def stats(self, side):
        """conntrackd's report of this firewall, as the HA page reads it."""
        out = ns(side, "conntrackd", "-C", self.dir / side / "conntrackd.conf", "-s")
        return status.sync_health(status.conntrackd_stats(out.stdout))

    def wait_entries(self, side, seconds=10):
        """Until the flow's connection is in that firewall's kernel table."""
        deadline = time.monotonic() + seconds
        while not self.entries(side):
            assert time.monotonic() < deadline, \
                f"the connection never reached fw{side.upper()}'s table:" + self.logs(side)
            time.sleep(0.2)
        return self.entries(side)

    def entries(self, side):
        out = ns(side, "conntrack", "-L", "-p", "tcp", "--dport", PORT, check=False)
        return [line for line in out.stdout.splitlines() if f"dport={PORT}" in line]

    def stop(self, side, how=signal.SIGTERM):
        for process in self.daemons.pop(side, []):
            if process.poll() is None:
                process.send_signal(how)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def down(self):
        for side in list(self.daemons):
            self.stop(side)
        for name in NS.values():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


@pytest.fixture
def pair(tmp_path):
    for tool, package in (("keepalived", "keepalived"), ("conntrackd", "conntrackd"),
                          ("conntrack", "conntrack")):
        if shutil.which(tool) is None:
            pytest.fail(f"missing {tool} (Debian package {package}; make test installs it)")
    pair = Pair(tmp_path)
    try:
        yield pair.up()
    finally:
        pair.down()


class Flow:
    """One TCP connection client -> server through the pair, sending a numbered chunk
    every 20 ms that the server echoes; counts what came back and any error."""

    def __init__(self):
        with netns(NS["server"]):
            self.listener = socket.create_server((SERVER, PORT))
        with netns(NS["client"]):
            self.sock = socket.create_connection((SERVER, PORT), timeout=5)
        self.conn, _ = self.listener.accept()
        self.echoed, self.error, self.running = 0, None, True
        self.threads = [threading.Thread(target=self._echo, daemon=True),
                        threading.Thread(target=self._send, daemon=True)]
        for thread in self.threads:
            thread.start()

    def _echo(self):
        try:
            while data := self.conn.recv(65536):
                self.conn.sendall(data)
        except OSError:
            pass

    def _send(self):
        number, pending = 0, b""
        try:
            while self.running:
                chunk = f"{number:08d}".encode() * 64
                self.sock.sendall(chunk)
                want = len(chunk)
                while want:
                    data = self.sock.recv(want)
                    if not data:
                        raise ConnectionError("the server closed the connection")
                    pending += data
                    want -= len(data)
                if pending != chunk:
                    raise AssertionError(f"chunk {number} came back changed")
                pending = b""
                self.echoed += 1
                number += 1
                time.sleep(0.02)
        except (OSError, ConnectionError, AssertionError) as error:
            self.error = error

    def progress(self, chunks, seconds=15):
        """Until `chunks` more chunks came back, or the flow broke."""
        goal, deadline = self.echoed + chunks, time.monotonic() + seconds
        while self.echoed < goal:
            assert self.error is None, f"the flow broke: {self.error!r}"
            assert time.monotonic() < deadline, \
                f"the flow stalled at chunk {self.echoed} (wanted {goal})"
            time.sleep(0.05)

    def close(self):
        self.running = False
        for thing in (self.sock, self.conn, self.listener):
            thing.close()


def test_the_primary_holds_the_addresses_and_the_backup_has_the_connection(pair):
    pair.settled()
    flow = Flow()
    try:
        flow.progress(20)
        # conntrackd put the connection straight into the backup's kernel table
        entries = pair.wait_entries("b")
        assert "ESTABLISHED" in entries[0], entries
        # what the HA page shows of each: the roles, and the sync's numbers
        assert (status.role(pair.dir / "a"), status.role(pair.dir / "b")) == \
            ("MASTER", "BACKUP")
        backup = pair.stats("b")
        assert backup["injected"] >= 1 and backup["inject_failures"] == 0, backup
        assert backup["lost"] == 0 and backup["malformed"] == 0, backup
        assert pair.stats("a")["entries"] >= 1
    finally:
        flow.close()


def test_a_flow_survives_the_primarys_failure_and_the_failback(pair):
    pair.settled()
    flow = Flow()
    try:
        flow.progress(20)
        pair.wait_entries("b")
        # fwA dies: its links go down, its daemons with them
        for link in ("inside0", "outside0", "sync0"):
            ns("a", "ip", "link", "set", link, "down")
        pair.stop("a", signal.SIGKILL)
        pair.wait_state("b", "MASTER", seconds=5)
        assert pair.has("b", VIP_IN) and pair.has("b", VIP_OUT)
        flow.progress(50)            # through fwB, which knew the connection
        # fwA comes back as after a reboot: no virtual address, an empty table, nothing
        # left in /run; nopreempt - fwB stays master - and fwA learns the connection
        pair.reboot("a")
        pair.wait_state("a", "BACKUP")
        assert pair.state("b") == "MASTER"
        pair.wait_entries("a", seconds=15)
        # the maintenance failback: fwB stops its daemons the clean way
        pair.stop("b")
        pair.wait_state("a", "MASTER", seconds=5)
        flow.progress(50)
        assert flow.error is None
    finally:
        flow.close()
