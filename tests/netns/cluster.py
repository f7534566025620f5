"""Several firewalls sharing the load (issue 39, item 4; docs/SCALE.md) in network
namespaces: three boxes between an upstream and a downstream router, each box a Tusk
network configuration put into effect by the lab's backend (its addresses, static routes
and FRR: BGP with BFD to both routers, announcing the same prefixes at equal cost), its
ha.toml a cluster's (mode = "cluster") applied and confirmed by the HA applier
(conntrackd alone, every box's connections multicast on the sync link into every other
box's table), and the appliance's host table (render_boot.host, with the box's
management port, cluster and routing): BGP, BFD and the sync reach each box only
because that table admits them.

    client 10.1.0.10 -- up (AS 65100) --+-- fw1 --+-- down (AS 65200) -- server 10.2.0.10
                                        +-- fw2 --+
                                        +-- fw3 --+
                        fw1, fw2, fw3 on the sync link (a bridge): 192.168.255.0/24

The routers are FRR with `maximum-paths 3` and the kernel's symmetric multipath hash
(fib_multipath_hash_policy=3 with the fields of the 5-tuple, 0x0037: hashed with its ends
ordered), so both directions of a connection pick the same box: box i is the i-th next
hop on both sides (10.8.i.2 upstream, 10.9.i.2 downstream - the same order of
addresses). Not policy 1: it takes a hash the packet already carries (the sending
socket's, a NIC's RSS hash) when there is one, and a socket's differs from its peer's and
changes when it retransmits. Each box forwards
only connections in its table (RULESET, nf_conntrack_tcp_loose=0): a connection moved to
another box goes on only if conntrackd put it there."""
import json
import os
import shutil
import time
from pathlib import Path

from hapair import RULESET, Flow

from ha.core import config as ha_config
from ha.core.applier import HaApplier
from ha.core.config import HaError
from lab.namespaces import Topology, remove
from network.core import frr, normalise
from network.core.iproute2 import IprouteBackend
from policy.core import render_boot
from tusklib.target import Target

BOXES = 3
CLIENT, SERVER = "10.1.0.10", "10.2.0.10"
BFD_MS = 100                      # both sides: a silent box is out after 3 x 100 ms


def box_network(i, bfd_ms=BFD_MS):
    """Box i's network.toml: its two routed links, the sync link, static routes to both
    sides, and BGP announcing both sides' prefixes to both routers."""
    return f"""
[[interfaces]]
name = "mgmt"
role = "management"
addresses = ["192.168.77.{i}/24"]

[[interfaces]]
name = "up0"
addresses = ["10.8.{i}.2/24"]

[[interfaces]]
name = "down0"
addresses = ["10.9.{i}.2/24"]

[[interfaces]]
name = "sync0"
addresses = ["192.168.255.{i}/24"]

[[routes]]
destination = "10.1.0.0/24"
gateway = "10.8.{i}.1"

[[routes]]
destination = "10.2.0.0/24"
gateway = "10.9.{i}.1"

[routing]
router_id = "10.9.{i}.2"
bfd_interval = {bfd_ms}

[routing.bgp]
asn = 65001
prefixes = ["10.1.0.0/24", "10.2.0.0/24"]

[[routing.bgp.neighbours]]
address = "10.8.{i}.1"
remote_as = 65100

[[routing.bgp.neighbours]]
address = "10.9.{i}.1"
remote_as = 65200
"""


def box_ha(i):
    """Box i's ha.toml: one of a cluster, on the sync link."""
    return f"""[ha]
enabled = true
mode = "cluster"
sync_interface = "sync0"
sync_address = "192.168.255.{i}/24"
"""


def router(asn, router_id, link, bfd_ms=BFD_MS, count=BOXES):
    """A router's frr.conf: a BGP session with BFD to each box, as many equal paths."""
    boxes = [f"10.{link}.{i}.2" for i in range(1, count + 1)]
    # Both routers must list the boxes in one order, box i i-th, whichever session came
    # up first (docs/SCALE.md). zebra keeps a route's next hops ordered by address, but
    # hands the kernel a nexthop group it made for the first set it saw, in that set's
    # order, and reuses it for the same set in another order: routes without kernel
    # nexthop groups get zebra's order
    lines = ["frr defaults traditional", "no zebra nexthop kernel enable",
             f"router bgp {asn}", f" bgp router-id {router_id}",
             " no bgp ebgp-requires-policy"]
    # a connection refused while a box's bgpd was still being configured would otherwise
    # wait out the traditional 120 s connect-retry timer on both sides (seen in CI: a
    # cluster not up after 90 s); the lab's routers try again every 5 s
    for box in boxes:
        lines += [f" neighbor {box} remote-as 65001", f" neighbor {box} bfd",
                  f" neighbor {box} timers connect 5"]
    lines += [" address-family ipv4 unicast", f"  maximum-paths {count}",
              " exit-address-family", "exit", "bfd"]
    for box in boxes:
        lines += [f" peer {box}", f"  transmit-interval {bfd_ms}",
                  f"  receive-interval {bfd_ms}", " exit"]
    return "\n".join(lines + ["exit"]) + "\n"


def forward_only_known(cluster, i):
    """The boxes' forwarding rules by default: only connections in the table."""
    cluster.ns(cluster.boxes[i - 1], "nft", "-f", "-", input=RULESET)


class Cluster(Topology):
    """firewall(cluster, i): loads box i's forwarding rules (forward_only_known, or a Tusk
    policy in the VM tier); bfd_ms: BFD's interval on both sides of every session;
    boxes: how many; sync False: no ha.toml, no conntrackd (boxes that share nothing)."""

    def __init__(self, prefix, directory, firewall=forward_only_known, bfd_ms=BFD_MS,
                 boxes=BOXES, sync=True):
        super().__init__()
        self.firewall, self.bfd_ms, self.sync = firewall, bfd_ms, sync
        self.prefix = prefix
        self.dir = Path(directory)
        self.client, self.server = f"{prefix}-client", f"{prefix}-server"
        self.up_router, self.down_router = f"{prefix}-up", f"{prefix}-down"
        self.sync = f"{prefix}-sync"
        self.boxes = [f"{prefix}-fw{i}" for i in range(1, boxes + 1)]
        self.names = [self.client, self.server, self.up_router, self.down_router,
                      self.sync, *self.boxes]
        self.backends, self.appliers, self.routers = {}, {}, {}

    def up(self):
        for name in self.names:
            self.namespace(name)
        self.ns(self.sync, "ip", "link", "add", "br0", "type", "bridge", "mcast_snooping",
                "0")
        self.ns(self.sync, "ip", "link", "set", "br0", "up")
        self.wire(self.client, "eth0", self.up_router, "eth0")
        self.wire(self.server, "eth0", self.down_router, "eth0")
        self.address(self.client, "eth0", f"{CLIENT}/24")
        self.route(self.client, "default", "10.1.0.1")
        self.address(self.server, "eth0", f"{SERVER}/24")
        self.route(self.server, "default", "10.2.0.1")
        self.address(self.up_router, "eth0", "10.1.0.1/24")
        self.address(self.down_router, "eth0", "10.2.0.1/24")
        for i, box in enumerate(self.boxes, 1):
            self.wire(self.up_router, f"u{i}", box, "up0")
            self.wire(self.down_router, f"d{i}", box, "down0")
            self.wire(self.sync, f"s{i}", box, "sync0")
            self.ns(self.sync, "ip", "link", "set", f"s{i}", "master", "br0", "up")
            self.address(self.up_router, f"u{i}", f"10.8.{i}.1/24")
            self.address(self.down_router, f"d{i}", f"10.9.{i}.1/24")
            # a management port wired to nothing (the host kernel may lack dummy)
            self.ns(box, "ip", "link", "add", "mgmt", "type", "veth", "peer", "name",
                    "mgmt-end")
            self.ns(box, "ip", "link", "set", "mgmt-end", "up")
        for name in (self.up_router, self.down_router):
            self.forward(name)
            self.ns(name, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=3",
                    "net.ipv4.fib_multipath_hash_fields=0x0037")
        for i, box in enumerate(self.boxes, 1):
            self.forward(box)
            self.ns(box, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0")
            self.firewall(self, i)
            backend = IprouteBackend(Target(box), str(self.dir / f"fw{i}"))
            network = normalise.parse(box_network(i, self.bfd_ms))
            backend.apply(network)
            self.backends[box] = backend
            ha = ha_config.parse(box_ha(i)) if self.sync else None
            self.ns(box, "nft", "-f", "-", input=render_boot.host("mgmt", ha, network.routing))
            if ha is None:
                continue
            # on the sync link's address, once it has it
            applier = self.appliers[i] = HaApplier(str(self.dir / f"fw{i}" / "ha"), netns=box)
            applier.apply(box_ha(i), user="lab", timeout=3600)
            applier.confirm(user="lab")
        for name, asn, link in ((self.up_router, 65100, 8), (self.down_router, 65200, 9)):
            daemons = frr.LabFrr(name)
            daemons.apply(router(asn, "10.1.0.1" if link == 8 else "10.2.0.1", link,
                                 self.bfd_ms, len(self.boxes)), [])
            self.routers[name] = daemons
        return self

    def conntrackd_stats(self, i):
        applier = self.appliers[i]
        return self.ns(self.boxes[i - 1], "conntrackd", "-C",
                       os.path.join(applier.run_dir, "conntrackd.conf"), "-s",
                       check=False).stdout

    def paths(self, router, prefix):
        """The next hops the router's kernel has for prefix."""
        routes = json.loads(self.ns(router, "ip", "-j", "route", "show", prefix).stdout)
        if not routes:
            return []
        route = routes[0]
        return sorted(hop["gateway"] for hop in route.get("nexthops", [route])
                      if "gateway" in hop)

    def ready(self):
        """Each router has every box as an equal path to the other side."""
        count = len(self.boxes)
        return (len(self.paths(self.up_router, "10.2.0.0/24")) == count and
                len(self.paths(self.down_router, "10.1.0.0/24")) == count)

    def unready(self):
        """What the routers had when they were not ready (for wait_until's message): their
        paths and BGP sessions with the state of each."""
        told = []
        for name in (self.up_router, self.down_router):
            prefix = "10.2.0.0/24" if name == self.up_router else "10.1.0.0/24"
            summary = self.routers[name].run("vtysh", "-c", "show bgp summary").stdout \
                if name in self.routers else "(FRR not started)"
            told.append(f"{name}: paths {self.paths(name, prefix)}\n{summary.strip()}")
        return "both routers with every box as an equal path; they had:\n" + "\n".join(told)

    def flow(self, port, **options):
        """hapair's Flow (echoed chunks) from the client to the server through the boxes:
        what it asks of a pair is their namespaces."""
        ends = type("Ends", (), {"names": {"client": self.client, "server": self.server}})
        return Flow(ends(), port, server=SERVER, **options)

    def forwarded_bytes(self):
        """{box number: bytes its up0 has received so far}."""
        found = {}
        for i, box in enumerate(self.boxes, 1):
            link = json.loads(self.ns(box, "ip", "-j", "-s", "link", "show", "up0").stdout)
            found[i] = link[0]["stats64"]["rx"]["bytes"]
        return found

    def carrier(self, seconds=1.0):
        """The box whose up0 received the most over the next `seconds`."""
        before = self.forwarded_bytes()
        time.sleep(seconds)
        after = self.forwarded_bytes()
        return max(after, key=lambda i: after[i] - before[i])

    def entries(self, i, port):
        out = self.ns(self.boxes[i - 1], "conntrack", "-L", "-p", "tcp", "--dport", str(port),
                      check=False).stdout
        return [line for line in out.splitlines() if f"dport={port}" in line]

    def fail(self, i):
        """Box i hangs: every packet into, out of and through it is dropped from now on
        (its links stay up, as behind a switch); its BGP and BFD go silent with it. At
        each link's ingress, ahead of everything - a flowtable's fast path included,
        which forwards before prerouting - and at output."""
        links = "".join(
            f" chain {name} {{ type filter hook ingress device \"{name}\" priority -500; "
            "policy drop; }\n" for name in ("up0", "down0", "sync0", "mgmt"))
        self.ns(self.boxes[i - 1], "nft", "-f", "-", input=(
            f"table netdev dead {{\n{links}}}\n"
            "table inet dead {\n"
            " chain o { type filter hook output priority -500; policy drop; }\n}\n"))

    def down(self):
        for applier in self.appliers.values():
            if applier.store.pending():     # its watchdog would wait out the hour
                try:
                    applier.cancel()
                except HaError:             # the daemons are stopped below either way
                    pass
            applier.daemons.stop()
        self.appliers.clear()
        remove(*self.names)      # FRR's daemons with them
        self.added.clear()
        for name in self.names:
            shutil.rmtree(os.path.join(frr.LAB_DIR, name), ignore_errors=True)
