"""rsyslog.conf (RainerScript): every parameter value is a double-quoted string constant.
Inside one, rsyslog reads backslash escapes (\\" \\\\ \\n and octal \\057), and outside one
a ")" or a newline ends the object and starts whatever follows - so a value may hold
none of those: this module refuses any text outside letters, digits and _ . : / @ + -
(addresses, host names, numbers, paths and names are all of those), rather than escape."""
import re

from . import text_of

_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+-]*")


def string(value, where="rsyslog.conf"):
    """A parameter's value: "text", or FormatRefused."""
    return f'"{text_of(value, _PLAIN, where)}"'


def parameters(where="rsyslog.conf", **values):
    """name="value" ... for an object's parameters (names are the code's: a trailing _ is
    dropped, a __ is a dot: queue__size -> queue.size)."""
    words = []
    for name, value in values.items():
        key = name.rstrip("_").replace("__", ".")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", key):
            raise ValueError(f"{key!r} is not an rsyslog parameter name")
        words.append(f"{key}={string(value, f'{where} {key}')}")
    return " ".join(words)
