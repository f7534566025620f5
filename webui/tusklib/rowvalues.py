"""Values read back from rows the web user can write (policy's CounterReading, the
dashboard's samples): taken only when they are what the agent writes there."""
import math
from datetime import UTC, datetime


def number(value):
    """value if it is a finite number a float holds, else None (an int of 400 digits, which
    a JSON row can carry, is none: math.isfinite() would raise on it)."""
    try:
        if type(value) in (int, float) and math.isfinite(value):
            return value
    except OverflowError:
        pass
    return None


def utc_time(value):
    """The UTC time of a Unix time, None if value is none."""
    try:
        return datetime.fromtimestamp(value, UTC) if number(value) is not None else None
    except (OverflowError, OSError, ValueError):
        return None
