"""Agent side: one statistics sample of the target (the system, or the lab's fw
namespace). Interface counters from `ip -s -s -j link`, conntrack from /proc/sys, the
seqrand counters from /proc/net/nf_conntrack_seqadj - all read inside the target's
network namespace - and the loss path's counters (loss.py) from the same output, the
root qdiscs (`tc -s -j qdisc`), softnet and conntrack's statistics. Softirqs and softnet
are per CPU and not namespaced."""
import json
from datetime import timedelta

from django.utils import timezone

from tusklib.target import Target

from . import loss
from .models import RETENTION, Sample

_PRUNE_EVERY = 30
_count = 0

_PROC = ("/proc/sys/net/netfilter/nf_conntrack_count",
         "/proc/sys/net/netfilter/nf_conntrack_max",
         "/proc/net/nf_conntrack_seqadj",
         "/proc/net/softnet_stat",
         "/proc/net/stat/nf_conntrack")


def links(target):
    """`ip -s -s -j link show` in the target: its text, "" when it failed."""
    result = target.run(["ip", "-s", "-s", "-j", "link", "show"])
    return result.stdout if result.ok else ""


def interfaces(text):
    if not text:
        return {}
    found = {}
    for link in json.loads(text):
        if link.get("link_type") == "loopback":
            continue
        stats = link.get("stats64") or link.get("stats") or {}
        rx, tx = stats.get("rx", {}), stats.get("tx", {})
        found[link["ifname"]] = {
            "rx_bytes": rx.get("bytes", 0), "tx_bytes": tx.get("bytes", 0),
            "rx_packets": rx.get("packets", 0), "tx_packets": tx.get("packets", 0),
            "rx_dropped": rx.get("dropped", 0), "tx_dropped": tx.get("dropped", 0),
            "rx_errors": rx.get("errors", 0), "tx_errors": tx.get("errors", 0),
            "operstate": link.get("operstate", ""),
        }
    return found


def proc_files(target):
    """The files of _PROC as the target sees them: {path: text or None}."""
    return {path: text or None for path, text in target.read_files(_PROC).items()}


def _int(text):
    try:
        return int(text.strip())
    except (AttributeError, ValueError):
        return None


seqadj = loss.seqadj_counters


def softirqs(path="/proc/stat"):
    """{cpu: [jiffies in softirq, jiffies in all]} - the share of a CPU's time spent
    in softirq between two samples is its network-processing load."""
    found = {}
    with open(path, encoding="ascii") as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0].startswith("cpu") and fields[0] != "cpu":
                # user nice system idle iowait irq softirq steal (guest counted in user)
                values = [int(v) for v in fields[1:9]]
                found[fields[0][3:]] = [values[6], sum(values)]
    return found


def losses(target, link_text, files, seqadj_counters):
    """The loss path's counters of this sample (loss.py)."""
    try:
        qdiscs = target.run(["tc", "-s", "-j", "qdisc", "show"])
        qdisc_text = qdiscs.stdout if qdiscs.ok else ""
    except OSError:       # no tc here: the other stages still count
        qdisc_text = ""
    return loss.counters(link_text, qdisc_text, files[_PROC[3]], files[_PROC[4]],
                         seqadj_counters)


def sample(config):
    global _count
    target = Target(config.netns or None)
    files = proc_files(target)
    link_text = links(target)
    counters = seqadj(files[_PROC[2]])
    taken = Sample.objects.create(
        taken=timezone.now(), interfaces=interfaces(link_text),
        conntrack_count=_int(files[_PROC[0]]), conntrack_max=_int(files[_PROC[1]]),
        softirqs=softirqs(), seqadj=counters,
        loss=losses(target, link_text, files, counters))
    _count += 1
    if _count % _PRUNE_EVERY == 1:
        Sample.objects.filter(taken__lt=taken.taken - timedelta(seconds=RETENTION)).delete()
    return taken
