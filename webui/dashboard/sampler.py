"""Agent side: one statistics sample of the target (the system, or the lab's fw
namespace). Interface counters from `ip -s -j link`, conntrack from /proc/sys, the
seqrand counters from /proc/net/nf_conntrack_seqadj - all read inside the target's
network namespace. Softirqs are per CPU and not namespaced."""
import json
from datetime import timedelta

from django.utils import timezone

from policy.core.target import Target

from .models import RETENTION, Sample

_PRUNE_EVERY = 30
_count = 0

_PROC = ("/proc/sys/net/netfilter/nf_conntrack_count",
         "/proc/sys/net/netfilter/nf_conntrack_max",
         "/proc/net/nf_conntrack_seqadj")


def interfaces(target):
    result = target.run(["ip", "-s", "-j", "link", "show"])
    if not result.ok:
        return {}
    found = {}
    for link in json.loads(result.stdout):
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
    """The three files in one process in the namespace: {path: text or None}."""
    script = "; ".join(f'echo "=={p}"; cat {p} 2>/dev/null' for p in _PROC)
    result = target.run(["sh", "-c", script])
    found, current = {}, None
    for line in result.stdout.splitlines():
        if line.startswith("==/proc/"):
            current = line[2:]
            found[current] = []
        elif current:
            found[current].append(line)
    return {p: ("\n".join(found[p]) if found.get(p) else None) for p in _PROC}


def _int(text):
    try:
        return int(text.strip())
    except (AttributeError, ValueError):
        return None


def seqadj(text):
    if text is None:
        return None
    counters = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            counters[name] = int(value)
    return counters


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


def sample(config):
    global _count
    target = Target(config.netns or None)
    files = proc_files(target)
    taken = Sample.objects.create(
        taken=timezone.now(), interfaces=interfaces(target),
        conntrack_count=_int(files[_PROC[0]]), conntrack_max=_int(files[_PROC[1]]),
        softirqs=softirqs(), seqadj=seqadj(files[_PROC[2]]))
    _count += 1
    if _count % _PRUNE_EVERY == 1:
        Sample.objects.filter(taken__lt=taken.taken - timedelta(seconds=RETENTION)).delete()
    return taken
