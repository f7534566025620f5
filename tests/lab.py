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

Used by `make run` (python3 tests/lab.py up|down) and by the namespace and VM tests.
Traffic only ever flows between these namespaces.
"""
import pwd
import subprocess
import sys
from pathlib import Path

USERS_TABLE = Path(__file__).resolve().parents[1] / "buildroot-external/board/tusk/users.txt"

CLIENT_V4, FW_C_V4, FW_S_V4, SERVER_V4 = "10.10.1.2", "10.10.1.1", "10.10.2.1", "10.10.2.2"
CLIENT_V6, FW_C_V6, FW_S_V6, SERVER_V6 = "fd00:10:1::2", "fd00:10:1::1", "fd00:10:2::1", "fd00:10:2::2"
# fw - router transit network, only with a router
FW_R_V4, ROUTER_V4 = "10.10.3.1", "10.10.3.2"
FW_R_V6, ROUTER_V6 = "fd00:10:3::1", "fd00:10:3::2"
# client - server directly, only with bypass
CLIENT_BYPASS_V4, SERVER_BYPASS_V4 = "10.10.9.1", "10.10.9.2"


def system_users():
    """The image's own users (the Buildroot users table): the web user tusk, nginx's
    tusk-nginx, the capture analyser's tusk-analyze. PostgreSQL's comes with its package."""
    for line in USERS_TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#") and line.split()[0] != "postgres":
            yield line.split()[0]


def ensure_system_users():
    """Creates the image's users that this machine lacks (ids as the host allots them:
    nothing here outlives the lab), so that the lab and the tests run each part of Tusk
    as the user the appliance runs it as."""
    for user in system_users():
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", user],
                           check=True, capture_output=True)


def sh(*argv, check=True, input=None):
    return subprocess.run(argv, check=check, capture_output=True, text=True, input=input)


class Lab:
    def __init__(self, prefix="tusk", router_mtu=None, bypass=False):
        self.prefix = prefix
        self.bypass = bypass
        self.client, self.fw, self.server = (f"{prefix}-client", f"{prefix}-fw", f"{prefix}-server")
        self.router = f"{prefix}-router"
        self.router_mtu = router_mtu

    @property
    def namespaces(self):
        middle = (self.fw, self.router) if self.router_mtu else (self.fw,)
        return (self.client, *middle, self.server)

    def ns(self, name, *argv, check=True, input=None):
        return sh("ip", "netns", "exec", name, *argv, check=check, input=input)

    def popen(self, name, *argv, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", name, *argv], **kwargs)

    def up(self):
        self.down()
        for name in self.namespaces:
            sh("ip", "netns", "add", name)
            self.ns(name, "ip", "link", "set", "lo", "up")
            self.ns(name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
            self.ns(name, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
        self._wire(self.client, "eth0", self.fw, "veth-c")
        self._address(self.client, "eth0", CLIENT_V4, CLIENT_V6)
        self._address(self.fw, "veth-c", FW_C_V4, FW_C_V6)
        self._default_route(self.client, FW_C_V4, FW_C_V6)
        if self.router_mtu:
            self._wire(self.router, "eth0", self.fw, "veth-s")
            self._address(self.fw, "veth-s", FW_R_V4, FW_R_V6)
            self._address(self.router, "eth0", ROUTER_V4, ROUTER_V6)
            self._wire(self.server, "eth0", self.router, "eth1")
            self._address(self.router, "eth1", FW_S_V4, FW_S_V6)
            self._route(self.fw, "10.10.2.0/24", "fd00:10:2::/64", ROUTER_V4, ROUTER_V6)
            self._route(self.router, "10.10.1.0/24", "fd00:10:1::/64", FW_R_V4, FW_R_V6)
            # Only the router's side: the server keeps MTU 1500 and advertises MSS 1460,
            # so the client's full-size segments meet the narrow hop and need PMTUD.
            self.mtu(self.router, "eth1", self.router_mtu)
            self._forward(self.router)
        else:
            self._wire(self.server, "eth0", self.fw, "veth-s")
            self._address(self.fw, "veth-s", FW_S_V4, FW_S_V6)
        self._address(self.server, "eth0", SERVER_V4, SERVER_V6)
        self._default_route(self.server, FW_S_V4, FW_S_V6)
        self._forward(self.fw)
        if self.bypass:
            self._wire(self.client, "bypass", self.server, "bypass")
            for ns, address in ((self.client, CLIENT_BYPASS_V4), (self.server, SERVER_BYPASS_V4)):
                self.ns(ns, "ip", "addr", "add", f"{address}/30", "dev", "bypass")
                self.ns(ns, "ip", "link", "set", "bypass", "up")
        return self

    def down(self):
        for name in (self.client, self.fw, self.router, self.server):
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", name, check=False)

    def mtu(self, ns, interface, mtu):
        self.ns(ns, "ip", "link", "set", interface, "mtu", str(mtu))

    def _wire(self, a, a_interface, b, b_interface):
        """A veth pair between namespaces a and b. Created under a temporary name: the
        final one (eth0) may already exist where ip runs."""
        sh("ip", "link", "add", "tusk-tmp0", "netns", a, "type", "veth",
           "peer", "name", b_interface, "netns", b)
        self.ns(a, "ip", "link", "set", "tusk-tmp0", "name", a_interface)

    def _address(self, ns, interface, v4, v6):
        self.ns(ns, "ip", "addr", "add", f"{v4}/24", "dev", interface)
        self.ns(ns, "ip", "-6", "addr", "add", f"{v6}/64", "dev", interface, "nodad")
        self.ns(ns, "ip", "link", "set", interface, "up")

    def _default_route(self, ns, v4, v6):
        self.ns(ns, "ip", "route", "add", "default", "via", v4)
        self.ns(ns, "ip", "-6", "route", "add", "default", "via", v6)

    def _route(self, ns, net4, net6, v4, v6):
        self.ns(ns, "ip", "route", "add", net4, "via", v4)
        self.ns(ns, "ip", "-6", "route", "add", net6, "via", v6)

    def _forward(self, ns):
        self.ns(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("up", "down") \
            or sys.argv[3:] not in ([], ["--bypass"]):
        print("usage: lab.py up|down PREFIX [--bypass]", file=sys.stderr)
        sys.exit(2)
    lab = Lab(sys.argv[2], bypass="--bypass" in sys.argv[3:])
    getattr(lab, sys.argv[1])()
    if sys.argv[1] == "up":
        print(f"lab up: {lab.client} - {lab.fw} - {lab.server}")
