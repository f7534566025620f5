"""Rates from consecutive raw samples, for the dashboard's numbers and charts."""
from datetime import timedelta

from django.utils import timezone

from .models import Sample

WINDOW = 300  # seconds of history in the charts


def recent(window=WINDOW):
    since = timezone.now() - timedelta(seconds=window)
    return list(Sample.objects.filter(taken__gte=since).order_by("taken"))


def _rate(now, before, seconds):
    delta = now - before
    return delta / seconds if delta >= 0 and seconds > 0 else None  # a counter reset


def series(samples):
    """-> {"interfaces": {ifname: {"bps_rx": [...], ...}}, "softirq": {cpu: [...]},
    "times": [...]} with one point per pair of consecutive samples."""
    out = {"interfaces": {}, "softirq": {}, "conntrack": [], "times": []}
    for before, now in zip(samples, samples[1:]):
        seconds = (now.taken - before.taken).total_seconds()
        out["times"].append(now.taken)
        out["conntrack"].append(now.conntrack_count)
        for name, counters in now.interfaces.items():
            old = before.interfaces.get(name)
            rates = out["interfaces"].setdefault(name, {k: [] for k in (
                "bps_rx", "bps_tx", "pps_rx", "pps_tx", "drops")})
            if old is None:
                for values in rates.values():
                    values.append(None)
                continue
            rx = _rate(counters["rx_bytes"], old["rx_bytes"], seconds)
            tx = _rate(counters["tx_bytes"], old["tx_bytes"], seconds)
            rates["bps_rx"].append(rx * 8 if rx is not None else None)
            rates["bps_tx"].append(tx * 8 if tx is not None else None)
            rates["pps_rx"].append(_rate(counters["rx_packets"], old["rx_packets"], seconds))
            rates["pps_tx"].append(_rate(counters["tx_packets"], old["tx_packets"], seconds))
            dropped = sum(counters[k] for k in ("rx_dropped", "tx_dropped"))
            dropped_before = sum(old[k] for k in ("rx_dropped", "tx_dropped"))
            rates["drops"].append(_rate(dropped, dropped_before, seconds))
        for cpu, (soft, total) in now.softirqs.items():
            old = before.softirqs.get(cpu)
            load = None
            if old and total > old[1]:
                load = 100.0 * (soft - old[0]) / (total - old[1])
            out["softirq"].setdefault(cpu, []).append(load)
    return out


def latest(values):
    for value in reversed(values):
        if value is not None:
            return value
    return None
