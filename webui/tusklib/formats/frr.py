"""frr.conf, read by vtysh (FRR's lib/command.c, one command per line): a line is split
into words on white space, a line whose first word starts with ! or # is a comment, and a
command's arguments are single words matched against its grammar (A.B.C.D, X:X::X:X,
WORD, (1-4294967295)) - there is no quoting at all. So a value may hold only characters
no grammar token treats as a separator or a start of a comment: letters, digits and
_ . : / @ + - for addresses, prefixes, numbers, interface names and communities, and a
Secret's fixed set (tusklib/values.py) for a password. Keywords are the code's own.

    line(indent, "neighbor", IPAddress("10.0.0.2"), "remote-as", Integer(65002, 1, ...))

A value is never the first word of a line (each line starts with a keyword), so a
value that starts with ! or # would still not be a comment; the set refuses them
anyway."""
import re

from ..values import Secret, Value
from . import FormatRefused, text_of

_VALUE = re.compile(r"[A-Za-z0-9_.:/@+-]+")
_SECRET = re.compile(r"[A-Za-z0-9_.,:;+=/@%^*~-]+")
_KEYWORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
WHERE = "frr.conf"


def value(value):
    """A typed value's text as one word."""
    if isinstance(value, Secret):
        return text_of(value, _SECRET, WHERE)
    return text_of(value, _VALUE, WHERE)


def keyword(word):
    """A keyword of the code's own (never input)."""
    if not isinstance(word, str) or not _KEYWORD.fullmatch(word):
        raise FormatRefused(f"{WHERE}: {word!r:.60} is not a keyword")
    return word


def line(indent, *words):
    """One command: its keywords (str) and typed values, words joined by one space."""
    if not words or not isinstance(words[0], str):
        raise FormatRefused(f"{WHERE}: a line starts with a keyword")
    texts = [keyword(w) if isinstance(w, str) else value(w) if isinstance(w, (Value, int))
             else _refuse(w) for w in words]
    return " " * indent + " ".join(texts)


def _refuse(word):
    raise FormatRefused(f"{WHERE}: {type(word).__name__} {word!r:.60}: only keywords and "
                        "typed values go into this file")
