from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from tusklib.units import si

register = template.Library()


register.filter("si", si)


@register.filter
def sparkline(values, height=28):
    """A small inline SVG line of values (None leaves a gap); no script involved."""
    points = [v for v in values or [] if v is not None]
    width = 120
    if len(points) < 2:
        return mark_safe(f'<svg class="spark" width="{width}" height="{height}"></svg>')
    top = max(points) or 1.0
    step = width / max(len(values) - 1, 1)
    segments, current = [], []
    for index, value in enumerate(values):
        if value is None:
            if current:
                segments.append(current)
            current = []
            continue
        y = height - 2 - (height - 4) * (value / top)
        current.append(f"{index * step:.1f},{y:.1f}")
    if current:
        segments.append(current)
    lines = "".join(f'<polyline points="{" ".join(s)}"/>' for s in segments)
    return format_html('<svg class="spark" width="{}" height="{}" viewBox="0 0 {} {}" '
                       'role="img" aria-label="last {} samples">{}</svg>',
                       width, height, width, height, len(values), mark_safe(lines))


@register.filter
def get(mapping, key):
    return (mapping or {}).get(key)
