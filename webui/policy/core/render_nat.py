"""Stage 2, the nat section's rules: chains nat_prerouting (port forwards, DNAT at
priority dstnat, before the forward chain: classes see the translated destination) and
nat_postrouting (source NAT at priority srcnat, after it: classes see the untranslated
source), in table inet tusk, only when the policy has NAT. NAT chains see only the first
packet of a connection; conntrack translates the rest and the replies. Every rule
carries `comment "tusk: nat.forwards[i] name"` or `"tusk: nat.source[i] name"`.

Hairpin (reflection): a forward's DNAT also for traffic from the other zones, which
sets META_MARK_HAIRPIN_BIT on that first packet; nat_postrouting masquerades the packets
that carry it, so the server answers through the firewall, not straight to a host that
expects the external address.
"""
from tusklib.names import META_MARK_HAIRPIN_BIT

from . import choices
from .intervals import literal, port_text

_KEYWORD = {"ipv4": "ip", "ipv6": "ip6"}


def nat_comment(section, index, item):
    return f'comment "tusk: nat.{section}[{index}] {item.name}"'


class NatRenderer:
    def __init__(self, renderer):
        self.renderer = renderer
        self.policy = renderer.policy

    # -- nat_prerouting ------------------------------------------------------------------

    def prerouting(self):
        forwards = self.policy.nat.forwards
        if not forwards:
            return []
        lines = ["\tchain nat_prerouting {",
                 "\t\ttype nat hook prerouting priority dstnat; policy accept;"]
        bit = f"0x{META_MARK_HAIRPIN_BIT:08x}"
        for index, forward in enumerate(forwards):
            comment = nat_comment("forwards", index, forward)
            match = self.external(forward)
            dnat = self.dnat(forward)
            lines.append(f"\t\tiifname @zone_{forward.from_zone} {match}{dnat} {comment}")
            if forward.hairpin:
                for zone in self.policy.zones:
                    if zone.name != forward.from_zone:
                        lines.append(f"\t\tiifname @zone_{zone.name} {match}meta mark set "
                                     f"meta mark or {bit} {dnat} {comment}")
        lines.append("\t}")
        return lines

    @staticmethod
    def external(forward):
        """The match on the untranslated packet: its destination address (or any of the
        box's own) and ports."""
        if forward.address:
            where = f"{_KEYWORD[forward.family]} daddr {forward.address} "
        else:
            where = f"fib daddr type local meta nfproto {forward.family} "
        ports = literal([port_text(iv) for iv in forward.ports])
        return f"{where}{forward.protocol} dport {ports} "

    @staticmethod
    def dnat(forward):
        keyword = _KEYWORD[forward.family]
        address, to_ports = forward.to_address, forward.to_ports
        if to_ports is None:
            return f"dnat {keyword} to {address}"
        if to_ports.low == to_ports.high:
            host = f"[{address}]" if forward.family == "ipv6" else address
            return f"dnat {keyword} to {host}:{to_ports.low}"
        # a range of the same length: port by port (nftables has no shifted range)
        external = forward.ports[0]
        shift = to_ports.low - external.low
        elements = ", ".join(f"{port} : {address} . {port + shift}"
                             for port in range(external.low, external.high + 1))
        return f"dnat {keyword} to {forward.protocol} dport map {{ {elements} }}"

    def tracked(self):
        """raw_prerouting rules (only with notrack classes) that keep a forward's
        untranslated traffic tracked: notrack there would skip its DNAT. Traffic to the
        box's own addresses is already kept tracked by the chain's first rule."""
        rules = []
        for index, forward in enumerate(self.policy.nat.forwards):
            if not forward.address:
                continue
            ingress = "" if forward.hairpin else f"iifname @zone_{forward.from_zone} "
            rules.append(f"{ingress}{self.external(forward)}return "
                         f"{nat_comment('forwards', index, forward)}")
        return rules

    # -- nat_postrouting -----------------------------------------------------------------

    def postrouting(self):
        nat = self.policy.nat
        hairpins = [(i, f) for i, f in enumerate(nat.forwards) if f.hairpin]
        if not hairpins and not nat.source:
            return []
        lines = ["\tchain nat_postrouting {",
                 "\t\ttype nat hook postrouting priority srcnat; policy accept;"]
        bit = f"0x{META_MARK_HAIRPIN_BIT:08x}"
        for index, forward in hairpins:
            ports = literal([port_text(iv) for iv in forward.translated_ports()])
            lines.append(f"\t\tmeta mark and {bit} == {bit} {_KEYWORD[forward.family]} daddr "
                         f"{forward.to_address} {forward.protocol} dport {ports} masquerade "
                         f"{nat_comment('forwards', index, forward)}")
        for index, rule in enumerate(nat.source):
            comment = nat_comment("source", index, rule)
            for match in self.egress(rule):
                if rule.ports is not None:
                    protocols = ", ".join(choices.SNAT_PORT_PROTOCOLS)
                    lines.append(f"\t\t{match}meta l4proto {{ {protocols} }} "
                                 f"{self.snat(rule, rule.ports)} {comment}")
                lines.append(f"\t\t{match}{self.snat(rule, None)} {comment}")
        lines.append("\t}")
        return lines

    def egress(self, rule):
        """The match prefixes of a source NAT rule, one per address family it needs."""
        zone = f"oifname @zone_{rule.to_zone} "
        if rule.translate == choices.TRANSLATE_ADDRESS:
            families = [rule.address_family]
        elif rule.source:
            families = sorted(set().union(*(self.policy.address_set[n].families
                                            for n in rule.source)))
        else:
            return [zone]
        matches = []
        for family in families:
            if rule.source:
                matches.append(zone + self.renderer.address_match(family, "saddr",
                                                                  rule.source))
            else:
                matches.append(f"{zone}meta nfproto {family} ")
        return matches

    @staticmethod
    def snat(rule, ports):
        port = "" if ports is None else f":{port_text(ports)}"
        if rule.translate == choices.TRANSLATE_MASQUERADE:
            return f"masquerade to {port}" if port else "masquerade"
        address = rule.address
        if port and rule.address_family == "ipv6":
            address = "-".join(f"[{a}]" for a in address.split("-"))
        return f"snat {_KEYWORD[rule.address_family]} to {address}{port}"
