"""The plain-text table of a summary (stats.summarise): one row per metric x path."""
from .responder import METRICS
from .stats import THROUGH

HEADER = ("metric", "path", "samples", "failures", "median", "p10-p90", "min-max",
          "through/direct")
LABELS = {"transaction": "transaction", "feedback": "feedback", "bulk": "bulk"}


def _ms(value):
    return "-" if value is None else f"{value:.3f}"


def _span(stats, unit, digits):
    if stats["p10"] is None:
        return "-"
    return f"{stats['p10']:.{digits}f}-{stats['p90']:.{digits}f} {unit}"


def rows(summary):
    """[(metric, path, samples, failures, median, p10-p90, min-max, ratio)] as text."""
    out = []
    for metric in METRICS:
        for path in (p["name"] for p in summary["paths"]):
            row = summary["metrics"][metric][path]
            ms = row["ms"]
            kinds = ", ".join(f"{k} {n}" for k, n in row["failure_kinds"].items())
            failures = f"{row['failures']}" + (f" ({kinds})" if kinds else "")
            median = "-" if ms["median"] is None else f"{_ms(ms['median'])} ms"
            spread = _span(ms, "ms", 3)
            extent = "-" if ms["min"] is None else f"{_ms(ms['min'])}-{_ms(ms['max'])} ms"
            if metric == "bulk" and row["mbps"]["median"] is not None:
                median += f" {row['mbps']['median']:.1f} Mbit/s"
                spread += f" {_span(row['mbps'], 'Mbit/s', 1)}"
            ratio = summary["ratios"].get(metric) if path == THROUGH else None
            label = LABELS[metric]
            if metric == "bulk":
                label += f" {summary['params']['bulk_bytes'] // 1024} KiB"
            out.append((label, path, str(row["samples"]), failures, median, spread, extent,
                        "-" if ratio is None else f"{ratio:.2f}"))
    return out


def format_table(summary):
    lines = [HEADER, *rows(summary)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
            for line in lines]
    text.insert(1, "  ".join("-" * width for width in widths))
    if not summary["baseline"]:
        text.append("no direct path given: no baseline, through/direct is not known")
    if summary["incomplete"]:
        text.append(f"incomplete: {summary['incomplete']}")
    return "\n".join(text)
