"""Typed values: the only things a renderer puts into a file that a root daemon reads
(rsyslog, systemd-networkd, -resolved and -timesyncd, keepalived, conntrackd, the host
name and time zone files). docs/SECURITY.md: "typed values, one quoting point per format,
round-trip tested".

Each type's constructor takes what a form, a document or a database row holds, refuses
anything whose text is not of the type - `Refused`, whose message a form shows next to
the field - and keeps the value's canonical text, built by this module and never copied
from the input where it can be rebuilt:

    IPAddress("2001:DB8::0053")   -> 2001:db8::53  (Python's text of the 128-bit number)
    IPAddress("fe80::1%eth0")     refused, unless the caller names the box's interfaces
                                  (scopes=...) and the address is link-local
    IPInterface("192.0.2.1/24"), IPNetwork("10.20.0.0/16")   no scope, ASCII digits only
    HostName("ntp1.example.net")  RFC 1123: labels of letters, digits and inner hyphens
    InterfaceName("eth0.100")     the kernel's rule (dev_valid_name) within Tusk's
                                  characters: 1-15 of A-Z a-z 0-9 _ . @ + -
    Integer(514, 1, 65535)        an int (never a bool or a string), in range
    Choice("udp", ("udp", "tcp")) one of a set the code fixes
    FilePath("/run/tusk/ha")      an absolute path of plain components (the agent's own
                                  configuration, never a row)
    TimeZone("Europe/Zurich")     a name of the tz database
    Community("65001:100")        a BGP community (RFC 1997) as ASN:value, or a
                                  well-known one by FRR's name ("no-export")
    Secret("s3cret")              a password a daemon keeps (BGP's TCP MD5 key): printable
                                  ASCII of a fixed set, never shown (repr hides it)
    Identifier("noc-ro")          a name a daemon keys on (an SNMP user): letters, digits
                                  and _ . -, starting with a letter or a digit
    Text("Rack 4, Hall B")        one line of printable ASCII shown back verbatim (SNMP's
                                  sysLocation): no control character, no edge spaces

Why types and not checks: Python's ipaddress takes almost anything after a "%" as an
IPv6 scope (`::1%"port="1")}` and a newline is an address to it), and a check that a
value "is an address" said nothing of what its text could do in a file. Here the text
a renderer gets is made by this module, and each file format's module in
tusklib/formats/ refuses, at one place, any text it cannot hold as one value.

Plain Python: no Django, no app."""
import ipaddress
import os
import re

IFNAME_MAX = 15          # Linux: IFNAMSIZ 16 with the NUL
HOSTNAME_MAX = 253
ADDRESS_TEXT_MAX = 64    # longer than any address with a 15-character scope
PATH_MAX = 1024
ZONEINFO = "/usr/share/zoneinfo"

_IFNAME = re.compile(rf"[A-Za-z0-9_.@+-]{{1,{IFNAME_MAX}}}")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_COMPONENT = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*")
_ZONE_PART = re.compile(r"[A-Za-z0-9_+-]+")
_DIGITS = re.compile(r"[0-9]+")


class Refused(ValueError):
    """The value is not of the type; str() says why, in words for a form."""


def shown(value, limit=60):
    """A value as an error message quotes it: repr, cut to limit characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _text(value, what):
    if not isinstance(value, str):
        raise Refused(f"must be {what} written as a string, got {type(value).__name__}")
    return value


class Value:
    """A value of one type, compared and hashed by its canonical text."""

    __slots__ = ("text",)
    what = "a value"

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"{type(self).__name__}({self.text!r})"

    def __eq__(self, other):
        return type(self) is type(other) and self.text == other.text

    def __hash__(self):
        return hash((type(self).__name__, self.text))

    @classmethod
    def problem(cls, value, *args, **kwargs):
        """Why value is not of the type, or None: what the forms and checks show."""
        try:
            cls(value, *args, **kwargs)
        except Refused as refused:
            return str(refused)
        return None


class InterfaceName(Value):
    """A network interface's name as Linux allows it (net/core/dev.c dev_valid_name: at
    most 15 bytes, not "." or "..", no "/", ":" or white space), within the characters
    Tusk's policy zones accept."""

    __slots__ = ()
    what = "an interface name"

    def __init__(self, value):
        name = _text(value, self.what)
        if not name:
            raise Refused("must not be empty")
        if len(name) > IFNAME_MAX:
            raise Refused(f"{shown(name)} is {len(name)} characters long; Linux allows at "
                          f"most {IFNAME_MAX}")
        if name in (".", ".."):
            raise Refused(f"{name!r} is not allowed as an interface name by Linux")
        for char, what in (("/", "'/'"), (":", "':'")):
            if char in name:
                raise Refused(f"{shown(name)} contains {what}, which Linux does not allow "
                              "in an interface name")
        if any(c.isspace() for c in name):
            raise Refused(f"{shown(name)} contains white space, which Linux does not allow "
                          "in an interface name")
        if not _IFNAME.fullmatch(name):
            raise Refused(f"{shown(name)} has characters other than letters, digits and "
                          "_ . @ + - (the interface names policy zones accept)")
        self.text = name


class IPAddress(Value):
    """One IPv4 or IPv6 address, no prefix length. A scope ("%eth0") only where the caller
    allows one - scopes: the box's interface names - and only on a link-local IPv6
    address, naming one of them."""

    __slots__ = ("ip", "scope")
    what = "an IP address"

    def __init__(self, value, scopes=None, what=None):
        what = what or self.what
        if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
            value = str(value)
        text = _text(value, what)
        if len(text) > ADDRESS_TEXT_MAX:
            raise Refused(f"{shown(text)} is not {what}: longer than any address")
        base, percent, scope = text.partition("%")
        try:
            ip = ipaddress.ip_address(base)
        except ValueError:
            raise Refused(f"{shown(text)} is not {what}"
                          + (" (write it without a prefix length)" if "/" in text else "")) \
                from None
        if percent:
            if scopes is None or ip.version != 6 or not ip.is_link_local:
                raise Refused(f"{shown(text)} has a zone (%...); give the address without it")
            InterfaceName(scope)
            if scope not in scopes:
                raise Refused(f"{shown(text)}: this box has no interface {scope}")
        self.ip, self.scope = ip, scope or None     # ip: parsed without the scope
        self.text = f"{self.ip}%{scope}" if scope else str(self.ip)

    @property
    def version(self):
        return self.ip.version


def _prefixed(value, what, example):
    text = _text(value, what)
    if "%" in text:
        raise Refused(f"{shown(text)} has a zone (%...); give the address without it")
    address, slash, prefix = text.partition("/")
    if not slash:
        raise Refused(f"{shown(text)} has no prefix length; write it with one, e.g. {example}")
    if not _DIGITS.fullmatch(prefix) or len(prefix) > 3:
        raise Refused(f"{shown(text)}: the prefix length {shown(prefix)} must be a number "
                      "(e.g. /24)")
    if len(address) > ADDRESS_TEXT_MAX:
        raise Refused(f"{shown(text)} is not {what}")
    return text


class IPInterface(Value):
    """An interface's own address with its prefix length: 192.0.2.1/24."""

    __slots__ = ("interface",)
    what = "an IPv4 or IPv6 address with a prefix length"

    def __init__(self, value):
        text = _prefixed(value, self.what, "192.0.2.1/24")
        try:
            self.interface = ipaddress.ip_interface(text)
        except ValueError:
            raise Refused(f"{shown(text)} is not {self.what}") from None
        self.text = str(self.interface)

    @property
    def ip(self):
        return self.interface.ip

    @property
    def network(self):
        return self.interface.network

    @property
    def version(self):
        return self.interface.version


class IPNetwork(Value):
    """A network prefix without host bits: 10.20.0.0/16."""

    __slots__ = ("network",)
    what = "a network prefix such as 10.20.0.0/16"

    def __init__(self, value):
        text = _prefixed(value, self.what, "10.20.0.0/16")
        try:
            self.network = ipaddress.ip_network(text)
        except ValueError:
            try:
                host = ipaddress.ip_interface(text)
            except ValueError:
                raise Refused(f"{shown(text)} is not {self.what}") from None
            raise Refused(f"{shown(text)} has host bits set: the network is {host.network} "
                          "(write that)") from None
        self.text = str(self.network)

    @property
    def version(self):
        return self.network.version

    @property
    def is_host(self):
        """One address: a /32 or a /128."""
        return self.network.prefixlen == self.network.max_prefixlen


class HostName(Value):
    """A DNS name by RFC 1123: dot-separated labels of 1-63 letters, digits and hyphens,
    no hyphen at either end of a label, at most 253 characters; the last label is not all
    digits (that would be an IPv4 address written wrong). A final dot only where the
    caller allows it (absolute=True)."""

    __slots__ = ()
    what = "a host name"

    def __init__(self, value, absolute=False):
        name = _text(value, self.what)
        if not name:
            raise Refused("must not be empty (e.g. tusk or fw1.example.net)")
        if len(name) > HOSTNAME_MAX:
            raise Refused(f"is {len(name)} characters long; at most {HOSTNAME_MAX}")
        labels = name[:-1].split(".") if absolute and name.endswith(".") else name.split(".")
        for label in labels:
            if not _LABEL.fullmatch(label):
                raise Refused(f"{shown(label)} in {shown(name)}: each dot-separated part has "
                              "1 to 63 letters, digits and hyphens, and neither starts nor "
                              "ends with a hyphen")
        if labels[-1].isdigit():
            raise Refused(f"{shown(name)} ends in a number: neither an IP address nor a "
                          "host name")
        self.text = name


def host(value, what="an IP address or a host name", absolute=False):
    """An IPAddress, else a HostName; Refused saying it is neither."""
    text = _text(value, what)
    if not text:
        raise Refused(f"empty: {what}")
    try:
        return IPAddress(text)
    except Refused as not_address:
        if ":" in text or "%" in text:
            raise not_address from None
    try:
        return HostName(text, absolute=absolute)
    except Refused as refused:
        raise Refused(f"{shown(text)} is neither an IP address nor a host name: {refused}") \
            from None


class Integer(Value):
    """A whole number in [low, high]: an int, never a bool, a float or a string."""

    __slots__ = ("number",)
    what = "a whole number"

    def __init__(self, value, low, high):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused(f"expected a whole number, got {type(value).__name__}")
        if not low <= value <= high:
            raise Refused(f"{value} is outside {low}-{high}")
        self.number = value
        self.text = str(value)

    def __int__(self):
        return self.number


class Choice(Value):
    """One of the words the code offers (a protocol, a bond mode)."""

    __slots__ = ()

    def __init__(self, value, choices):
        if not isinstance(value, str) or value not in choices:
            raise Refused(f"{shown(value)} is not one of {', '.join(choices)}")
        self.text = value


class Word(Value):
    """A constant of the code's own (a template's name, a section key): letters, digits,
    _ . - only - never input."""

    __slots__ = ()

    def __init__(self, value):
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
            raise Refused(f"{shown(value)} is not a word of letters, digits and _ . -")
        self.text = value


class FilePath(Value):
    """An absolute path whose every component is plain (letters, digits, _ . @ + -, not
    starting with a dot): the agent's configured directories and the names it derives
    from them, never a row's path."""

    __slots__ = ()
    what = "an absolute path"

    def __init__(self, value):
        path = _text(os.fspath(value) if isinstance(value, os.PathLike) else value, self.what)
        if not path.startswith("/") or len(path) > PATH_MAX:
            raise Refused(f"{shown(path)} is not an absolute path of at most {PATH_MAX} "
                          "characters")
        parts = path[1:].split("/")
        if path != "/" and not all(_COMPONENT.fullmatch(part) for part in parts):
            raise Refused(f"{shown(path)}: every component must be letters, digits and "
                          "_ . @ + - (not starting with a dot)")
        self.text = path

    def join(self, *names):
        return FilePath(os.path.join(self.text, *names))


class TimeZone(Value):
    """A time zone of the tz database (Europe/Zurich, UTC): a file under zoneinfo (None:
    the name's form only)."""

    __slots__ = ()
    what = "a time zone name such as Europe/Zurich or UTC"

    def __init__(self, value, zoneinfo=ZONEINFO):
        name = _text(value, self.what)
        parts = name.split("/")
        if len(name) > 255 or not all(_ZONE_PART.fullmatch(p) for p in parts):
            raise Refused(f"{shown(name)} is not {self.what}")
        if zoneinfo is not None and not os.path.isfile(os.path.join(zoneinfo, name)):
            raise Refused(f"{shown(name)} is not in the time zone database ({zoneinfo}); "
                          "e.g. Europe/Zurich")
        self.text = name


class Community(Value):
    """A BGP community (RFC 1997): two 16-bit numbers "ASN:value", or one of the
    well-known ones (RFC 1997, RFC 7999, RFC 8326) by the name FRR prints it with -
    so 65535:65281 is "no-export" whichever way it was written."""

    __slots__ = ("number",)
    what = "a BGP community such as 65001:100"
    WELL_KNOWN = {"graceful-shutdown": 0xFFFF0000, "accept-own": 0xFFFF0001,
                  "blackhole": 0xFFFF029A, "no-export": 0xFFFFFF01,
                  "no-advertise": 0xFFFFFF02, "local-AS": 0xFFFFFF03, "no-peer": 0xFFFFFF04}
    _NUMBERS = re.compile(r"([0-9]{1,5}):([0-9]{1,5})")

    def __init__(self, value):
        text = _text(value, self.what)
        names = {name.lower(): name for name in self.WELL_KNOWN}
        if text.lower() in names:
            name = names[text.lower()]
            self.number, self.text = self.WELL_KNOWN[name], name
            return
        match = self._NUMBERS.fullmatch(text)
        if not match or int(match.group(1)) > 0xFFFF or int(match.group(2)) > 0xFFFF:
            raise Refused(f"{shown(text)} is not {self.what}: two numbers 0-65535 joined "
                          f"by ':', or one of {', '.join(self.WELL_KNOWN)}")
        self.number = int(match.group(1)) << 16 | int(match.group(2))
        named = {number: name for name, number in self.WELL_KNOWN.items()}
        self.text = named.get(self.number, f"{self.number >> 16}:{self.number & 0xFFFF}")


class Secret(Value):
    """A password a daemon is given and keeps (BGP's TCP MD5 key, RFC 2385: at most 80
    bytes, the kernel's TCP_MD5SIG_MAXKEYLEN): 1 to max_length characters of letters,
    digits and - _ . , : ; + = / @ % ^ * ~ - a set every daemon's file holds as one word,
    without quoting. Its repr hides it; str() is the password (for the renderer only)."""

    __slots__ = ()
    what = "a password"
    CHARACTERS = "letters, digits and - _ . , : ; + = / @ % ^ * ~"
    _ALLOWED = re.compile(r"[A-Za-z0-9_.,:;+=/@%^*~-]+")

    def __init__(self, value, max_length=80):
        text = _text(value, self.what)
        if not text:
            raise Refused("must not be empty")
        if len(text) > max_length:
            raise Refused(f"is {len(text)} characters long; at most {max_length}")
        if not self._ALLOWED.fullmatch(text):
            raise Refused(f"has a character other than {self.CHARACTERS} (not shown: it is "
                          "a password)")
        self.text = text

    def __repr__(self):
        return "Secret(<hidden>)"


class Identifier(Value):
    """A name an operator gives and a daemon keys on (an SNMP v3 user): 1 to max_length
    letters, digits and _ . -, starting with a letter or a digit."""

    __slots__ = ()
    what = "a name"
    _ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

    def __init__(self, value, max_length=32):
        text = _text(value, self.what)
        if not text:
            raise Refused("must not be empty")
        if len(text) > max_length:
            raise Refused(f"{shown(text)} is {len(text)} characters long; at most {max_length}")
        if not self._ALLOWED.fullmatch(text):
            raise Refused(f"{shown(text)} must be letters, digits and _ . -, starting with a "
                          "letter or a digit")
        self.text = text


class Text(Value):
    """One line of printable ASCII (space to ~) that a daemon shows back as it was typed
    (SNMP's sysLocation and sysContact): no control character - so no line break - and no
    space at either end, 0 to max_length characters."""

    __slots__ = ()
    what = "a line of text"

    def __init__(self, value, max_length=255):
        text = _text(value, self.what)
        if len(text) > max_length:
            raise Refused(f"is {len(text)} characters long; at most {max_length}")
        bad = next((c for c in text if not " " <= c <= "~"), None)
        if bad is not None:
            raise Refused(f"has {bad!r}: only printable ASCII (letters, digits, punctuation, "
                          "spaces), on one line")
        if text != text.strip(" "):
            raise Refused("must not start or end with a space")
        self.text = text
