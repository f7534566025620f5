"""systemd's INI files (systemd.syntax(7)): .network and .netdev files, the resolved and
timesyncd drop-ins; and the one-line files /etc/hostname and /etc/timezone.

systemd reads a line as "Key=value" in the last "[Section]"; a line starting with # or ;
is a comment, a backslash at a line's end continues it, and a value's words are split on
white space. A value holding a newline would start a section or a key of its own
(`2001:db8::53%` newline `[Resolve]` newline `DNSStubListenerExtra=0.0.0.0`), so a word
may hold only letters, digits and _ . : / @ + - ; a list is its words joined by one
space. Sections and keys are the code's own names."""
import re

from . import FormatRefused, name_of, text_of

_WORD = re.compile(r"[A-Za-z0-9_.:/@+-]+")


def word(value, where="systemd file"):
    return text_of(value, _WORD, where)


def unit(header, sections):
    """The text of a file: header (comment lines of the code's own), then each
    (section, [(key, value | [values] | None)]) - None: "Key=" alone, which empties the
    key's list; a list: its words joined by one space (empty: "Key=")."""
    if any(line and not line.startswith("#") for line in header.splitlines()):
        raise FormatRefused("a header is comment lines only")
    lines = [header.rstrip("\n")] if header else []
    for section, keys in sections:
        if lines:
            lines.append("")
        lines.append(f"[{name_of(section, 'section')}]")
        for key, value in keys:
            name = name_of(key, f"[{section}]")
            where = f"[{section}] {name}="
            if value is None:
                values = []
            elif isinstance(value, (list, tuple)):
                values = list(value)
            else:
                values = [value]
            lines.append(f"{name}={' '.join(word(v, where) for v in values)}")
    return "\n".join(lines) + "\n"


def line(value, where):
    """A file of one line holding one word (/etc/hostname, /etc/timezone)."""
    return text_of(value, _WORD, where) + "\n"
