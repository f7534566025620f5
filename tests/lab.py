"""A lab of network namespaces standing in for the networks: client - fw - server.

    <prefix>-client  eth0 10.10.1.2/24 fd00:10:1::2/64
    <prefix>-fw      veth-c 10.10.1.1/24 fd00:10:1::1/64 | veth-s 10.10.2.1/24 fd00:10:2::1/64
    <prefix>-server  eth0 10.10.2.2/24 fd00:10:2::2/64

Used by `make run` (python3 tests/lab.py up|down) and by the namespace tests.
Traffic only ever flows between these namespaces.
"""
import subprocess
import sys

CLIENT_V4, FW_C_V4, FW_S_V4, SERVER_V4 = "10.10.1.2", "10.10.1.1", "10.10.2.1", "10.10.2.2"
CLIENT_V6, FW_C_V6, FW_S_V6, SERVER_V6 = "fd00:10:1::2", "fd00:10:1::1", "fd00:10:2::1", "fd00:10:2::2"


def sh(*argv, check=True, input=None):
    return subprocess.run(argv, check=check, capture_output=True, text=True, input=input)


class Lab:
    def __init__(self, prefix="tusk"):
        self.prefix = prefix
        self.client, self.fw, self.server = (f"{prefix}-client", f"{prefix}-fw", f"{prefix}-server")

    def ns(self, name, *argv, check=True, input=None):
        return sh("ip", "netns", "exec", name, *argv, check=check, input=input)

    def popen(self, name, *argv, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", name, *argv], **kwargs)

    def up(self):
        self.down()
        for name in (self.client, self.fw, self.server):
            sh("ip", "netns", "add", name)
            self.ns(name, "ip", "link", "set", "lo", "up")
            self.ns(name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
            self.ns(name, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
        for peer, fw_if, net4, net6, peer_v4, fw_v4, peer_v6, fw_v6 in (
                (self.client, "veth-c", "10.10.1", "fd00:10:1", CLIENT_V4, FW_C_V4, CLIENT_V6, FW_C_V6),
                (self.server, "veth-s", "10.10.2", "fd00:10:2", SERVER_V4, FW_S_V4, SERVER_V6, FW_S_V6)):
            sh("ip", "link", "add", "tusk-tmp0", "netns", peer, "type", "veth",
               "peer", "name", fw_if, "netns", self.fw)
            self.ns(peer, "ip", "link", "set", "tusk-tmp0", "name", "eth0")
            self.ns(peer, "ip", "addr", "add", f"{peer_v4}/24", "dev", "eth0")
            self.ns(peer, "ip", "-6", "addr", "add", f"{peer_v6}/64", "dev", "eth0", "nodad")
            self.ns(peer, "ip", "link", "set", "eth0", "up")
            self.ns(peer, "ip", "route", "add", "default", "via", fw_v4)
            self.ns(peer, "ip", "-6", "route", "add", "default", "via", fw_v6)
            self.ns(self.fw, "ip", "addr", "add", f"{fw_v4}/24", "dev", fw_if)
            self.ns(self.fw, "ip", "-6", "addr", "add", f"{fw_v6}/64", "dev", fw_if, "nodad")
            self.ns(self.fw, "ip", "link", "set", fw_if, "up")
        self.ns(self.fw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.ns(self.fw, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        return self

    def down(self):
        for name in (self.client, self.fw, self.server):
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", name, check=False)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("up", "down"):
        print("usage: lab.py up|down PREFIX", file=sys.stderr)
        sys.exit(2)
    lab = Lab(sys.argv[2])
    getattr(lab, sys.argv[1])()
    if sys.argv[1] == "up":
        print(f"lab up: {lab.client} - {lab.fw} - {lab.server}")
