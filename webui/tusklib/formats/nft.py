"""nftables rulesets (nft -f): an interface name is a double-quoted string, an address a
bare word. Inside a quoted string nft takes no escapes: a `"` ends it and a newline ends
the rule, so a name may hold only letters, digits and _ . @ + - (what an InterfaceName
holds); an address is the canonical text of an IPAddress without a scope."""
import re

from ..values import InterfaceName, IPAddress, IPNetwork
from . import FormatRefused, text_of

_NAME = re.compile(r"[A-Za-z0-9_.@+-]{1,15}")
_ADDRESS = re.compile(r"[0-9A-Fa-f:.]+")
_PREFIX = re.compile(r"[0-9A-Fa-f:.]+/[0-9]{1,3}")


def interface(value, where="nftables ruleset"):
    """"eth0": an interface name as iifname/oifname compare it."""
    if not isinstance(value, InterfaceName):
        raise FormatRefused(f"{where}: {value!r:.60} is not an InterfaceName")
    return f'"{text_of(value, _NAME, where)}"'


def address(value, where="nftables ruleset"):
    if not isinstance(value, IPAddress) or value.scope:
        raise FormatRefused(f"{where}: {value!r:.60} is not an IP address without a scope")
    return text_of(value, _ADDRESS, where)


def prefix(value, where="nftables ruleset"):
    """10.20.0.0/16: a network prefix (no host bits) as a set element."""
    if not isinstance(value, IPNetwork):
        raise FormatRefused(f"{where}: {value!r:.60} is not an IPNetwork")
    return text_of(value, _PREFIX, where)
