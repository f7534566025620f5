"""Stage 2a of render: the class dispatch compiler. Pure: matches in, a plan out.

The policy's classes are an ordered first-match list. Walked rule by rule, a new
connection costs one rule per class before it is accepted, and a packet no class takes
walks all of them before the default deny. The plan makes that cost independent of
the number of classes:

- zones first: the packet's input and output interfaces choose the chain of one zone
  pair (a verdict map on `iifname . oifname`), which holds only the classes that can
  apply to that pair, in class order. Interfaces in no zone have a "zone" of their own,
  OTHER (classes from or to any zone apply there too).
- within a zone pair, a run of consecutive classes is split on one field: the
  destination port of each port protocol (TCP, UDP, SCTP, UDP-Lite) and the protocol
  of the others, each a verdict map with interval flags on that field alone (the
  kernel's rbtree: a lookup in O(log n)). The field is cut wherever a match's ports or
  protocols start or end; each piece goes to the bucket of the matches that cover it,
  in class order, cut after the first that takes any address. A bucket whose first
  match takes everything is the class itself; any other is a small chain of the
  matches' address rules (jumped to: what none of them takes goes on).
- where a bucket holds more than a few matches (LINEAR_MAX) - a server per class on
  one port, say - they are compiled into verdict maps keyed on `saddr . daddr .
  l4proto . dport` (TCP, UDP, SCTP, UDP-Lite) or `saddr . daddr . l4proto` (every
  other protocol), one per address family, with interval flags (the kernel's pipapo
  set type). The elements of a map must not overlap, so first-match is made explicit:
  each class's boxes (source range x destination range x protocol x port range) lose
  the parts an earlier class already covers (box subtraction), and what is left goes
  to the class. A run whose buckets would hold more than ELEMENTS_MAX matches in all
  (port ranges overlapping in a staircase) is compiled into such maps whole.
- what a map cannot express stays a rule: the replies of notrack classes (matched on
  the source port), runs of a few classes (LINEAR_MAX: a short list reads better as
  rules), and runs whose subtraction would produce more than ELEMENTS_MAX elements or
  compare more than PAIRS_MAX overlapping boxes (a correct, slower fallback).

Every packet gets the same class as from the rule-by-rule list: tests/property checks
the plan against a reference evaluator, tests/netns with real packets.
"""
import bisect
import heapq
from dataclasses import dataclass
from itertools import product

from .model import Interval

OTHER = None            # the "zone" of interfaces that belong to no zone
LINEAR_MAX = 4          # runs of at most this many matches stay rules
ELEMENTS_MAX = 200_000  # per run: beyond, the run stays rules (correct, slower)
PAIRS_MAX = 2_000_000   # overlapping boxes compared per map, beyond: rules

PROTOCOL_NUMBERS = {"icmp": 1, "tcp": 6, "udp": 17, "gre": 47, "esp": 50, "ah": 51,
                    "icmpv6": 58, "sctp": 132, "udplite": 136}
PORT_PROTOCOL_NUMBERS = (6, 17, 132, 136)
FULL = {"ipv4": Interval(0, 2**32 - 1), "ipv6": Interval(0, 2**128 - 1)}
ANY_PORT = Interval(0, 65535)
# every protocol number but the port protocols': what a class of any protocol covers in
# the map without ports
_NO_PORT_PROTOCOLS = (Interval(0, 5), Interval(7, 16), Interval(18, 131),
                      Interval(133, 135), Interval(137, 255))


@dataclass(frozen=True)
class Match:
    """One rule's worth of a class: what the rule-by-rule list would match. None means
    any (zone, family, addresses, protocol, ports); ports are source ports when reverse
    (the replies of a notrack class). text is the rule's match in nft syntax without the
    zones (the chain already stands for them); addresses is its address part alone (in a
    bucket, the split's key already stands for the protocol and port)."""

    index: int
    src_zone: str | None
    dst_zone: str | None
    family: str | None
    saddr: tuple | None
    daddr: tuple | None
    protocol: str | None
    ports: tuple | None
    reverse: bool
    text: str
    addresses: str

    def applies(self, src, dst):
        """Whether the match can take packets from zone src to zone dst (OTHER: none)."""
        return self.src_zone in (None, src) and self.dst_zone in (None, dst)


@dataclass(frozen=True)
class Map:
    """A verdict map: disjoint boxes, each the class (index) it goes to. ports: keyed on
    saddr . daddr . l4proto . dport, else saddr . daddr . l4proto."""

    family: str | None   # None: both (the two families' maps were the same, addressless)
    ports: bool
    elements: tuple      # ((Interval, ...), index)

    def addresses(self):
        """Which of saddr, daddr the key needs: an address no element narrows is left
        out (fewer fields: a shorter key to load and to look up)."""
        if self.family is None:
            return ()
        full = FULL[self.family]
        return tuple(name for d, name in enumerate(("saddr", "daddr"))
                     if any(box[d] != full for box, _ in self.elements))


@dataclass(frozen=True)
class Bucket:
    """The matches of a run that can take a packet whose protocol and port fall in one
    interval of a split: in class order, cut after the first that takes every such
    packet. direct: that first match's class when it is the first (the split's map goes
    straight to the class); else the bucket is a chain of its own, its segments
    compiled as a zone pair's are (never split again)."""

    direct: int | None
    segments: tuple


@dataclass(frozen=True)
class Split:
    """A run's verdict map on one field: the destination port of one port protocol
    (protocol: its number), or the protocol number for every protocol without ports
    (protocol None). Each interval goes to its bucket; a packet in none goes on."""

    protocol: int | None
    buckets: tuple       # ((Interval, Bucket), ...), ascending and disjoint


@dataclass(frozen=True)
class Segment:
    """Consecutive matches of one chain: rules (maps and splits empty), splits (one per
    protocol: their keys never meet) or maps (in any order: their keys never meet - one
    family each, port protocols or not)."""

    matches: tuple
    maps: tuple = ()
    splits: tuple = ()

    def compiled(self):
        return bool(self.maps or self.splits)


@dataclass(frozen=True)
class Chain:
    """The classes of one or more zone pairs (identical lists share one chain)."""

    pairs: tuple         # ((src, dst), ...), the first names the chain
    segments: tuple


@dataclass(frozen=True)
class Plan:
    zones: tuple         # zone names, in policy order
    chains: tuple        # non-empty chains
    target: dict         # (src, dst) -> Chain, only for pairs that have classes

    def chain(self, src, dst):
        return self.target.get((src, dst))


def compile_plan(zones, matches, linear_max=LINEAR_MAX, elements_max=ELEMENTS_MAX,
                 pairs_max=PAIRS_MAX, split=True):
    """zones: names; matches: Match objects in class order -> Plan. Zone pairs with the
    same classes share one chain, named after the first of them. split=False compiles
    long runs straight into address maps (the tests force both ways)."""
    pairs_of = {}       # the pair's matches -> the pairs that have exactly those
    for src in (*zones, OTHER):
        for dst in (*zones, OTHER):
            members = tuple(m for m in matches if m.applies(src, dst))
            if members:
                pairs_of.setdefault(members, []).append((src, dst))
    chains = tuple(Chain(pairs=tuple(pairs),
                         segments=segments(members, linear_max, elements_max, pairs_max,
                                           split))
                   for members, pairs in pairs_of.items())
    target = {pair: chain for chain in chains for pair in chain.pairs}
    return Plan(zones=tuple(zones), chains=chains, target=target)


def segments(members, linear_max, elements_max, pairs_max, split):
    """Consecutive matches grouped: notrack replies and short runs as rules, the rest
    as splits or maps; adjacent groups of rules read as one."""
    result, run = [], []

    def close():
        if run:
            result.append(_run_segment(tuple(run), linear_max, elements_max, pairs_max,
                                       split))
            run.clear()
    for match in members:
        if match.reverse:
            close()
            result.append(Segment(matches=(match,)))
        else:
            run.append(match)
    close()
    merged = []
    for segment in result:
        if merged and not merged[-1].compiled() and not segment.compiled():
            merged[-1] = Segment(matches=merged[-1].matches + segment.matches)
        else:
            merged.append(segment)
    return tuple(merged)


def _run_segment(run, linear_max, elements_max, pairs_max, split):
    if len(run) <= linear_max:
        return Segment(matches=run)
    if split:
        splits = _splits(run, linear_max, elements_max, pairs_max)
        if splits is not None:
            return Segment(matches=run, splits=splits)
    maps, total = [], 0
    for family in ("ipv4", "ipv6"):
        for ports in (True, False):
            boxes = [(box, m.index) for m in run for box in boxes_of(m, family, ports)]
            if not boxes:
                continue
            elements = first_match(boxes, elements_max - total, pairs_max)
            if elements is None:
                return Segment(matches=run)
            total += len(elements)
            if elements:
                maps.append(Map(family=family, ports=ports, elements=tuple(elements)))
    for ports in (True, False):      # one map for both families where they are the same
        pair = [m for m in maps if m.ports == ports]
        if len(pair) == 2 and not any(m.addresses() for m in pair) \
                and [(b[2:], i) for b, i in pair[0].elements] \
                == [(b[2:], i) for b, i in pair[1].elements]:
            maps = [m for m in maps if m.ports != ports] + [Map(None, ports, pair[0].elements)]
    return Segment(matches=run, maps=tuple(sorted(maps, key=_map_order)))


def _splits(run, linear_max, elements_max, pairs_max):
    """The run split on the destination port of each port protocol and on the protocol
    of the others; None when the buckets would hold more than elements_max matches in
    all (ranges that overlap in a staircase: then maps)."""
    result, total = [], 0
    for protocol in (*PORT_PROTOCOL_NUMBERS, None):
        members = [m for m in run if _in_split(m, protocol)]
        if not members:
            continue
        pieces = _pieces(members, protocol, elements_max - total)
        if pieces is None:
            return None
        total += sum(len(matches) for _, matches in pieces)
        buckets, chosen = {}, []    # by the members' identities (hashing Matches costs more)
        for interval, matches in pieces:
            key = tuple(map(id, matches))
            if key not in buckets:
                buckets[key] = _bucket(matches, linear_max, elements_max, pairs_max)
            chosen.append((interval, buckets[key]))
        result.append(Split(protocol=protocol, buckets=tuple(chosen)))
    return tuple(result)


def _in_split(match, protocol):
    """Whether the match can take packets of the split of protocol (None: those without
    ports)."""
    if match.protocol is None:
        return True
    number = PROTOCOL_NUMBERS[match.protocol]
    return number == protocol if protocol is not None \
        else number not in PORT_PROTOCOL_NUMBERS


def _spans(match, protocol):
    """The intervals of the split's field the match covers."""
    if protocol is None:
        if match.protocol is None:
            return _NO_PORT_PROTOCOLS
        number = PROTOCOL_NUMBERS[match.protocol]
        return (Interval(number, number),)
    return match.ports or (ANY_PORT,)


def _takes_all(match):
    """Whether the match takes every packet its split sends to a bucket with it (any
    family and address: the port or protocol is the split's)."""
    return match.family is None and match.saddr is None and match.daddr is None


def _pieces(members, protocol, budget):
    """The split field cut where any member's intervals start or end: (Interval, the
    members covering it in class order, cut after the first that takes all), adjacent
    pieces with the same members as one, pieces with none left out. None when more than
    budget members in all."""
    events = {}
    for position, match in enumerate(members):
        for interval in _spans(match, protocol):
            events.setdefault(interval.low, []).append((1, position))
            events.setdefault(interval.high + 1, []).append((-1, position))
    bounds = sorted(events)
    active, pieces, total = set(), [], 0
    for low, high in zip(bounds, bounds[1:]):
        for change, position in sorted(events[low]):    # ends before starts
            if change > 0:
                active.add(position)
            else:
                active.discard(position)
        if not active:
            continue
        matches = []
        for position in sorted(active):
            matches.append(members[position])
            if _takes_all(members[position]):
                break
        matches = tuple(matches)
        if pieces and pieces[-1][1] == matches and pieces[-1][0].high == low - 1:
            pieces[-1] = (Interval(pieces[-1][0].low, high - 1), matches)
            continue
        total += len(matches)
        if total > budget:
            return None
        pieces.append((Interval(low, high - 1), matches))
    return pieces


def _bucket(matches, linear_max, elements_max, pairs_max):
    if _takes_all(matches[0]):
        return Bucket(direct=matches[0].index, segments=())
    return Bucket(direct=None,
                  segments=segments(matches, linear_max, elements_max, pairs_max, False))


def _map_order(vmap):
    return (vmap.family or "", not vmap.ports)


def boxes_of(match, family, ports):
    """The match's boxes in the map of this family, with ports or not: tuples of
    Intervals (saddr, daddr, protocol[, port])."""
    if match.family not in (None, family):
        return []
    saddr = match.saddr or (FULL[family],)
    daddr = match.daddr or (FULL[family],)
    if match.protocol is None:
        protocols = (tuple(Interval(p, p) for p in PORT_PROTOCOL_NUMBERS) if ports
                     else _NO_PORT_PROTOCOLS)
        port_ranges = (ANY_PORT,)
    else:
        number = PROTOCOL_NUMBERS[match.protocol]
        if (number in PORT_PROTOCOL_NUMBERS) != ports:
            return []
        protocols = (Interval(number, number),)
        port_ranges = match.ports or (ANY_PORT,)
    if ports:
        return list(product(saddr, daddr, protocols, port_ranges))
    return list(product(saddr, daddr, protocols))


def overlaps(a, b):
    # a loop, not all() over a generator: the compiler's innermost test (2.5 times faster)
    for x, y in zip(a, b):
        if x.low > y.high or y.low > x.high:
            return False
    return True


def subtract(box, cut):
    """box minus cut: at most two pieces per dimension, disjoint, covering the rest."""
    if not overlaps(box, cut):
        return [box]
    pieces, rest = [], list(box)
    for d, (part, edge) in enumerate(zip(box, cut)):
        low, high = part.low, part.high
        if low < edge.low:
            pieces.append((*rest[:d], Interval(low, edge.low - 1), *rest[d + 1:]))
            low = edge.low
        if high > edge.high:
            pieces.append((*rest[:d], Interval(edge.high + 1, high), *rest[d + 1:]))
            high = edge.high
        rest[d] = Interval(low, high)
    return pieces


def first_match(boxes, elements_max, pairs_max):
    """Ordered (box, index) -> disjoint (box, index): each box minus every box of an
    earlier class that overlaps it. None when that takes more than elements_max
    elements or pairs_max comparisons."""
    shadows = _shadows(boxes, pairs_max)
    if shadows is None:
        return None
    elements = []
    for position, (box, index) in enumerate(boxes):
        pieces = [box]
        for earlier in shadows.get(position, ()):
            pieces = [piece for p in pieces for piece in subtract(p, boxes[earlier][0])]
            if not pieces:
                break
            if len(elements) + len(pieces) > elements_max:
                return None
        elements += [(piece, index) for piece in pieces]
        if len(elements) > elements_max:
            return None
    return elements


def _shadows(boxes, pairs_max):
    """position -> positions of earlier boxes of other classes that overlap it. The
    candidates come from the dimension where the fewest boxes overlap (the ports, in a
    policy of a service per class; the addresses, in one of a server per class)."""
    if len(boxes) < 2:
        return {}
    dimension, count = min(((d, _overlapping_pairs([b[d] for b, _ in boxes]))
                            for d in range(len(boxes[0][0]))), key=lambda t: t[1])
    if count > pairs_max:
        return None
    shadows = {}
    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0][dimension].low)
    active = []         # heap of (high, position)
    for position in order:
        interval = boxes[position][0][dimension]
        while active and active[0][0] < interval.low:
            heapq.heappop(active)
        for _, other in active:
            first, second = min(position, other), max(position, other)
            if boxes[first][1] != boxes[second][1] \
                    and overlaps(boxes[first][0], boxes[second][0]):
                shadows.setdefault(second, []).append(first)
        heapq.heappush(active, (interval.high, position))
    for earlier in shadows.values():
        # the largest first: a box inside an earlier one then no longer splits anything,
        # and the rest comes out in fewer pieces (the result is the same either way)
        earlier.sort(key=lambda e: (-_volume(boxes[e][0]), e))
    return shadows


def _volume(box):
    size = 1
    for part in box:
        size *= part.high - part.low + 1
    return size


def _overlapping_pairs(intervals):
    """How many pairs of the intervals overlap: all pairs minus those where one ends
    before the other starts."""
    highs = sorted(i.high for i in intervals)
    apart = sum(bisect.bisect_left(highs, i.low) for i in intervals)
    n = len(intervals)
    return n * (n - 1) // 2 - apart
