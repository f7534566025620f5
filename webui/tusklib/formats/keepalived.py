"""keepalived.conf (keepalived's parser.c): a line is split into words on white space; a
word starting with ! or # ends the line (a comment), "{" and "}" open and close blocks,
"$NAME" is a parameter substituted anywhere, a line starting with "@" is conditional,
"~SEQ(" generates lines, and a double-quoted string is one word. So a word may hold only
letters, digits and _ . : / @ + - and never start with @; the one quoted value (the
notify script's command line) is such words joined by spaces."""
import re

from . import FormatRefused, text_of

_WORD = re.compile(r"[A-Za-z0-9_.:/+-][A-Za-z0-9_.:/@+-]*")


def word(value, where="keepalived.conf"):
    return text_of(value, _WORD, where)


def quoted(*values, where="keepalived.conf"):
    """A double-quoted string of words: "a b c"."""
    if not values:
        raise FormatRefused(f"{where}: an empty quoted string")
    return '"' + " ".join(word(v, where) for v in values) + '"'
