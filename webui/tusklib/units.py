"""Numbers as an operator reads them, in pages and messages alike."""


def si(value, unit=""):
    """12_300_000 -> '12.3 M' + unit."""
    if value is None:
        return "-"
    value = float(value)
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".rstrip()
