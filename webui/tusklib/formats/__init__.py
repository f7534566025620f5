"""One module per file format a root daemon reads: the one place where that format's
quoting is decided. Each takes typed values (tusklib/values.py) - never a plain string
from a form, a document or a row - and refuses, with FormatRefused, any value whose text
the format cannot hold as exactly one value. docs/SECURITY.md's rule: "typed values, one
quoting point per format, round-trip tested" (tests/property/test_daemon_files_property.py
parses every renderer's file back, by the daemon's own checker where it has one).

    rsyslog       RainerScript string constants (rsyslog.conf)
    systemd       systemd's INI files (.network, .netdev, resolved/timesyncd drop-ins)
                  and one-line files (/etc/hostname, /etc/timezone)
    keepalived    keepalived.conf words and its one quoted command
    conntrackd    conntrackd.conf tokens, by conntrackd's own lexer rules
    frr           frr.conf's words (vtysh has no quoting)
    snmpd         snmpd.conf words (copy_nword: quotes and backslashes) and its
                  rest-of-line values

Plain Python: no Django, no app."""
import re

from ..values import Value


class FormatRefused(ValueError):
    """A value the file's format cannot hold as one value; says which and why."""


def text_of(value, allowed, where):
    """The text of a typed value (or a plain int) if it is wholly of allowed (a compiled
    pattern); FormatRefused otherwise. A str is refused outright: a renderer that has one
    skipped its type."""
    if isinstance(value, bool) or not isinstance(value, (Value, int)):
        raise FormatRefused(f"{where}: {type(value).__name__} {value!r:.60}: only typed values "
                            "(tusklib/values.py) go into this file")
    text = str(value)
    if not allowed.fullmatch(text):
        raise FormatRefused(f"{where}: {text!r:.60} cannot be written as one value")
    return text


def name_of(name, where):
    """A section or key name of the code's own (never input)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise FormatRefused(f"{where}: {name!r:.60} is not a key")
    return name
