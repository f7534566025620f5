"""The IDS hook (issue 38): an IDS (Suricata, Zeek) blocks an attacker, or lets a vetted
transfer skip the slow path, through the API; the agent puts the match into nftables
sets with a timeout in table inet tusk_hook (tusklib/names.py), a block also into table
bridge tusk_hook, for a transparent bridge's frames. No policy apply touches
that table (the policy's own is replaced whole), and an entry is gone when its time is
up: nothing needs cleaning when the caller dies. A reboot empties it.

    block   a chain on the forward hook before the policy's (priority filter - 1) drops
            every packet of a matching connection, both directions, new or established
    bypass  a chain after the policy's (filter + 1), which only what the policy accepted
            reaches - a connection the policy drops stays dropped - puts an established
            matching connection into the hook's flowtable, the fast path, whatever its
            class's threshold (a kernel without flowtables: the sets are kept, nothing
            is promoted, and the job says so)

A match is a prefix (either end of a connection) or a connection's 5-tuple (either
direction; TCP, UDP or SCTP). A block of one host (/32, /128) with announce is also
announced to the BGP neighbours that take black-hole routes (box/blackhole.py). Every
set is bounded (SIZE entries): a full set refuses an add, and the job says so. Plain
Python: values are typed (tusklib/values.py) and written through the nft format's one
quoting point (tusklib/formats/nft.py)."""
import json
from dataclasses import dataclass
from enum import IntEnum

from tusklib.formats import nft as fmt
from tusklib.names import BRIDGE_FAMILY, FAMILY, HOOK_TABLE
from tusklib.problems import Problem, Problems
from tusklib.values import Integer, IPAddress, IPNetwork, Refused

ACTIONS = ("block", "bypass")
PROTOCOLS = {"tcp": 6, "udp": 17, "sctp": 132}
TTL = (1, 7 * 86400, 600)            # seconds: lowest, highest, default
REASON_MAX = 200
SIZE = 65536                          # entries a set holds
FLOWTABLE = "bypass"
PREFIX_SETS = {"block": ("block_net4", "block_net6"), "bypass": ("bypass_net4", "bypass_net6")}
FLOW_SETS = {"block": ("block_flow4", "block_flow6"), "bypass": ("bypass_flow4", "bypass_flow6")}
FLOW_TYPE = {4: "ipv4_addr . ipv4_addr . inet_proto . inet_service . inet_service",
             6: "ipv6_addr . ipv6_addr . inet_proto . inet_service . inet_service"}
ADDR_TYPE = {4: "ipv4_addr", 6: "ipv6_addr"}
FAMILY_WORD = {4: "ip", 6: "ip6"}


class Code(IntEnum):
    """No CLI takes them: the numbers only keep these codes apart from other domains'."""

    ARGUMENTS = 73    # not a table, an argument missing or unknown
    MATCH = 74        # the prefix or the connection
    VALUE = 75        # the time to live, the reason


class HookError(Problems):
    codes = Code


@dataclass(frozen=True)
class Flow:
    """A connection as its original direction has it."""

    src: IPAddress
    dst: IPAddress
    proto: int
    sport: Integer
    dport: Integer

    @property
    def version(self):
        return self.src.version

    def as_dict(self):
        protocol = next(name for name, number in PROTOCOLS.items() if number == self.proto)
        return {"src": str(self.src), "dst": str(self.dst), "protocol": protocol,
                "sport": int(self.sport), "dport": int(self.dport)}


@dataclass(frozen=True)
class Request:
    action: str
    prefix: IPNetwork | None
    flow: Flow | None
    ttl: int
    reason: str
    announce: bool = False    # a host's block, also announced as a BGP black-hole route

    def as_dict(self):
        return {"action": self.action, "prefix": str(self.prefix) if self.prefix else None,
                "flow": self.flow.as_dict() if self.flow else None, "ttl": self.ttl,
                "reason": self.reason, "announce": self.announce}

    @property
    def set_name(self):
        sets = PREFIX_SETS if self.prefix else FLOW_SETS
        version = (self.prefix or self.flow).version
        return sets[self.action][0 if version == 4 else 1]

    @property
    def what(self):
        """The match as a person reads it: a prefix, or a connection."""
        if self.prefix:
            return str(self.prefix)
        flow = self.flow.as_dict()
        return (f"{flow['protocol']} {flow['src']}:{flow['sport']} -> "
                f"{flow['dst']}:{flow['dport']}")

    def __str__(self):
        return f"{self.action} {self.what}"


def _typed(problems, path, make):
    try:
        return make()
    except Refused as refused:
        problems.append(Problem(Code.MATCH, path, str(refused)))
        return None


def _flow(value, problems):
    if not isinstance(value, dict):
        problems.append(Problem(Code.MATCH, "flow", "must be a table of src, dst, protocol, "
                                                    "sport, dport"))
        return None
    unknown = sorted(set(value) - {"src", "dst", "protocol", "sport", "dport"})
    for name in unknown:
        problems.append(Problem(Code.ARGUMENTS, f"flow.{str(name)[:40]}", "unknown key"))
    src = _typed(problems, "flow.src", lambda: IPAddress(value.get("src")))
    dst = _typed(problems, "flow.dst", lambda: IPAddress(value.get("dst")))
    ports = [_typed(problems, f"flow.{name}", lambda n=name: Integer(value.get(n), 1, 65535))
             for name in ("sport", "dport")]
    proto = PROTOCOLS.get(value.get("protocol")) if isinstance(value.get("protocol"), str) \
        else None
    if proto is None:
        problems.append(Problem(Code.MATCH, "flow.protocol",
                                f"must be one of {', '.join(PROTOCOLS)}"))
    if src and dst and src.version != dst.version:
        problems.append(Problem(Code.MATCH, "flow.dst", "not of the source's address family"))
    if unknown or None in (src, dst, proto, *ports) or src.version != dst.version:
        return None
    return Flow(src, dst, proto, *ports)


def request_of(args):
    """A hook job's arguments (the API's request) checked whole -> Request; HookError
    naming every bad field. Exactly one of prefix and flow."""
    if not isinstance(args, dict):
        raise HookError(Code.ARGUMENTS, "", "the arguments must be a table")
    problems = [Problem(Code.ARGUMENTS, str(name)[:40], "unknown argument")
                for name in sorted(set(args) - {"action", "prefix", "flow", "ttl", "reason",
                                                "announce"}, key=str)]
    action = args.get("action")
    if action not in ACTIONS:
        problems.append(Problem(Code.ARGUMENTS, "action", f"must be one of {', '.join(ACTIONS)}"))
    prefix = flow = None
    if (args.get("prefix") is None) == (args.get("flow") is None):
        problems.append(Problem(Code.MATCH, "", "give a prefix or a flow (one of them)"))
    elif args.get("prefix") is not None:
        prefix = _typed(problems, "prefix", lambda: IPNetwork(args["prefix"]))
    else:
        flow = _flow(args["flow"], problems)
    ttl = args.get("ttl", TTL[2])
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not TTL[0] <= ttl <= TTL[1]:
        problems.append(Problem(Code.VALUE, "ttl", f"must be a whole number of seconds from "
                                                   f"{TTL[0]} to {TTL[1]}"))
    reason = args.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX or \
            not all(char.isprintable() for char in reason):
        problems.append(Problem(Code.VALUE, "reason", f"must be printable text of at most "
                                                      f"{REASON_MAX} characters"))
    announce = args.get("announce", False)
    if not isinstance(announce, bool):
        problems.append(Problem(Code.VALUE, "announce", "must be true or false"))
    elif announce and action != "block":
        problems.append(Problem(Code.VALUE, "announce", "only a block is announced (as a "
                                                        "black-hole route)"))
    elif announce and (prefix is None or not prefix.is_host):
        problems.append(Problem(Code.VALUE, "announce", "only one host's block is announced: "
                                                        "a /32 or a /128 prefix (RFC 7999)"))
    if problems:
        raise HookError(problems)
    return Request(action, prefix, flow, ttl, reason, announce is True)


def _rules(action, version):
    """The matches of one family in one chain; each ends with the chain's verdict."""
    word = FAMILY_WORD[version]
    net, flow = PREFIX_SETS[action][version // 6], FLOW_SETS[action][version // 6]
    ends = (f"{word} saddr @{net}", f"{word} daddr @{net}")
    ports = "meta l4proto { tcp, udp, sctp }"
    tuples = (f"{ports} {word} saddr . {word} daddr . meta l4proto . th sport . th dport "
              f"@{flow}",
              f"{ports} {word} daddr . {word} saddr . meta l4proto . th dport . th sport "
              f"@{flow}")
    return [*ends, *tuples]


def _sets(actions):
    """The prefix and connection sets of actions, both families."""
    lines = []
    for action in actions:
        for version in (4, 6):
            lines += [f"\tset {PREFIX_SETS[action][version // 6]} {{",
                      f"\t\ttype {ADDR_TYPE[version]}; flags interval, timeout; size {SIZE};",
                      "\t}",
                      f"\tset {FLOW_SETS[action][version // 6]} {{",
                      f"\t\ttype {FLOW_TYPE[version]}; flags timeout; size {SIZE};", "\t}"]
    return lines


def render(devices=None):
    """Table inet tusk_hook whole: its sets, the block chain and the bypass chain (with its
    flowtable over devices - InterfaceNames - when the kernel has flowtables: devices not
    None). Loaded only when the table is not there: loading it again would add its rules
    twice (create())."""
    lines = [f"table {FAMILY} {HOOK_TABLE} {{", *_sets(ACTIONS)]
    if devices is not None:
        lines += [f"\tflowtable {FLOWTABLE} {{", "\t\thook ingress priority filter"]
        if devices:
            names = ", ".join(fmt.interface(device, "the hook's flowtable")
                              for device in devices)
            lines.append(f"\t\tdevices = {{ {names} }}")
        lines += ["\t\tcounter", "\t}"]
    lines += ["\tchain block {", "\t\ttype filter hook forward priority filter - 1; "
              "policy accept;"]
    lines += [f'\t\t{rule} counter drop comment "tusk: blocked by the IDS hook"'
              for version in (4, 6) for rule in _rules("block", version)]
    lines += ["\t}"]
    if devices is not None:
        lines += ["\tchain bypass {", "\t\ttype filter hook forward priority filter + 1; "
                  "policy accept;"]
        lines += [f"\t\tct state established {rule} flow add @{FLOWTABLE} "
                  f'comment "tusk: bypassed by the IDS hook"'
                  for version in (4, 6) for rule in _rules("bypass", version)]
        lines += ["\t}"]
    return "\n".join(lines + ["}"]) + "\n"


def render_bridge():
    """Table bridge tusk_hook: the block sets and chain again, for a transparent bridge's
    frames, which never reach family inet's hooks (docs/NETWORK.md). element() adds a
    block to both tables; the bypass is the flowtable's, which takes routed flows only."""
    lines = [f"table {BRIDGE_FAMILY} {HOOK_TABLE} {{", *_sets(("block",))]
    lines += ["\tchain block {", "\t\ttype filter hook forward priority filter - 1; "
              "policy accept;"]
    lines += [f'\t\t{rule} counter drop comment "tusk: blocked by the IDS hook"'
              for version in (4, 6) for rule in _rules("block", version)]
    return "\n".join(lines + ["\t}", "}"]) + "\n"


def element(request):
    """`add element` of request: its match with its time to live - a block in the
    bridges' table too."""
    if request.prefix:
        key = fmt.prefix(request.prefix, "the IDS hook's set")
    else:
        flow = request.flow
        key = " . ".join([fmt.address(flow.src, "the IDS hook's set"),
                          fmt.address(flow.dst, "the IDS hook's set"), str(flow.proto),
                          str(int(flow.sport)), str(int(flow.dport))])
    families = (FAMILY, BRIDGE_FAMILY) if request.action == "block" else (FAMILY,)
    return "".join(f"add element {family} {HOOK_TABLE} {request.set_name} "
                   f"{{ {key} timeout {request.ttl}s }}\n" for family in families)


def create(target, devices=None):
    """The tables on target (a tusklib Target) unless they are there (the bridges' one
    is made on its own where a release before it made the other). -> True if table
    inet tusk_hook was made now."""
    if not target.run(["nft", "list", "table", BRIDGE_FAMILY, HOOK_TABLE]).ok:
        target.nft_load(render_bridge())
    if target.run(["nft", "list", "table", FAMILY, HOOK_TABLE]).ok:
        return False
    target.nft_load(render(devices))
    return True


def add(target, request, devices=None):
    """request's entry into its set (the table made first when missing). -> whether the
    table was made now."""
    made = create(target, devices)
    target.nft_load(element(request))
    return made


def remove(target, request):
    """request's entry taken out of its set again (both tables for a block); an entry
    that is not there is fine."""
    families = (FAMILY, BRIDGE_FAMILY) if request.action == "block" else (FAMILY,)
    key = element(request).split("{ ", 1)[1].split(" timeout", 1)[0]
    for family in families:
        target.run(["nft", "delete", "element", family, HOOK_TABLE, request.set_name,
                    f"{{ {key} }}"])


def _key(value):
    """A set element's key from nft's JSON: a prefix, an address or a concatenation."""
    if isinstance(value, dict) and "prefix" in value:
        return f"{value['prefix']['addr']}/{value['prefix']['len']}"
    if isinstance(value, dict) and "concat" in value:
        return [_key(part) for part in value["concat"]]
    if isinstance(value, dict) and "range" in value:
        return "-".join(str(part) for part in value["range"])
    return value


def entries(listing):
    """[{"set", "key", "expires" (seconds left)}] of `nft -j list table inet tusk_hook`'s
    text; [] when it holds none (or is not there)."""
    try:
        items = json.loads(listing).get("nftables", [])
    except (ValueError, AttributeError):
        return []
    found = []
    for item in items:
        found_set = item.get("set") if isinstance(item, dict) else None
        if not isinstance(found_set, dict):
            continue
        elems = found_set.get("elem")
        for elem in elems if isinstance(elems, list) else []:
            value = elem.get("elem", {}) if isinstance(elem, dict) else {}
            key = value.get("val", elem) if isinstance(value, dict) else elem
            found.append({"set": found_set.get("name"), "key": _key(key),
                          "expires": value.get("expires") if isinstance(value, dict)
                          else None})
    return found
