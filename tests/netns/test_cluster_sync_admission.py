"""The host table of a cluster's box plays the attacker's side of the sync (issue 39,
docs/SCALE.md, docs/SECURITY.md): conntrackd takes whatever arrives on its multicast
group and puts it into the kernel's table, so the table admits the group's UDP only on
the sync link and only from its subnet. A listener joined to the group (as conntrackd
joins it) in the box's namespace, the box's table render_boot.host's for a cluster; a
member of the sync link reaches it, nothing else does: not a sender of another subnet
on the sync link, not a traffic link's neighbour, not one that forges a sync address on
a traffic link. The other half - the sync admitted does carry the cluster's
connections - is tests/netns/test_scale_out.py's."""
import os
import subprocess
import sys
import time

import pytest

from ha.core import config as ha_config
from lab.namespaces import Topology
from policy.core import render_boot
from tusklib.names import CLUSTER_GROUP, HA_SYNC_PORT

PREFIX = f"cs{os.getpid() % 100000}"
BOX, MEMBER, OUTSIDER = f"{PREFIX}-box", f"{PREFIX}-member", f"{PREFIX}-out"
CLUSTER = """[ha]
enabled = true
mode = "cluster"
sync_interface = "sync0"
sync_address = "192.168.255.1/24"
"""
LISTEN = """
import socket, struct, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("%(group)s", %(port)d))
for address in ("192.168.255.1", "10.66.0.1"):   # the group joined on both links
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                    struct.pack("4s4s", socket.inet_aton("%(group)s"),
                                socket.inet_aton(address)))
print("listening", flush=True)
sock.settimeout(%(seconds)f)
try:
    while True:
        data, peer = sock.recvfrom(2048)
        print(data.decode(), peer[0], flush=True)
except socket.timeout:
    pass
""" % {"group": CLUSTER_GROUP, "port": HA_SYNC_PORT, "seconds": 4.0}
SEND = """
import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(sys.argv[1]))
sock.bind((sys.argv[1], 0))
for _ in range(3):
    sock.sendto(sys.argv[2].encode(), ("%(group)s", %(port)d))
""" % {"group": CLUSTER_GROUP, "port": HA_SYNC_PORT}


@pytest.fixture
def lab():
    topology = Topology()
    try:
        for name in (BOX, MEMBER, OUTSIDER):
            topology.namespace(name)
        topology.wire(BOX, "sync0", MEMBER, "eth0")
        topology.wire(BOX, "up0", OUTSIDER, "eth0")
        topology.address(BOX, "sync0", "192.168.255.1/24")
        topology.address(BOX, "up0", "10.66.0.1/24")
        # the member: its own sync address, and one of another subnet on the same link
        topology.address(MEMBER, "eth0", "192.168.255.2/24", "172.31.0.2/24")
        # the outsider: its own address, and a forged sync address on the traffic link
        topology.address(OUTSIDER, "eth0", "10.66.0.2/24", "192.168.255.3/24")
        ha = ha_config.parse(CLUSTER)
        topology.ns(BOX, "nft", "-f", "-", input=render_boot.host(None, ha))
        yield topology
    finally:
        topology.down()


def sent_and_heard(topology, senders):
    """[(namespace, source address, tag)] sent to the group -> the tags heard in BOX."""
    listener = topology.popen(BOX, sys.executable, "-c", LISTEN, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert listener.stdout.readline().strip() == "listening"
        for namespace, source, tag in senders:
            topology.ns(namespace, sys.executable, "-c", SEND, source, tag)
        time.sleep(0.5)
        out, _ = listener.communicate(timeout=15)
    finally:
        if listener.poll() is None:
            listener.kill()
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_only_the_sync_links_members_reach_the_clusters_group(lab):
    heard = sent_and_heard(lab, [(MEMBER, "192.168.255.2", "member"),
                                 (MEMBER, "172.31.0.2", "other-subnet"),
                                 (OUTSIDER, "10.66.0.2", "traffic-link"),
                                 (OUTSIDER, "192.168.255.3", "forged-on-traffic-link")])
    assert heard == {"member"}


def test_without_the_host_table_every_sender_is_heard(lab):
    """The listener and the senders work: what the table refuses would arrive."""
    lab.ns(BOX, "nft", "delete", "table", "inet", "tusk_host")
    heard = sent_and_heard(lab, [(MEMBER, "172.31.0.2", "other-subnet"),
                                 (OUTSIDER, "10.66.0.2", "traffic-link")])
    assert heard == {"other-subnet", "traffic-link"}
