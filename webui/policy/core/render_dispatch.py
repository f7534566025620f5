"""The dispatch as nft text (render.py's renderer inherits it): a zone pair's chain, its
compiled segments' verdict maps, the splits by protocol or port and their buckets'
chains, and the zone dispatch that jumps to each pair - from the plan dispatch.py
compiles, whose cost does not grow with the number of classes."""
from .dispatch import ANY_PORT, OTHER, PROTOCOL_NUMBERS
from .intervals import address_text, literal, port_text
from .render_text import FAMILIES, L4PROTO, class_comment, nft_comment, verdict_map, zone_keys

PROTOCOL_NAMES = {number: L4PROTO.get(name, name) for name, number in PROTOCOL_NUMBERS.items()}


class DispatchRenderer:
    """The dispatch's part of the renderer: needs self.policy, self.zones (the table's),
    self.plan and self.dispatch() (the renderer's)."""

    def chain_name(self, chain):
        src, dst = chain.pairs[0]
        return f"classes_{_zone_name(src)}.{_zone_name(dst)}"

    def served(self, chain):
        """The zone pairs a chain serves, for comments."""
        served = " and ".join(f"{_zone_text(s)} -> {_zone_text(d)}" for s, d in chain.pairs)
        if len(chain.pairs) > 2:    # shared by many pairs: the comment stays short
            first = chain.pairs[0]
            served = (f"{_zone_text(first[0])} -> {_zone_text(first[1])} and "
                      f"{len(chain.pairs) - 1} more zone pairs")
        return served

    def dispatch_chain_list(self):
        """(name, segments, served, bucket) of every dispatch chain: each zone pair's
        chain, then the chains of its splits' buckets (a direct bucket has none)."""
        if self.chain_list is None:
            self.chain_list = self._dispatch_chain_list()
        return self.chain_list

    def _dispatch_chain_list(self):
        result = []
        for chain in self.plan.chains:
            name, served = self.chain_name(chain), self.served(chain)
            result.append((name, chain.segments, served, False))
            for number, segment in _numbered(chain.segments):
                for split in segment.splits:
                    for bucket_name, bucket in self.buckets(name, number, split).items():
                        result.append((bucket_name, bucket.segments, served, True))
        return result

    # What a dispatch chain names after itself follows a '.': zone names have none, so
    # classes_<from>.<to> ends at the second '.' and no zone can make a name twice.
    @staticmethod
    def map_name(chain_name, number, vmap):
        group = "ports" if vmap.ports else "protocols"
        family = f".{FAMILIES[vmap.family][1]}" if vmap.family else ""
        return f"{chain_name}{_segment(number)}{family}.{group}"

    @staticmethod
    def split_name(chain_name, number, split):
        group = "protocols" if split.protocol is None else PROTOCOL_NAMES[split.protocol]
        return f"{chain_name}{_segment(number)}.{group}"

    def buckets(self, chain_name, number, split):
        """name -> bucket for the split's buckets that are chains, named after the first
        interval that goes to each."""
        key = (chain_name, number, id(split))
        if key not in self.bucket_names:
            self.bucket_names[key] = self._buckets(chain_name, number, split)
        return self.bucket_names[key]

    def _buckets(self, chain_name, number, split):
        prefix, names, seen = self.split_name(chain_name, number, split), {}, set()
        for interval, bucket in split.buckets:
            if bucket.direct is None and id(bucket) not in seen:
                seen.add(id(bucket))
                names[f"{prefix}.{_split_key(split, interval)}"] = bucket
        return names

    def maps(self):
        lines = []
        for name, segments, _, _ in self.dispatch_chain_list():
            for number, segment in _numbered(segments):
                for vmap in segment.maps:
                    lines += self.map_lines(self.map_name(name, number, vmap), vmap)
                for split in segment.splits:
                    if _whole(split) is None:    # else a rule on the protocol alone
                        lines += self.split_lines(name, number, split)
        return lines

    def map_lines(self, name, vmap):
        addresses = vmap.addresses()
        key = " . ".join([f"{vmap.family}_addr"] * len(addresses) + ["inet_proto"]
                         + (["inet_service"] if vmap.ports else []))
        classes = self.policy.classes
        elements = []
        for box, index in vmap.elements:
            parts = [address_text(vmap.family, box[d])
                     for d, field in enumerate(("saddr", "daddr")) if field in addresses]
            parts.append(_protocol_text(box[2]))
            if vmap.ports:
                parts.append(port_text(box[3]))
            elements.append(f"{' . '.join(parts)} : goto class_{classes[index].name}")
        return verdict_map(name, key, elements)

    def split_maps(self, chain_name, number, split):
        """name -> (whether an interval map, [(Interval, Bucket)]): a port protocol's
        single ports in a hash map (one lookup, whatever the number of ports; the
        kernel's rbtree walks its depth), its ranges in an interval map named
        <map>.ranges; the protocols without ports in one interval map. The two never
        hold the same port."""
        name = self.split_name(chain_name, number, split)
        if split.protocol is None:
            return {name: (True, list(split.buckets))}
        singles = [(iv, b) for iv, b in split.buckets if iv.low == iv.high]
        ranges = [(iv, b) for iv, b in split.buckets if iv.low != iv.high]
        return {key: value for key, value in ((name, (False, singles)),
                                              (f"{name}.ranges", (True, ranges))) if value[1]}

    def split_lines(self, chain_name, number, split):
        chains = {id(bucket): name
                  for name, bucket in self.buckets(chain_name, number, split).items()}
        key = "inet_proto" if split.protocol is None else "inet_service"
        lines = []
        for name, (interval, buckets) in self.split_maps(chain_name, number, split).items():
            elements = [f"{_split_key(split, span)} : "
                        + (f"goto class_{self.policy.classes[bucket.direct].name}"
                           if bucket.direct is not None else f"jump {chains[id(bucket)]}")
                        for span, bucket in buckets]
            lines += verdict_map(name, key, elements, interval)
        return lines

    def dispatch_chains(self):
        lines = []
        for name, segments, served, bucket in self.dispatch_chain_list():
            lines.append(f"\tchain {name} {{")
            lines += self.segment_lines(name, segments, served, bucket)
            if not bucket:
                lines.append(f"\t\tgoto default_deny {nft_comment(f'tusk: no class for {served}')}")
            lines.append("\t}")
        return lines

    def segment_lines(self, name, segments, served, bucket):
        """A dispatch chain's rules; in a bucket's chain, the rules match the addresses
        alone (the split's key already chose the protocol and port)."""
        lines = []
        for number, segment in _numbered(segments):
            if not segment.compiled():
                for match in segment.matches:
                    cls = self.policy.classes[match.index]
                    comment = nft_comment(class_comment(match.index, cls))
                    text = match.addresses if bucket else match.text
                    lines.append(f"\t\t{text}{self.dispatch(match.index, cls)} {comment}")
                continue
            first, last = segment.matches[0].index, segment.matches[-1].index
            comment = nft_comment(f"tusk: classes[{first}..{last}] {served}")
            direct = {}     # class -> the protocols whose every port goes to it
            for split in segment.splits:
                protocol = PROTOCOL_NAMES.get(split.protocol)
                whole = _whole(split)
                if whole is not None and whole.direct is not None:
                    direct.setdefault(whole.direct, []).append(protocol)
                elif whole is not None:
                    bucket_name, = self.buckets(name, number, split)
                    lines.append(f"\t\tmeta l4proto {protocol} jump {bucket_name} {comment}")
                else:
                    key = ("meta l4proto" if split.protocol is None
                           else f"meta l4proto {protocol} th dport")
                    for map_name in self.split_maps(name, number, split):
                        lines.append(f"\t\t{key} vmap @{map_name} {comment}")
            for index, protocols in direct.items():
                lines.append(f"\t\tmeta l4proto {literal(protocols)} "
                             f"goto class_{self.policy.classes[index].name} {comment}")
            for vmap in segment.maps:
                keyword = FAMILIES[vmap.family][0] if vmap.family else ""
                addresses = vmap.addresses()
                # without an address field, nothing else says the family
                key = f"meta nfproto {vmap.family} " if vmap.family and not addresses else ""
                key += " . ".join([f"{keyword} {a}" for a in addresses] + ["meta l4proto"]
                                  + (["th dport"] if vmap.ports else []))
                lines.append(f"\t\t{key} vmap @{self.map_name(name, number, vmap)} {comment}")
        return lines

    def target(self, src, dst):
        chain = self.plan.chain(src, dst)
        return "default_deny" if chain is None else self.chain_name(chain)

    def zone_dispatch(self):
        """The forward chain's last rules: to the chain of the packet's zone pair. Bridged
        zones of VLANs first, keyed by port and VLAN id (a frame keeps its VLAN across a
        bridge: a pair of such zones shares the VLANs both name; with a zone of whole
        ports, those of the other), then the zones of whole interfaces."""
        zones = self.zones
        if not zones:
            return [f'goto {self.target(OTHER, OTHER)} comment "tusk: no zones"']
        lines = self.vlan_dispatch()
        whole = [z for z in zones if not z.vlans]
        pairs = [f'"{i}" . "{o}" : goto {self.target(a.name, b.name)}'
                 for a in whole for b in whole for i in a.interfaces for o in b.interfaces]
        from_zone = [f'"{i}" : goto {self.target(a.name, OTHER)}'
                     for a in whole for i in a.interfaces]
        to_zone = [f'"{o}" : goto {self.target(OTHER, b.name)}'
                   for b in whole for o in b.interfaces]
        lines += _vmaps((("iifname . oifname", pairs, "between zones"),
                         ("iifname", from_zone, "from a zone to an interface in no zone"),
                         ("oifname", to_zone, "from an interface in no zone to a zone")))
        return lines + [f'goto {self.target(OTHER, OTHER)} comment "tusk: between '
                        'interfaces in no zone"']

    def vlan_dispatch(self):
        """The zone dispatch's rules for bridged zones of VLANs (none without)."""
        zones = self.zones
        if not any(z.vlans for z in zones):
            return []
        pairs = []
        for a in zones:
            for b in zones:
                if a.vlans and b.vlans:
                    vids = sorted(set(a.vlans) & set(b.vlans))
                else:
                    vids = a.vlans or b.vlans
                pairs += [f'"{i}" . "{o}" . {vid} : goto {self.target(a.name, b.name)}'
                          for vid in vids for i in a.interfaces for o in b.interfaces]
        tagged = [z for z in zones if z.vlans]
        from_zone = [f"{key} : goto {self.target(a.name, OTHER)}"
                     for a in tagged for key in zone_keys(a)]
        to_zone = [f"{key} : goto {self.target(OTHER, b.name)}"
                   for b in tagged for key in zone_keys(b)]
        return _vmaps((("iifname . oifname . vlan id", pairs, "between zones, by VLAN"),
                       ("iifname . vlan id", from_zone, "from a zone of VLANs to no zone"),
                       ("oifname . vlan id", to_zone, "from no zone to a zone of VLANs")))


def _vmaps(rows):
    """The zone dispatch's verdict-map rules of (key, elements, comment) rows, leaving
    out a row without elements."""
    return [f"{key} vmap {{ {', '.join(elements)} }} comment \"tusk: {comment}\""
            for key, elements, comment in rows if elements]



def _segment(number):
    """The part of a map's name that says which compiled segment of its chain: none for
    the first."""
    return "" if number == 1 else f".{number}"


def _whole(split):
    """The bucket of a port protocol's split whose every port goes to one bucket."""
    if split.protocol is not None and len(split.buckets) == 1 \
            and split.buckets[0][0] == ANY_PORT:
        return split.buckets[0][1]
    return None


def _numbered(segments):
    """(number, segment): the compiled segments of a chain numbered from 1 (their maps'
    names), the others 0."""
    number, result = 0, []
    for segment in segments:
        if segment.compiled():
            number += 1
        result.append((number if segment.compiled() else 0, segment))
    return result


def _split_key(split, interval):
    """An interval of a split's field in nft syntax: ports, or a protocol's name."""
    return _protocol_text(interval) if split.protocol is None else port_text(interval)


def _zone_name(zone):
    """A zone in a chain or map name; interfaces in no zone are OTHER (zone names are
    lower case)."""
    return "OTHER" if zone is OTHER else zone


def _zone_text(zone):
    return "no zone" if zone is OTHER else zone


def _protocol_text(interval):
    if interval.low != interval.high:
        return f"{interval.low}-{interval.high}"
    return PROTOCOL_NAMES.get(interval.low, str(interval.low))
