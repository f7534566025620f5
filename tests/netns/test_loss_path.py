"""The loss path read from a real kernel (dashboard/sampler.py, dashboard/loss.py): in
the lab's fw namespace, a token bucket on the server side drops a flood of datagrams at
the qdisc, and unsolicited ICMP echo replies are packets conntrack calls invalid. The
sampler's counters must show both where they happened, and nothing the traffic did not
cause grows at the stages that should stay at zero."""
import sys
from datetime import timedelta

from django.utils import timezone

from dashboard import loss, sampler
from lab.namespaces import SERVER_V4
from tusklib.target import Target

REPLIES = 20
BLAST = 1000
# conntrack runs in a namespace only once a ruleset there needs it
TRACKED = """table inet loss_test {
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state invalid counter
	}
}
"""
# datagrams of 1400 bytes as fast as the client sends them: far more than a 1 Mbit/s
# bucket with room for two
FLOOD = f"""
import socket
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range({BLAST}):
    sock.sendto(b"x" * 1400, ("{SERVER_V4}", 9))
"""
# ICMP echo replies nobody asked for, from the client's raw socket: conntrack has no
# request for them, so each is invalid
UNSOLICITED = f"""
import socket, struct
def checksum(data):
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xffff)
    return ~(total + (total >> 16)) & 0xffff
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
for seq in range({REPLIES}):
    header = struct.pack("!BBHHH", 0, 0, 0, 4242, seq) + b"tusk"
    packet = struct.pack("!BBHHH", 0, 0, checksum(header), 4242, seq) + b"tusk"
    sock.sendto(packet, ("{SERVER_V4}", 0))
"""


def counters(lab):
    target = Target(lab.fw)
    files = sampler.proc_files(target)
    return sampler.losses(target, sampler.links(target), files,
                          sampler.seqadj(files["/proc/net/nf_conntrack_seqadj"]))


class Taken:
    def __init__(self, taken, counted):
        self.taken, self.loss = taken, counted


def test_qdisc_drops_and_invalid_packets_show_where_they_happen(lab):
    lab.ns(lab.fw, "tc", "qdisc", "replace", "dev", "veth-s", "root", "tbf", "rate", "1mbit",
           "burst", "3000", "limit", "3000")
    lab.ns(lab.fw, "nft", "-f", "-", input=TRACKED)
    try:
        lab.ns(lab.client, "ping", "-c", "1", "-W", "5", SERVER_V4)
        before = counters(lab)
        lab.ns(lab.client, sys.executable, "-c", FLOOD)
        lab.ns(lab.client, sys.executable, "-c", UNSOLICITED)
        after = counters(lab)
    finally:
        lab.ns(lab.fw, "tc", "qdisc", "del", "dev", "veth-s", "root", check=False)
        lab.ns(lab.fw, "nft", "delete", "table", "inet", "loss_test", check=False)
    grown = {key: after[key] - before.get(key, 0) for key in after
             if after[key] != before.get(key, 0)}
    assert grown.get("qdisc.drops@veth-s", 0) > 100, grown
    assert grown.get("conntrack.invalid", 0) >= REPLIES, grown
    # every stage the lab reads is there, for both of fw's interfaces
    for key in ("nic.rx_missed@veth-c", "nic.rx_crc@veth-s", "nic.tx_dropped@veth-s",
                "softnet.dropped", "conntrack.insert_failed", "conntrack.drop",
                "qdisc.drops@veth-c"):
        assert key in after, key
    # nothing else that should stay at zero grew (softnet is the machine's: left out)
    unexpected = {key for key in grown if loss.split(key)[0].zero
                  and key != "qdisc.drops@veth-s" and not key.startswith("softnet.")}
    assert not unexpected, grown
    # as the Loss page sums them up: the qdisc is losing now, invalid is no alarm
    now = timezone.now()
    rows = {row.key: row for row in loss.summary(
        [Taken(now - timedelta(seconds=5), before), Taken(now, after)], now)}
    assert rows["qdisc.drops@veth-s"].alarm and rows["qdisc.drops@veth-s"].rate > 0
    assert not rows["conntrack.invalid"].alarm
    assert rows["conntrack.invalid"].last_increase == now
