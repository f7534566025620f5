"""The routing section of a network document: FRR's BGP, OSPF and BFD as the operator
configures them, read into the model (model.Routing), checked against the links, and
written back.

    [routing]                      # all optional: without bgp.asn or ospf, FRR is off
    router_id = "192.0.2.1"        # "": FRR takes the highest IPv4 address
    bfd_interval = 300             # ms between BFD packets, each way
    bfd_multiplier = 3             # missed packets before a peer is down (900 ms)
    standby = false                # the HA pair's secondary: a longer AS path, OSPF cost
                                   # 65535 - its neighbours prefer the primary

    [routing.bgp]
    asn = 65001                    # the box's AS (1-4294967295)
    prefixes = ["198.51.100.0/24"] # announced, while the box routes them
    communities = ["65001:100"]    # set on every announcement
    blackholes = []                # hosts always announced as RFC 7999 black-holes

    [[routing.bgp.neighbours]]
    address = "10.20.0.2"          # on a subnet of a routed traffic link (single hop)
    remote_as = 65010
    password = ""                  # TCP MD5 (never shown, never logged)
    bfd = true
    accept = ["0.0.0.0/0"]         # prefixes taken from it, with their more specifics
    blackhole = false              # sent the blocks announced as RFC 7999 black-holes
    description = ""

    [[routing.ospf]]               # OSPFv2 over the link's IPv4, OSPFv3 over its IPv6
    interface = "veth-s"
    area = "0.0.0.0"               # dotted, or a number
    cost = 0                       # 0: FRR's
    passive = false
    point_to_point = false         # two routers only: adjacent at once, no DR election
    bfd = true

Problem paths are the document's: routing.bgp.neighbours[0].remote_as.
"""
import ipaddress

from tusklib.problems import table_values, type_name
from tusklib.values import Community, IPAddress, IPNetwork, Refused, Secret

from . import model
from .errors import Code, Problem
from .model import Bgp, Neighbour, OspfLink, Routing

_STR, _BOOL, _INT, _LIST = str, bool, int, list
# what the pages and the API show for a password the draft holds: a text no password can
# be (Secret refuses parentheses); a save puts back the password it stands for
HIDDEN = "(hidden)"
SCHEMA = {
    "routing": {"router_id": (_STR, ""), "bfd_interval": (_INT, model.BFD_INTERVAL_DEFAULT),
                "bfd_multiplier": (_INT, model.BFD_MULTIPLIER_DEFAULT),
                "standby": (_BOOL, False)},
    "bgp": {"asn": (_INT, 0), "prefixes": (_LIST, []), "communities": (_LIST, []),
            "blackholes": (_LIST, [])},
    "neighbours": {"address": (_STR, None), "remote_as": (_INT, None),
                   "description": (_STR, ""), "password": (_STR, ""), "bfd": (_BOOL, True),
                   "accept": (_LIST, []), "blackhole": (_BOOL, False)},
    "ospf": {"interface": (_STR, None), "area": (_STR, model.OSPF_AREA_DEFAULT),
             "cost": (_INT, 0), "passive": (_BOOL, False), "point_to_point": (_BOOL, False),
             "bfd": (_BOOL, True)},
}


def _array(value, where, problems):
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        problems.append(Problem(Code.SCHEMA, where, "must be an array of tables, each "
                                f"written [[{where}]] (with two brackets)"))
        return None
    return value


def from_document(document, problems):
    """The Routing of a document's [routing] table, or None with problems (SCHEMA)
    appended: unknown, missing and mistyped keys."""
    if not isinstance(document, dict):
        problems.append(Problem(Code.SCHEMA, "routing", "must be a table, written "
                                f"[routing], got {type_name(document)}"))
        return None
    top = {k: v for k, v in document.items() if k not in ("bgp", "ospf")}
    values = table_values(top, SCHEMA["routing"], "routing", problems, Code.SCHEMA)
    bgp = _bgp(document.get("bgp", {}), problems)
    ospf = []
    for index, entry in enumerate(_array(document.get("ospf", []), "routing.ospf",
                                         problems) or []):
        link = table_values(entry, SCHEMA["ospf"], f"routing.ospf[{index}]", problems,
                            Code.SCHEMA)
        ospf.append(OspfLink(**link) if link else None)
    if values is None or bgp is None or None in ospf:
        return None
    return Routing(bgp=bgp, ospf=tuple(ospf), **values)


def _bgp(table, problems):
    if not isinstance(table, dict):
        problems.append(Problem(Code.SCHEMA, "routing.bgp", "must be a table, written "
                                "[routing.bgp]"))
        return None
    top = {k: v for k, v in table.items() if k != "neighbours"}
    values = table_values(top, SCHEMA["bgp"], "routing.bgp", problems, Code.SCHEMA)
    entries = _array(table.get("neighbours", []), "routing.bgp.neighbours", problems)
    neighbours = []
    for index, entry in enumerate(entries or []):
        neighbour = table_values(entry, SCHEMA["neighbours"],
                                 f"routing.bgp.neighbours[{index}]", problems, Code.SCHEMA)
        neighbours.append(Neighbour(**neighbour) if neighbour else None)
    if values is None or entries is None or None in neighbours:
        return None
    return Bgp(neighbours=tuple(neighbours), **values)


def to_document(routing):
    """The [routing] table of a Routing, every key written."""
    def item(obj, schema):
        return {key: list(getattr(obj, key)) if isinstance(getattr(obj, key), tuple)
                else getattr(obj, key) for key in schema}
    bgp = item(routing.bgp, SCHEMA["bgp"])
    bgp["neighbours"] = [item(n, SCHEMA["neighbours"]) for n in routing.bgp.neighbours]
    return {**item(routing, SCHEMA["routing"]), "bgp": bgp,
            "ospf": [item(link, SCHEMA["ospf"]) for link in routing.ospf]}


def ospf_area(text):
    """An OSPF area as FRR prints it when written dotted: "0.0.0.0"; a number 0-2^32-1
    becomes its dotted form. Refused otherwise."""
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 10 \
            and int(text) < 2**32:
        return str(ipaddress.IPv4Address(int(text)))
    if isinstance(text, str) and text.count(".") == 3 and ":" not in text:
        try:
            return IPAddress(text).text
        except Refused:
            pass
    raise Refused(f"{text!r:.60} is not an OSPF area: a number 0-4294967295 or four "
                  "dotted numbers (0.0.0.0)")


# -- checks against the rest of the configuration ---------------------------------------------

def problems(config, routed):
    """Every problem of config.routing: bad values, and values that do not hold with
    the links. routed: {routed traffic link name: [its ip_interface]}."""
    found = []

    def fail(path, message):
        found.append(Problem(Code.VALUE, path, message))

    routing = config.routing
    if routing.router_id:
        reason = IPAddress.problem(routing.router_id)
        if reason or ":" in routing.router_id:
            fail("routing.router_id", reason or f"{routing.router_id!r}: a router id is "
                 "written as an IPv4 address")
    for key, low, high in (("bfd_interval", model.BFD_INTERVAL_MIN, model.BFD_INTERVAL_MAX),
                           ("bfd_multiplier", model.BFD_MULTIPLIER_MIN,
                            model.BFD_MULTIPLIER_MAX)):
        value = getattr(routing, key)
        if not low <= value <= high:
            fail(f"routing.{key}", f"{value} is outside {low}..{high}")
    if routing.enabled and not routing.router_id and not any(
            a.version == 4 for addresses in routed.values() for a in addresses):
        fail("routing.router_id", "needed: no routed link has an IPv4 address for FRR to "
             "take one from")
    _bgp_problems(routing.bgp, routed, fail)
    seen = {}
    for index, link in enumerate(routing.ospf):
        path = f"routing.ospf[{index}]"
        if link.interface not in routed:
            fail(f"{path}.interface", f"{link.interface!r} is not a routed traffic link "
                 f"(known: {', '.join(routed) or 'none'})")
        elif not routed[link.interface]:
            fail(f"{path}.interface", f"{link.interface} has no address for OSPF to speak "
                 "from")
        elif link.interface in seen:
            fail(f"{path}.interface", f"{link.interface} is already in {seen[link.interface]}")
        seen.setdefault(link.interface, path)
        try:
            ospf_area(link.area)
        except Refused as refused:
            fail(f"{path}.area", str(refused))
        if not 0 <= link.cost <= model.OSPF_COST_MAX:
            fail(f"{path}.cost", f"{link.cost} is outside 0..{model.OSPF_COST_MAX} (0: "
                 "FRR's, from the link's speed)")
    return found


def _prefixes(values, path, fail, limit):
    if len(values) > limit:
        fail(path, f"{len(values)} prefixes; at most {limit}")
    seen = set()
    for number, text in enumerate(values):
        try:
            prefix = IPNetwork(text)
        except Refused as refused:
            fail(f"{path}[{number}]", str(refused))
            continue
        if prefix in seen:
            fail(f"{path}[{number}]", f"{prefix} is listed twice")
        seen.add(prefix)


def _bgp_problems(bgp, routed, fail):  # noqa: C901 - one check per field, each naming it
    if not bgp.asn and (bgp.neighbours or bgp.prefixes or bgp.communities or bgp.blackholes):
        fail("routing.bgp.asn", "needed: BGP neighbours and announcements need the box's "
             "AS number")
    elif bgp.asn and not model.ASN_MIN <= bgp.asn <= model.ASN_MAX:
        fail("routing.bgp.asn", f"{bgp.asn} is outside {model.ASN_MIN}..{model.ASN_MAX}")
    _prefixes(bgp.prefixes, "routing.bgp.prefixes", fail, model.ANNOUNCED_MAX)
    if len(bgp.communities) > model.COMMUNITIES_MAX:
        fail("routing.bgp.communities", f"{len(bgp.communities)} communities; at most "
             f"{model.COMMUNITIES_MAX}")
    for number, text in enumerate(bgp.communities):
        reason = Community.problem(text)
        if reason:
            fail(f"routing.bgp.communities[{number}]", reason)
    _prefixes(bgp.blackholes, "routing.bgp.blackholes", fail, model.ANNOUNCED_MAX)
    for number, text in enumerate(bgp.blackholes):
        prefix = IPNetwork.problem(text) is None and IPNetwork(text)
        if prefix and not prefix.is_host:
            fail(f"routing.bgp.blackholes[{number}]", f"{prefix}: a black-hole route is one "
                 "host's, a /32 or a /128 (RFC 7999)")
    if bgp.blackholes and not any(n.blackhole for n in bgp.neighbours):
        fail("routing.bgp.blackholes", "no neighbour takes black-hole routes: tick "
             "blackhole on the neighbours that should get them")
    if len(bgp.neighbours) > model.NEIGHBOURS_MAX:
        fail("routing.bgp.neighbours", f"{len(bgp.neighbours)} neighbours; at most "
             f"{model.NEIGHBOURS_MAX}")
    seen = {}
    for index, neighbour in enumerate(bgp.neighbours):
        path = f"routing.bgp.neighbours[{index}]"
        try:
            address = IPAddress(neighbour.address)
        except Refused as refused:
            fail(f"{path}.address", str(refused))
        else:
            on = [name for name, addresses in routed.items()
                  if any(address.ip in a.network and address.ip != a.ip for a in addresses)]
            own = [name for name, addresses in routed.items()
                   if any(address.ip == a.ip for a in addresses)]
            if own:
                fail(f"{path}.address", f"{address} is this box's own address (on {own[0]})")
            elif not on:
                fail(f"{path}.address", f"{address} is on no subnet of a routed traffic "
                     "link: Tusk's BGP sessions are single-hop, to a router on a link")
            if address in seen:
                fail(f"{path}.address", f"{address} is already {seen[address]}")
            seen.setdefault(address, path)
            for number, text in enumerate(neighbour.accept):
                prefix = IPNetwork.problem(text) is None and IPNetwork(text)
                if prefix and prefix.version != address.version:
                    fail(f"{path}.accept[{number}]", f"{prefix} is IPv{prefix.version}; "
                         f"this session to an IPv{address.version} address carries IPv"
                         f"{address.version} routes")
        if not model.ASN_MIN <= neighbour.remote_as <= model.ASN_MAX:
            fail(f"{path}.remote_as", f"{neighbour.remote_as} is outside "
                 f"{model.ASN_MIN}..{model.ASN_MAX}")
        if neighbour.password == HIDDEN:
            fail(f"{path}.password", f"{HIDDEN} stands for the password this neighbour "
                 "had, and there is none for its address: give the password")
        elif neighbour.password:
            reason = Secret.problem(neighbour.password, model.MD5_KEY_MAX)
            if reason:
                fail(f"{path}.password", reason)
        if len(neighbour.description) > model.DESCRIPTION_MAX or any(
                not c.isprintable() for c in neighbour.description):
            fail(f"{path}.description", f"at most {model.DESCRIPTION_MAX} printable "
                 "characters on one line")
        _prefixes(neighbour.accept, f"{path}.accept", fail, model.ANNOUNCED_MAX)
