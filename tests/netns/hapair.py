"""Two firewalls as one (issue 23, docs/HA.md) in network namespaces: the topology, the
daemons with the configuration ha/core/render.py writes, and a flow through the pair.
The namespace tier runs it on this kernel with plain flows (test_ha_pair.py); the VM
tier's guest scenario ha-seqrand on Tusk's kernel with randomised ones.

    client --[inside segment]-- fwA, fwB --[outside segment]-- server
                                 fwA ====[sync link]==== fwB

Each segment is a bridge in a namespace of its own (in, out); the client's and the
server's gateways are the pair's virtual addresses. nf_conntrack_tcp_loose=0 on both
firewalls: a connection survives the failover only if conntrackd put it into the
backup's table. Each firewall's own input is the host table tusk-boot loads for a pair
(render_boot.host): VRRP on the segments and the peer's conntrackd on the sync link."""
import ipaddress
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from kit import wait_until
from pcaps import netns

from ha.core import config as ha_config
from ha.core import render, status
from lab.namespaces import Topology
from policy.core import render_boot

ROOT = Path(__file__).resolve().parents[2]
NOTIFY = ROOT / "rootfs-overlay" / "usr" / "lib" / "tusk" / "ha-notify"
INSIDE, OUTSIDE = ipaddress.ip_network("198.51.100.0/24"), ipaddress.ip_network("203.0.113.0/24")
VIP_IN, VIP_OUT = "198.51.100.1", "203.0.113.1"
CLIENT, SERVER = "198.51.100.10", "203.0.113.10"
OWN = {"a": ("198.51.100.2", "203.0.113.2", "192.168.255.1"),
       "b": ("198.51.100.3", "203.0.113.3", "192.168.255.2")}
# a firewall that forwards only connections it knows
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


def document(side, advert_ms):
    """ha.toml's content for one firewall of the pair."""
    primary = side == "a"
    sync = OWN[side][2]
    peer = OWN["b" if primary else "a"][2]
    return {"ha": {"enabled": True, "role": "primary" if primary else "secondary",
                   "vrid": 42, "advert_ms": advert_ms, "preempt": False,
                   "sync_interface": "sync0", "sync_address": f"{sync}/30",
                   "peer_address": peer},
            "virtual": [{"interface": "inside0", "addresses": [f"{VIP_IN}/24"]},
                        {"interface": "outside0", "addresses": [f"{VIP_OUT}/24"]}]}


class Pair(Topology):
    """The namespaces, links and both firewalls' daemons; down() removes all of it.
    firewall(pair, side): loads the forwarding rules of one firewall (RULESET by
    default; the guest scenario applies a Tusk policy with the tusk CLI)."""

    def __init__(self, prefix, directory, advert_ms=250, firewall=None):
        super().__init__()
        self.names = {name: f"{prefix}-{name}"
                      for name in ("client", "server", "in", "out", "a", "b")}
        self.dir = Path(directory)
        self.advert_ms = advert_ms
        self.firewall = firewall or (lambda pair, side: pair.run(side, "nft", "-f", "-",
                                                                 input=RULESET))
        self.daemons = {}
        self.conntrackd_extra = ""
        # conntrackd.conf's text -> what a test runs instead (a hazard's configuration)
        self.conntrackd_edit = lambda text: text

    def run(self, name, *argv, check=True, input=None):
        return self.ns(self.names[name], *map(str, argv), check=check, input=input)

    def up(self):
        for name in self.names.values():
            self.namespace(name)
        for switch in ("in", "out"):
            self.run(switch, "ip", "link", "add", "br0", "type", "bridge")
            self.run(switch, "ip", "link", "set", "br0", "up")
        # each end's port on its segment's bridge
        for host, switch, port in (("client", "in", "eth0"), ("a", "in", "inside0"),
                                   ("b", "in", "inside0"), ("server", "out", "eth0"),
                                   ("a", "out", "outside0"), ("b", "out", "outside0")):
            peer = f"{host}-{port}"[:15]
            self.wire(self.names[host], port, self.names[switch], peer)
            self.run(switch, "ip", "link", "set", peer, "master", "br0", "up")
            self.run(host, "ip", "link", "set", port, "up")
        self.wire(self.names["a"], "sync0", self.names["b"], "sync0")
        self.address(self.names["client"], "eth0", f"{CLIENT}/24")
        self.route(self.names["client"], "default", VIP_IN)
        self.address(self.names["server"], "eth0", f"{SERVER}/24")
        self.route(self.names["server"], "default", VIP_OUT)
        for side in ("a", "b"):
            own_in, own_out, sync = OWN[side]
            self.address(self.names[side], "inside0", f"{own_in}/24")
            self.address(self.names[side], "outside0", f"{own_out}/24")
            self.address(self.names[side], "sync0", f"{sync}/30")
            self.forward(self.names[side])
            self.run(side, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0")
            self.firewall(self, side)
            # the box's own input as tusk-boot loads it for the pair: VRRP and the
            # peer's state sync get through, nothing else does
            self.run(side, "nft", "-f", "-", input=render_boot.host(
                None, ha=ha_config.from_document(document(side, self.advert_ms))))
            self.start(side)
        return self

    def start(self, side):
        """Both daemons of one firewall, with the configuration the renderer writes."""
        run = self.dir / side
        run.mkdir(parents=True, exist_ok=True)
        model = ha_config.from_document(document(side, self.advert_ms))
        (run / "keepalived.conf").write_text(render.keepalived_conf(model, state_dir=run,
                                                                    notify=NOTIFY))
        (run / "conntrackd.conf").write_text(self.conntrackd_edit(
            render.conntrackd_conf(model, state_dir=run) + self.conntrackd_extra))
        self.daemons[side] = [
            self.conntrackd(side),
            self.popen(self.names[side], "keepalived", "--dont-fork", "--log-console",
                       "--vrrp", "-f", str(run / "keepalived.conf"),
                       "-p", str(run / "keepalived.pid"), "-r", str(run / "vrrp.pid"),
                       stdout=open(run / "keepalived.log", "a"), stderr=subprocess.STDOUT)]

    def conntrackd(self, side):
        run = self.dir / side
        (run / "conntrackd.lock").unlink(missing_ok=True)
        return self.popen(self.names[side], "conntrackd", "-C", str(run / "conntrackd.conf"),
                          stdout=subprocess.DEVNULL, stderr=open(run / "conntrackd.log", "a"))

    def stop_conntrackd(self, side):
        """That firewall's conntrackd alone stopped: it syncs nothing, learns nothing."""
        process = self.daemons[side][0]
        process.terminate()
        process.wait(10)

    def start_conntrackd(self, side):
        """Started again: it asks the peer for its whole table (StartupResync)."""
        self.daemons[side][0] = self.conntrackd(side)

    def wait_cached(self, side, entries=1, seconds=30):
        """Until that firewall's conntrackd answers with at least `entries` connections in
        its cache: one that started has read its kernel table by then."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if self.stats(side)["entries"] >= entries:
                    return
            except subprocess.CalledProcessError:
                pass                    # not answering yet
            if time.monotonic() > deadline:
                raise AssertionError(f"fw{side.upper()}'s conntrackd never held {entries} "
                                     "connections:" + self.logs(side))
            time.sleep(0.2)

    def fail_traffic(self, side):
        """The firewall loses its traffic segments and its keepalived; its conntrackd and
        the sync link stay (a peer whose sync comes late can still ask it)."""
        for link in ("inside0", "outside0"):
            self.run(side, "ip", "link", "set", link, "down")
        kill_tree(self.daemons[side].pop())

    def fail(self, side):
        """The firewall dies: its links go down, its daemons with them."""
        for link in ("inside0", "outside0", "sync0"):
            self.run(side, "ip", "link", "set", link, "down")
        self.stop(side, signal.SIGKILL)

    def reboot(self, side):
        """What a firewall that died has after it boots again: no virtual address, an
        empty table, nothing left in /run."""
        for link, address in (("inside0", VIP_IN), ("outside0", VIP_OUT)):
            self.run(side, "ip", "addr", "del", f"{address}/24", "dev", link, check=False)
        for name in ("conntrackd.lock", "conntrackd.ctl", "state"):
            (self.dir / side / name).unlink(missing_ok=True)
        self.run(side, "conntrack", "-F", check=False)
        for link in ("inside0", "outside0", "sync0"):
            self.run(side, "ip", "link", "set", link, "up")
        self.start(side)

    def state(self, side):
        try:
            return (self.dir / side / "state").read_text().strip()
        except OSError:
            return None

    def wait_state(self, side, state, seconds=20):
        deadline = time.monotonic() + seconds
        while self.state(side) != state:
            if time.monotonic() > deadline:
                raise AssertionError(f"fw{side.upper()} is {self.state(side)}, not {state}; "
                                     + self.logs(side))
            time.sleep(0.1)

    def settled(self, seconds=None):
        """fwA master, fwB backup - and still so after fwB's master-down interval
        (three adverts and a skew) has passed a few times: fwB hears fwA's adverts."""
        self.wait_state("a", "MASTER")
        time.sleep(seconds if seconds is not None else 12 * self.advert_ms / 1000)
        if (self.state("a"), self.state("b")) != ("MASTER", "BACKUP"):
            raise AssertionError(f"fwA {self.state('a')}, fwB {self.state('b')}"
                                 + self.logs("b"))
        assert self.has("a", VIP_IN) and self.has("a", VIP_OUT)
        # a backup that was master for a moment (its master-down timer ran out on a loaded
        # machine before fwA's advert came) drops the addresses as it goes back: they must
        # be gone, and stay gone, once it is BACKUP - waited for, not assumed at an instant
        wait_until(lambda: not self.has("b", VIP_IN) and not self.has("b", VIP_OUT), 5,
                   lambda: f"fwB is {self.state('b')} and still holds the virtual addresses"
                           + self.logs("b"))
        assert (self.state("a"), self.state("b")) == ("MASTER", "BACKUP"), self.logs("b")

    def logs(self, side):
        """What a failure should show: each daemon's state and output, conntrackd's
        report (its configuration logs to syslog, which a namespace may not have)."""
        text = "".join(f"\n--- {name}:\n{(self.dir / side / name).read_text()[-2000:]}"
                       for name in ("keepalived.log", "conntrackd.log")
                       if (self.dir / side / name).exists())
        for process in self.daemons.get(side, []):
            code = process.poll()
            text += f"\n--- {process.args[4]}: " + (
                "running" if code is None else f"exited with status {code}")
        report = self.run(side, "conntrackd", "-C", self.dir / side / "conntrackd.conf", "-s",
                          check=False)
        return text + f"\n--- conntrackd -s:\n{report.stdout}{report.stderr}"

    def has(self, side, address):
        return f"inet {address}/" in self.run(side, "ip", "-4", "addr", "show").stdout

    def stats(self, side):
        """conntrackd's report of this firewall, as the HA page reads it."""
        out = self.run(side, "conntrackd", "-C", self.dir / side / "conntrackd.conf", "-s")
        return status.sync_health(status.conntrackd_stats(out.stdout))

    def entries(self, side, port):
        out = self.run(side, "conntrack", "-L", "-p", "tcp", "--dport", port, check=False)
        return [line for line in out.stdout.splitlines() if f"dport={port}" in line]

    def wait_entries(self, side, port, seconds=10):
        """Until a connection to port is in that firewall's kernel table."""
        deadline = time.monotonic() + seconds
        while not self.entries(side, port):
            if time.monotonic() > deadline:
                raise AssertionError(f"the connection never reached fw{side.upper()}'s "
                                     "table:" + self.logs(side))
            time.sleep(0.2)
        return self.entries(side, port)

    def stop(self, side, how=signal.SIGTERM):
        """Both daemons of a firewall: SIGTERM asks each to stop (keepalived's parent
        stops its VRRP child first); SIGKILL kills each with every process under it."""
        for process in self.daemons.pop(side, []):
            if how == signal.SIGKILL:
                kill_tree(process)
                continue
            if process.poll() is None:
                process.send_signal(how)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    kill_tree(process)

    def down(self):
        for side in list(self.daemons):
            self.stop(side)
        super().down()
        # what a daemon killed on purpose leaves: its control socket cannot be copied
        for left in self.dir.glob("*/conntrackd.*"):
            if left.suffix in (".ctl", ".lock"):
                left.unlink(missing_ok=True)


def kill_tree(process, seconds=10):
    """SIGKILL to a daemon and every process under it, as a box that dies, returning once
    none is alive (a zombie holds no locks). keepalived runs VRRP in a child that
    outlives a parent killed alone by seconds, its pid file still locked: a keepalived
    started then found "daemon is already running" and stopped."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue                    # ended while being read
    tree = [process.pid]
    for pid in tree:
        tree += [child for child, parent in parents.items() if parent == pid]
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(seconds)
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in tree):
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.args[4]}: processes {tree} outlived SIGKILL")
        time.sleep(0.05)


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Flow:
    """One TCP connection client -> server through the pair, sending a numbered chunk
    every `pause` seconds that the server echoes; counts what came back and any
    error. A chunk that comes back changed is an error too; so is a wait for one longer
    than `timeout` seconds (a failover takes VRRP's detection and TCP's next
    retransmission)."""

    def __init__(self, pair, port, chunk_bytes=512, pause=0.02, timeout=5, server=SERVER):
        with netns(pair.names["server"]):
            self.listener = socket.create_server((server, port))
        with netns(pair.names["client"]):
            self.sock = socket.create_connection((server, port), timeout=timeout)
        self.conn, _ = self.listener.accept()
        self.client_port = self.sock.getsockname()[1]
        self.repeat = max(1, chunk_bytes // 8)
        self.pause = pause
        self.echoed, self.error, self.running = 0, None, True
        self.longest_wait = 0.0
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
        number = 0
        try:
            while self.running:
                chunk = f"{number:08d}".encode() * self.repeat
                sent = time.monotonic()
                self.sock.sendall(chunk)
                pending, want = b"", len(chunk)
                while want:
                    data = self.sock.recv(want)
                    if not data:
                        raise ConnectionError("the server closed the connection")
                    pending += data
                    want -= len(data)
                if pending != chunk:
                    raise AssertionError(f"chunk {number} came back changed")
                self.longest_wait = max(self.longest_wait, time.monotonic() - sent)
                self.echoed += 1
                number += 1
                time.sleep(self.pause)
        except (OSError, ConnectionError, AssertionError) as error:
            if self.running:
                self.error = error

    def progress(self, chunks, seconds=15):
        """Until `chunks` more chunks came back, or the flow broke."""
        goal, deadline = self.echoed + chunks, time.monotonic() + seconds
        while self.echoed < goal:
            if self.error is not None:
                raise AssertionError(f"the flow broke: {self.error!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the flow stalled at chunk {self.echoed} "
                                     f"(wanted {goal})")
            time.sleep(0.05)

    def finish(self):
        """Stops after the chunk in flight, then ends the connection the orderly way:
        FIN from both ends, nothing unread, so no reset."""
        self.running = False
        self.threads[1].join(30)
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.threads[0].join(10)
        self.close()

    def close(self):
        self.running = False
        for thing in (self.sock, self.conn, self.listener):
            thing.close()
