"""snmpd.conf (net-snmp 5.9's snmplib/read_config.c): a line is a token and the rest; a
line whose first non-blank character is # is a comment; most handlers split the rest into
words with copy_nword(), where a word starting with " or ' runs to the matching quote and
a backslash takes the next character literally, inside quotes or not; a few handlers
(sysLocation, sysContact) take the rest of the line as it stands, up to its end.

So every value the operator gave (a user, a passphrase, a community) is written as one
double-quoted word with \\ and " escaped, and only printable ASCII is held at all (a
control character could end the line); the rest of a line is a Text - printable ASCII
without spaces at its ends, which read_config would trim -; addresses, prefixes, numbers
and the agent's own paths are bare words of characters copy_nword never treats
specially. Keywords are the code's own.

    line("createUser", Identifier("noc"), "SHA-256", Secret(...), "AES", Secret(...))
    rest("sysLocation", Text("Rack 4"))

The reader of the same rules is tests/property/daemon_parsers.py's snmpd_conf()."""
import re

from ..values import Identifier, Secret, Text, Value
from . import FormatRefused, text_of

WHERE = "snmpd.conf"
_BARE = re.compile(r"[A-Za-z0-9_.,:/@+-]+")
_PRINTABLE = re.compile(r"[ -~]+")
_PROGRAM = re.compile(r"/[A-Za-z0-9_./@+-]*")
_KEYWORD = re.compile(r"-?[A-Za-z0-9.][A-Za-z0-9_.,:-]*")   # a token, an option, an OID


def quoted(value):
    """An operator's value (Identifier, Secret, Text) as one double-quoted word."""
    if not isinstance(value, (Identifier, Secret, Text)):
        raise FormatRefused(f"{WHERE}: {type(value).__name__}: only names, secrets and text "
                            "are quoted")
    text = text_of(value, _PRINTABLE, WHERE)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bare(value):
    """An address, a prefix, a number or one of the agent's paths: one word unquoted."""
    if isinstance(value, (Identifier, Secret, Text)):
        return quoted(value)
    return text_of(value, _BARE, WHERE)


def keyword(word):
    if not isinstance(word, str) or not _KEYWORD.fullmatch(word):
        raise FormatRefused(f"{WHERE}: {word!r:.60} is not a keyword")
    return word


def program(path):
    """An executable's absolute path of the agent's own (its interpreter, a script beside
    it: never input), as one bare word."""
    if not isinstance(path, str) or not _PROGRAM.fullmatch(path) or "/../" in path + "/":
        raise FormatRefused(f"{WHERE}: {path!r:.60} is not an absolute path of plain "
                            "characters")
    return path


def line(token, *words):
    """One directive: its token, then keywords (str) and typed values, one space apart."""
    texts = [keyword(token)]
    for word in words:
        if isinstance(word, str):
            texts.append(keyword(word))
        elif isinstance(word, (Value, int)) and not isinstance(word, bool):
            texts.append(bare(word))
        else:
            raise FormatRefused(f"{WHERE}: {type(word).__name__} {word!r:.60}: only keywords "
                                "and typed values go into this file")
    return " ".join(texts)


def rest(token, value):
    """A directive whose handler takes the rest of the line verbatim (sysLocation)."""
    if not isinstance(value, Text):
        raise FormatRefused(f"{WHERE}: {token} takes a Text")
    if not value.text:
        raise FormatRefused(f"{WHERE}: {token} with nothing after it is an error to snmpd")
    return f"{keyword(token)} {text_of(value, _PRINTABLE, WHERE)}"
