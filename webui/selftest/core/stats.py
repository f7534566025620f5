"""The raw samples of a Measurer -> per metric and path: samples, failures by kind,
median, p10, p90, min, max (ms; Mbit/s too for bulk), and the ratio through/direct of
the median times (above 1: slower through the firewall)."""
from .responder import METRICS

SUMMARY_VERSION = 1
THROUGH, DIRECT = "through", "direct"


def percentile(ordered, fraction):
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def describe(values):
    ordered = sorted(values)
    if not ordered:
        return {"median": None, "p10": None, "p90": None, "min": None, "max": None}
    return {"median": percentile(ordered, 0.5), "p10": percentile(ordered, 0.1),
            "p90": percentile(ordered, 0.9), "min": ordered[0], "max": ordered[-1]}


def _round(value, digits=3):
    return None if value is None else round(value, digits)


def summarise(raw):
    paths = [p["name"] for p in raw["paths"]]
    bulk_bits = raw["params"]["bulk_bytes"] * 8
    metrics = {}
    for metric in METRICS:
        metrics[metric] = {}
        for path in paths:
            samples = raw["samples"][metric][path]
            failures = dict(sorted(raw["failures"][metric][path].items()))
            row = {"samples": len(samples), "failures": sum(failures.values()),
                   "failure_kinds": failures,
                   "ms": {k: _round(v) for k, v in describe(samples).items()}}
            if metric == "bulk":
                rates = [bulk_bits / (ms / 1000) / 1e6 for ms in samples if ms > 0]
                row["mbps"] = {k: _round(v, 1) for k, v in describe(rates).items()}
            metrics[metric][path] = row
    ratios = {}
    if THROUGH in paths and DIRECT in paths:
        for metric in METRICS:
            through = metrics[metric][THROUGH]["ms"]["median"]
            direct = metrics[metric][DIRECT]["ms"]["median"]
            ratios[metric] = round(through / direct, 2) if through and direct else None
    return {"version": SUMMARY_VERSION, "paths": raw["paths"], "params": raw["params"],
            "metrics": metrics, "ratios": ratios, "baseline": DIRECT in paths,
            "incomplete": raw.get("incomplete", "")}
