"""Scale-out (issue 39, item 4; docs/SCALE.md): three boxes sharing the load behind ECMP
routers (cluster.py), on this kernel with plain flows; the VM tier does it with a
randomised one. A box that hangs is out of the routers' paths in under a second (BFD),
and the connections it carried go on through another box, which has them in its table
from conntrackd's multicast - no reset, the gap BFD's detection and TCP's
retransmission."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster import BFD_MS, BOXES, CLIENT, SERVER, Cluster
from kit import wait_until

PREFIX = f"sc{os.getpid() % 100000}"
# connect and close back to back (make bench-scale's and bench-policy's tool)
CONNRATE = str(Path(__file__).resolve().parents[1] / "bench" / "connrate.py")


@pytest.fixture
def cluster(tmp_path):
    lab = Cluster(PREFIX, tmp_path)
    lab.down()
    try:
        lab.up()
        wait_until(lab.ready, 90, lab.unready)
        yield lab
    finally:
        lab.down()


def test_both_directions_of_each_connection_cross_one_box(cluster):
    """The routers' symmetric hash: for 30 connections, the box the upstream router
    picks for client -> server is the one the downstream router picks for the replies."""
    same, boxes = 0, set()
    for sport in range(40000, 40030):
        up = cluster.ns(cluster.up_router, "ip", "route", "get", SERVER, "from", CLIENT,
                        "iif", "lo", "ipproto", "tcp", "sport", str(sport), "dport",
                        "5001").stdout
        down = cluster.ns(cluster.down_router, "ip", "route", "get", CLIENT, "from", SERVER,
                          "iif", "lo", "ipproto", "tcp", "sport", "5001", "dport",
                          str(sport)).stdout
        box_up = up.split(" via 10.8.")[1].split(".")[0]
        box_down = down.split(" via 10.9.")[1].split(".")[0]
        same += box_up == box_down
        boxes.add(box_up)
    assert same == 30
    assert len(boxes) == BOXES, f"30 connections spread over boxes {sorted(boxes)} only"


def test_real_connections_cross_one_box_both_ways_first_time(cluster):
    """What `ip route get` cannot show: real packets carry a hash of their own (the
    sending socket's random one; on hardware a NIC's), which the kernel's multipath
    policy 1 takes instead of hashing the 5-tuple - so a SYN and its SYN/ACK took
    different boxes, the SYN/ACK met a box without the connection and was dropped, and
    each connection waited for a retransmitted SYN (2 connections in 2 s, both slow,
    seen with policy 1). With policy 3 over the 5-tuple: no connection waits."""
    server = cluster.popen(cluster.server, sys.executable, CONNRATE, "server", "5301",
                           stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()          # listening
        run = json.loads(cluster.ns(cluster.client, sys.executable, CONNRATE, "client",
                                    SERVER, "5301", "2").stdout)
    finally:
        server.kill()
    assert run["connections"] >= 200 and run["failed"] == 0, run
    assert run["slow"] == 0, f"{run['slow']} connections waited for a retransmitted SYN"


def test_a_connection_goes_on_when_its_box_hangs(cluster):
    elephant = cluster.flow(5001)
    try:
        elephant.progress(50)
        carrier = cluster.carrier()
        # every box has the connection: the carrier's own, the others' from the multicast
        for i in range(1, BOXES + 1):
            wait_until(lambda i=i: cluster.entries(i, 5001), 10,
                       lambda i=i: f"fw{i} has the connection in its table:\n"
                                   + cluster.conntrackd_stats(i))
        failed_at = time.monotonic()
        cluster.fail(carrier)
        wait_until(lambda: f"10.8.{carrier}.2" not in
                   cluster.paths(cluster.up_router, "10.2.0.0/24"), 5,
                   f"fw{carrier} out of the upstream router's paths")
        detected = time.monotonic() - failed_at
        elephant.progress(100, seconds=30)
        assert elephant.error is None
        now = cluster.carrier()
        assert now != carrier
        assert detected < 1.0, f"{detected:.2f} s (BFD: 3 x {BFD_MS} ms)"
        print(f"fw{carrier} hung: out of the paths after {detected * 1000:.0f} ms, the "
              f"flow on through fw{now}, its longest wait {elephant.longest_wait:.2f} s")
        assert elephant.longest_wait < 3.0
        elephant.finish()
    finally:
        elephant.close()
