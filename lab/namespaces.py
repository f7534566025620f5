"""A lab of network namespaces standing in for the networks: client - fw - server.

    <prefix>-client  eth0 10.10.1.2/24 fd00:10:1::2/64
    <prefix>-fw      veth-c 10.10.1.1/24 fd00:10:1::1/64 | veth-s 10.10.2.1/24 fd00:10:2::1/64
    <prefix>-server  eth0 10.10.2.2/24 fd00:10:2::2/64

With router_mtu, a router sits between fw and the server and sends towards the server
with that MTU (path-MTU tests: the router, not fw, sends the "too big" errors):

    <prefix>-fw      veth-s 10.10.3.1/24 fd00:10:3::1/64
    <prefix>-router  eth0 10.10.3.2/24 fd00:10:3::2/64 | eth1 10.10.2.1/24 fd00:10:2::1/64
    <prefix>-server  eth0 10.10.2.2/24 fd00:10:2::2/64 (unchanged: its gateway is the router)

With bypass, a veth pair joins client and server directly on a subnet of its own, so
that the same two stacks can talk without fw (the self-test's "direct" path; no other
route changes):

    <prefix>-client  bypass 10.10.9.1/30  ---  <prefix>-server  bypass 10.10.9.2/30

With bridge, fw forwards at layer 2, as Tusk's transparent bridge mode does: its ports
join one bridge without addresses, and client and server share the server's subnet:

    <prefix>-client  eth0 10.10.2.3/24 fd00:10:2::3/64
    <prefix>-fw      br0 = veth-c + veth-s, no address
    <prefix>-server  eth0 10.10.2.2/24 fd00:10:2::2/64

With links="netdevsim" (Tusk's test kernel only, which has netdevsim and its flowtable
patch, tests/vm/kernel/), every pair is two linked netdevsim ports instead of veth: the
kernel's simulated NIC, which takes flowtable hardware offload, so a test sees what a
flowtable gives to hardware (Lab.netdevsim names each port's debugfs folder).

With management (tools/tusk-lab gives it), fw gets a management port of its own, as
the appliance has one: a veth whose peer lives in the root namespace, so that this host
reaches the dashboard on fw's management address as an operator's browser reaches the box:

    <prefix>-fw      mgmt <subnet>.1/24  ---  root namespace  <prefix[:12]>-mg <subnet>.254/24

The subnet is the lab's own /24 of 198.18.0.0/15 (RFC 2544's range for testing network
devices: no real network uses it), the (HTTP port mod 512)th: `make run` on port 8000 has
198.19.64.0/24 (fw 198.19.64.1), a lab on 8010 198.19.74.0/24, so labs side by side,
which hold different ports, have different subnets (management_subnet()).

Used by tools/tusk-lab (`make run`), the namespace, web and VM tests and the benchmarks;
Topology, which Lab is built with, also wires the web tier's smaller labs. By hand:
`python3 -m lab.namespaces up|down PREFIX [--bypass]` from the repository's top.
Traffic only ever flows between these namespaces.
"""
import ipaddress
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CLIENT_V4, FW_C_V4, FW_S_V4, SERVER_V4 = "10.10.1.2", "10.10.1.1", "10.10.2.1", "10.10.2.2"
CLIENT_V6, FW_C_V6, FW_S_V6, SERVER_V6 = ("fd00:10:1::2", "fd00:10:1::1", "fd00:10:2::1",
                                          "fd00:10:2::2")
# the client with bridge: on the server's subnet, across fw's bridge
BRIDGED_CLIENT_V4, BRIDGED_CLIENT_V6 = "10.10.2.3", "fd00:10:2::3"
BRIDGE = "br0"
# fw - router transit network, only with a router
FW_R_V4, ROUTER_V4 = "10.10.3.1", "10.10.3.2"
FW_R_V6, ROUTER_V6 = "fd00:10:3::1", "fd00:10:3::2"
# client - server directly, only with bypass
CLIENT_BYPASS_V4, SERVER_BYPASS_V4 = "10.10.9.1", "10.10.9.2"
# fw's management port and its peer in the root namespace, only with management
MANAGEMENT_PORT = "mgmt"
MANAGEMENT_RANGE = ipaddress.ip_network("198.18.0.0/15")
MANAGEMENT_FW_HOST, MANAGEMENT_PEER_HOST = 1, 254   # .1 and .254 of the lab's /24
NETDEVSIM = Path("/sys/bus/netdevsim")
NETDEVSIM_DEBUGFS = Path("/sys/kernel/debug/netdevsim")


def management_subnet(http_port):
    """The lab's management /24: the (http_port mod 512)th of 198.18.0.0/15."""
    subnets = 1 << (24 - MANAGEMENT_RANGE.prefixlen)
    first = int(MANAGEMENT_RANGE.network_address) + (http_port % subnets) * 256
    return ipaddress.ip_network((first, 24))


def routed_here(subnet):
    """The root namespace's routes that overlap subnet, as `ip route` prints them."""
    routes = json.loads(sh("ip", "-j", "-4", "route", "show", "table", "all").stdout or "[]")
    return [f"{route['dst']} dev {route.get('dev', '?')}" for route in routes
            if route.get("dst", "default") != "default"
            and ipaddress.ip_network(route["dst"], strict=False).overlaps(subnet)]


def sh(*argv, check=True, input=None):
    return subprocess.run(argv, check=check, capture_output=True, text=True, input=input)


class Topology:
    """Network namespaces joined by veth pairs (or netdevsim ports: links="netdevsim"),
    with addresses, routes and forwarding. down() removes the namespaces it added, and
    whatever still runs in them, and the netdevsim devices it made."""

    def __init__(self, links="veth"):
        if links not in ("veth", "netdevsim"):
            raise ValueError(f"links: veth or netdevsim, not {links!r}")
        self.added = []
        self.links = links
        # (namespace, interface) -> the port's debugfs folder, for netdevsim links
        self.netdevsim = {}
        self.netdevsim_ids = []

    def ns(self, name, *argv, check=True, input=None):
        return sh("ip", "netns", "exec", name, *argv, check=check, input=input)

    def popen(self, name, *argv, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", name, *argv], **kwargs)

    def namespace(self, name):
        sh("ip", "netns", "add", name)
        self.added.append(name)
        self.ns(name, "ip", "link", "set", "lo", "up")
        self.ns(name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
        self.ns(name, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
        return name

    def wire(self, a, a_interface, b, b_interface):
        """A veth pair (or two linked netdevsim ports) between namespaces a and b.
        Created under a temporary name: the final one (eth0) may already exist where
        ip runs."""
        if self.links == "netdevsim":
            self.wire_netdevsim(a, a_interface, b, b_interface)
            return
        sh("ip", "link", "add", "tusk-tmp0", "netns", a, "type", "veth",
           "peer", "name", b_interface, "netns", b)
        self.ns(a, "ip", "link", "set", "tusk-tmp0", "name", a_interface)

    def wire_netdevsim(self, a, a_interface, b, b_interface):
        """A netdevsim device of one port in each namespace, linked to each other
        (netdevsim forwards what one transmits to the other's receive path)."""
        ifindexes = [self.netdevsim_port(ns, interface)
                     for ns, interface in ((a, a_interface), (b, b_interface))]
        # the kernel resolves the namespaces from file descriptors of the writer
        fds = [os.open(f"/run/netns/{ns}", os.O_RDONLY) for ns in (a, b)]
        try:
            (NETDEVSIM / "link_device").write_text(
                f"{fds[0]}:{ifindexes[0]} {fds[1]}:{ifindexes[1]}")
        finally:
            for fd in fds:
                os.close(fd)

    def netdevsim_port(self, ns, interface):
        """A new netdevsim device with one port, created from inside ns (a device
        lives in the namespace of whoever created it), renamed interface -> its
        ifindex."""
        taken = {int(p.name[len("netdevsim"):]) for p in (NETDEVSIM / "devices").glob("netdevsim*")}
        ident = next(n for n in itertools.count(1) if n not in taken)
        self.ns(ns, "sh", "-c", f"echo {ident} 1 > {NETDEVSIM}/new_device")
        self.netdevsim_ids.append(ident)
        parent = f"netdevsim{ident}"
        deadline = time.monotonic() + 10
        while True:         # the port's netdev appears once the driver probed the device
            links = json.loads(self.ns(ns, "ip", "-j", "-d", "link", "show").stdout)
            found = [link for link in links if link.get("parentdev") == parent]
            if found:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no netdev of {parent} appeared in {ns}")
            time.sleep(0.05)
        self.ns(ns, "ip", "link", "set", found[0]["ifname"], "name", interface)
        self.netdevsim[(ns, interface)] = NETDEVSIM_DEBUGFS / parent / "ports" / "0"
        return found[0]["ifindex"]

    def address(self, ns, interface, *prefixes):
        """Each address/length on interface (IPv6 without duplicate detection), then up."""
        for prefix in prefixes:
            family = ("-6",) if ":" in prefix else ()
            nodad = ("nodad",) if family else ()
            self.ns(ns, "ip", *family, "addr", "add", prefix, "dev", interface, *nodad)
        self.ns(ns, "ip", "link", "set", interface, "up")

    def route(self, ns, destination, via):
        family = ("-6",) if ":" in via else ()
        self.ns(ns, "ip", *family, "route", "add", destination, "via", via)

    def forward(self, ns):
        self.ns(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")

    def mtu(self, ns, interface, mtu):
        self.ns(ns, "ip", "link", "set", interface, "mtu", str(mtu))

    def down(self):
        remove(*reversed(self.added))
        self.added.clear()
        self.remove_netdevsim()

    def remove_netdevsim(self):
        """The netdevsim devices this topology made: a namespace's deletion moves them
        to the root namespace, it does not delete them."""
        for ident in self.netdevsim_ids:
            try:
                (NETDEVSIM / "del_device").write_text(str(ident))
            except OSError:
                pass            # already gone
        self.netdevsim_ids.clear()
        self.netdevsim.clear()


def remove(*namespaces):
    """The namespaces gone, with every process still in them (missing ones are fine)."""
    for name in namespaces:
        for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
            sh("kill", "-9", pid, check=False)
        sh("ip", "netns", "del", name, check=False)


class Lab(Topology):
    def __init__(self, prefix="tusk", router_mtu=None, bypass=False, management=None,
                 links="veth", bridge=False):
        """management: the subnet (ipaddress.IPv4Network, a /24) of fw's management port,
        or None for a lab without one. links: veth, or netdevsim (Tusk's test kernel).
        bridge: fw bridges veth-c and veth-s (no router, no addresses on fw)."""
        if bridge and (router_mtu or bypass):
            raise ValueError("a bridged lab has no router and no bypass")
        super().__init__(links)
        self.bridge = bridge
        self.prefix = prefix
        self.bypass = bypass
        self.management = management
        self.management_peer = f"{prefix[:12]}-mg"   # a link name has at most 15 characters
        self.client, self.fw, self.server = (f"{prefix}-client", f"{prefix}-fw", f"{prefix}-server")
        self.router = f"{prefix}-router"
        self.router_mtu = router_mtu

    @property
    def management_address(self):
        """fw's management address (without its length), or None."""
        return str(self.management[MANAGEMENT_FW_HOST]) if self.management else None

    @property
    def management_peer_address(self):
        """This host's address on the management subnet (the peer's), or None."""
        return str(self.management[MANAGEMENT_PEER_HOST]) if self.management else None

    @property
    def namespaces(self):
        middle = (self.fw, self.router) if self.router_mtu else (self.fw,)
        return (self.client, *middle, self.server)

    def up(self):
        self.down()
        for name in self.namespaces:
            self.namespace(name)
        if self.bridge:
            return self.bridged()
        self.wire(self.client, "eth0", self.fw, "veth-c")
        self.address(self.client, "eth0", f"{CLIENT_V4}/24", f"{CLIENT_V6}/64")
        self.address(self.fw, "veth-c", f"{FW_C_V4}/24", f"{FW_C_V6}/64")
        self.route(self.client, "default", FW_C_V4)
        self.route(self.client, "default", FW_C_V6)
        if self.router_mtu:
            self.wire(self.router, "eth0", self.fw, "veth-s")
            self.address(self.fw, "veth-s", f"{FW_R_V4}/24", f"{FW_R_V6}/64")
            self.address(self.router, "eth0", f"{ROUTER_V4}/24", f"{ROUTER_V6}/64")
            self.wire(self.server, "eth0", self.router, "eth1")
            self.address(self.router, "eth1", f"{FW_S_V4}/24", f"{FW_S_V6}/64")
            self.route(self.fw, "10.10.2.0/24", ROUTER_V4)
            self.route(self.fw, "fd00:10:2::/64", ROUTER_V6)
            self.route(self.router, "10.10.1.0/24", FW_R_V4)
            self.route(self.router, "fd00:10:1::/64", FW_R_V6)
            # Only the router's side: the server keeps MTU 1500 and advertises MSS 1460,
            # so the client's full-size segments meet the narrow hop and need PMTUD.
            self.mtu(self.router, "eth1", self.router_mtu)
            self.forward(self.router)
        else:
            self.wire(self.server, "eth0", self.fw, "veth-s")
            self.address(self.fw, "veth-s", f"{FW_S_V4}/24", f"{FW_S_V6}/64")
        self.address(self.server, "eth0", f"{SERVER_V4}/24", f"{SERVER_V6}/64")
        self.route(self.server, "default", FW_S_V4)
        self.route(self.server, "default", FW_S_V6)
        self.forward(self.fw)
        if self.bypass:
            self.wire(self.client, "bypass", self.server, "bypass")
            self.address(self.client, "bypass", f"{CLIENT_BYPASS_V4}/30")
            self.address(self.server, "bypass", f"{SERVER_BYPASS_V4}/30")
        if self.management:
            self.management_port()
        return self

    def bridged(self):
        """up()'s topology with bridge: fw's ports in one bridge, no address on fw."""
        self.wire(self.client, "eth0", self.fw, "veth-c")
        self.wire(self.server, "eth0", self.fw, "veth-s")
        self.ns(self.fw, "ip", "link", "add", BRIDGE, "type", "bridge")
        # as on Tusk's kernel, which has no br_netfilter (-e: a kernel without it has no
        # such keys)
        self.ns(self.fw, "sysctl", "-qwe", *(f"net.bridge.bridge-nf-call-{t}=0"
                                             for t in ("iptables", "ip6tables", "arptables")))
        for port in ("veth-c", "veth-s"):
            self.ns(self.fw, "ip", "link", "set", port, "master", BRIDGE)
            self.ns(self.fw, "ip", "link", "set", port, "up")
        self.ns(self.fw, "ip", "link", "set", BRIDGE, "up")
        self.address(self.client, "eth0", f"{BRIDGED_CLIENT_V4}/24", f"{BRIDGED_CLIENT_V6}/64")
        self.address(self.server, "eth0", f"{SERVER_V4}/24", f"{SERVER_V6}/64")
        if self.management:
            self.management_port()
        return self

    def management_port(self):
        length = self.management.prefixlen
        sh("ip", "link", "add", self.management_peer, "type", "veth",
           "peer", "name", MANAGEMENT_PORT, "netns", self.fw)
        sh("ip", "addr", "add", f"{self.management_peer_address}/{length}",
           "dev", self.management_peer)
        sh("ip", "link", "set", self.management_peer, "up")
        self.address(self.fw, MANAGEMENT_PORT, f"{self.management_address}/{length}")

    def down(self):
        """Also what an earlier run under this prefix left behind. The management peer
        first: it would outlive the namespace for a while (the kernel dismantles a
        namespace in the background), and the next up() needs its name."""
        if self.management:
            sh("ip", "link", "del", self.management_peer, check=False)
        remove(self.client, self.fw, self.router, self.server)
        self.added.clear()
        self.remove_netdevsim()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("up", "down") \
            or sys.argv[3:] not in ([], ["--bypass"]):
        print("usage: python3 -m lab.namespaces up|down PREFIX [--bypass]", file=sys.stderr)
        sys.exit(2)
    lab = Lab(sys.argv[2], bypass="--bypass" in sys.argv[3:])
    getattr(lab, sys.argv[1])()
    if sys.argv[1] == "up":
        print(f"lab up: {lab.client} - {lab.fw} - {lab.server}")
