"""Values read back from rows the web user can write (CounterReading, dashboard samples):
taken only when they are what the agent writes there."""
import math
from datetime import UTC, datetime


def number(value):
    """value if it is a finite number, else None."""
    if type(value) in (int, float) and math.isfinite(value):
        return value
    return None


def utc_time(value):
    """The UTC time of a Unix time, None if value is none."""
    try:
        return datetime.fromtimestamp(value, UTC) if number(value) is not None else None
    except (OverflowError, OSError, ValueError):
        return None
