"""Inline SVG charts of a report's series: throughput over time and sequence over
time with retransmissions marked. Drawn here, not by a JavaScript library: the
numbers become coordinates, every label is escaped, nothing is fetched."""
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from .core.verdict import rate, size

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 200, 70, 24, 8


def _scale(values, span):
    top = max(values) if values else 0
    return (span / top if top else 0), top


def _frame(title, x_max, y_label_top, body, kind):
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    return format_html(
        '<svg class="chart" data-chart="{kind}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{title}" xmlns="http://www.w3.org/2000/svg">'
        '<title>{title}</title>'
        '<rect x="{l}" y="{t}" width="{pw}" height="{ph}" class="plot"/>'
        '<text x="{lx}" y="{ty}" text-anchor="end">{ytop}</text>'
        '<text x="{lx}" y="{by}" text-anchor="end">0</text>'
        '<text x="{l}" y="{xy}">0 s</text>'
        '<text x="{r}" y="{xy}" text-anchor="end">{xmax} s</text>'
        '{body}</svg>',
        kind=kind, w=WIDTH, h=HEIGHT, title=title, l=LEFT, t=TOP, pw=plot_w, ph=plot_h,
        lx=LEFT - 4, ty=TOP + 10, ytop=y_label_top, by=TOP + plot_h, xy=HEIGHT - 6,
        r=LEFT + plot_w, xmax=f"{x_max:.3g}", body=body)


def _points(series, x_max, y_scale):
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    x_scale = plot_w / x_max if x_max else 0
    return [(LEFT + t * x_scale, TOP + plot_h - v * y_scale) for t, v in series]


def for_direction(series):
    """{"throughput": svg, "seq": svg} or None for a direction without data."""
    rates, seq, marks = series["throughput"], series["seq"], series["retransmits"]
    if not rates and not seq:
        return None
    x_max = max([p[0] for p in rates + seq + marks] + [series.get("bucket_s", 0)]) or 1
    plot_h = HEIGHT - BOTTOM - TOP
    y_scale, top = _scale([v for _, v in rates], plot_h)
    steps = []
    width = series.get("bucket_s", 0)
    for x, y in _points(rates, x_max, y_scale):
        steps.append((x, y))
        steps.append((x + width * (WIDTH - LEFT - 8) / x_max, y))
    line = format_html('<polyline class="line" points="{}"/>',
                       " ".join(f"{x:.1f},{y:.1f}" for x, y in steps))
    throughput = _frame("Throughput over time", x_max, rate(top), line, "throughput")
    values = [v for _, v in seq + marks]
    y_scale, top = _scale(values, plot_h)
    body = format_html('<polyline class="line" points="{}"/>', " ".join(
        f"{x:.1f},{y:.1f}" for x, y in _points(seq, x_max, y_scale)))
    # format_html escapes its arguments into strings first: numbers are formatted here
    body += format_html_join("", '<circle class="mark" cx="{}" cy="{}" r="2.5"/>',
                             ((f"{x:.1f}", f"{y:.1f}") for x, y in _points(marks, x_max, y_scale)))
    sequence = _frame("Sequence over time (retransmissions marked)", x_max, size(top),
                      mark_safe(body), "seq")
    return {"throughput": throughput, "seq": sequence}
