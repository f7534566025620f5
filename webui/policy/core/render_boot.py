"""Render for the tables tusk-boot loads before any interface is up (appliance/boot.py).
Pure and deterministic like render(); the skeletons live next to ruleset.nft.in, this
module emits the management interface's rule lines. Golden cases: tests/golden/boot/.

failsafe()        table inet tusk, forward: drop - what runs while no confirmed policy
                  is loaded (at boot, and after the first apply on a new box rolls back)
host(management, ha, routing, snmp)
                  table inet tusk_host - what may reach the firewall itself: the
                  management ports on the management interface only; with none (None),
                  on none; with ha (an HA pair's ha.core.config.HaConfig), VRRP on its
                  segments and conntrackd's sync from the peer on the sync link (a
                  cluster's box: the multicast sync from the sync link's subnet); with
                  routing (network.core.model.Routing), BGP and BFD from the BGP
                  neighbours' addresses, OSPF and its BFD on the OSPF links; with
                  snmp (snmp.core.config.SnmpConfig), SNMP from its prefixes
lockdown()        table inet tusk_lockdown - all input but loopback dropped: what
                  stands in when the kernel refuses the host table
"""
from tusklib import values
from tusklib.formats import nft

# The management interface answers on HTTPS, and HTTP, which redirects. No SSH: no SSH
# server ships (the console and the dashboard are the ways in, and one daemon fewer is
# one fewer to keep safe), so port 22 stays closed.
from tusklib.names import (
    BFD_PORTS,
    BGP_PORT,
    CLUSTER_GROUP,
    HA_PEER_PORT,
    HA_SYNC_PORT,
    MGMT_TCP_PORTS,
    OSPF,
    SNMP_PORT,
    VRRP,
)

from .render import skeleton

_FAILSAFE = skeleton("failsafe.nft.in")
_HOST = skeleton("host.nft.in")
_LOCKDOWN = skeleton("lockdown.nft.in")


def failsafe():
    return _FAILSAFE


def host(management, ha=None, routing=None, snmp=None):
    """management: the management interface (checked by tusk-net's rules), or None. ha:
    an enabled pair's checked configuration, or None. routing: network.toml's checked
    [routing], or None. snmp: the SNMP agent's checked configuration, or None. Names and
    addresses go through nft's one quoting point (tusklib/formats/nft.py) as typed
    values."""
    lines = []
    if management:
        where = f"iifname {nft.interface(values.InterfaceName(management))}"
        ports = ", ".join(str(port) for port in MGMT_TCP_PORTS)
        lines = [f'{where} tcp dport {{ {ports} }} accept comment "tusk: management"',
                 f'{where} udp sport 67 udp dport 68 accept comment "tusk: DHCP replies"',
                 f'{where} udp sport 547 udp dport 546 accept comment "tusk: DHCPv6 replies"']
    if ha is not None and ha.cluster:
        sync = nft.interface(values.InterfaceName(ha.sync_interface))
        subnet = nft.prefix(values.IPNetwork(
            str(values.IPInterface(ha.sync_address).interface.network)))
        group = nft.address(values.IPAddress(CLUSTER_GROUP))
        lines.append(f"iifname {sync} ip saddr {subnet} ip daddr {group} udp dport "
                     f'{HA_SYNC_PORT} accept comment "tusk: HA: connection state from the '
                     'cluster\'s other boxes"')
    elif ha is not None:
        segments = ", ".join(nft.interface(values.InterfaceName(segment.interface))
                             for segment in ha.virtual)
        family = "ip" if ha.family == 4 else "ip6"
        sync = nft.interface(values.InterfaceName(ha.sync_interface))
        peer = nft.address(values.IPAddress(ha.peer_address))
        lines += [f'iifname {{ {segments} }} meta l4proto {VRRP} accept '
                  'comment "tusk: HA: VRRP on the segments with virtual addresses"',
                  f'iifname {sync} {family} saddr {peer} udp dport '
                  f'{HA_SYNC_PORT} accept comment "tusk: HA: connection state from the peer"',
                  f'iifname {sync} {family} saddr {peer} tcp dport '
                  f'{HA_PEER_PORT} accept comment '
                  '"tusk: HA: status and configuration from the peer"']
    if routing is not None:
        lines += _routing(routing)     # one that is off (no AS, no OSPF link) adds none
    if snmp is not None:
        lines += _snmp(snmp.prefixes())
    return _HOST.replace("@management@\n", "".join(f"\t\t{line}\n" for line in lines))


def _snmp(prefixes):
    """SNMP's UDP from the configuration's prefixes, each family its line (none: none)."""
    lines = []
    for family, version in (("ip", 4), ("ip6", 6)):
        nets = [values.IPNetwork(p) for p in prefixes]
        nets = [nft.prefix(n) for n in nets if n.version == version]
        if nets:
            lines.append(f"{family} saddr {_set(nets)} udp dport {SNMP_PORT} accept "
                         'comment "tusk: SNMP from the allowed prefixes"')
    return lines


def _set(items):
    return f"{{ {', '.join(items)} }}"


def _routing(routing):
    """BGP (TCP to port 179) from each neighbour's address; single-hop BFD from those
    with BFD, and on the OSPF links with BFD, only with TTL 255 (RFC 5881's check, which
    keeps off any sender more than one hop away); OSPF on the links that form
    adjacencies (a passive link sends and hears none)."""
    lines = []
    bfd_ports = _set(str(port) for port in BFD_PORTS)
    neighbours = [(values.IPAddress(n.address), n.bfd) for n in routing.bgp.neighbours] \
        if routing.bgp.asn else []
    for family, ttl, version in (("ip", "ip ttl", 4), ("ip6", "ip6 hoplimit", 6)):
        peers = [(nft.address(ip), bfd) for ip, bfd in neighbours if ip.version == version]
        if peers:
            lines.append(f"{family} saddr {_set(p for p, _ in peers)} tcp dport {BGP_PORT} "
                         'accept comment "tusk: BGP from the neighbours"')
        watched = [p for p, bfd in peers if bfd]
        if watched:
            lines.append(f"{family} saddr {_set(watched)} {ttl} 255 udp dport {bfd_ports} "
                         'accept comment "tusk: BFD from the BGP neighbours"')
    links = [values.InterfaceName(link.interface) for link in routing.ospf
             if not link.passive]
    if links:
        lines.append(f"iifname {_set(nft.interface(i) for i in links)} meta l4proto {OSPF} "
                     'accept comment "tusk: OSPF on its links"')
    watched = [values.InterfaceName(link.interface) for link in routing.ospf
               if not link.passive and link.bfd]
    if watched:
        where = f"iifname {_set(nft.interface(i) for i in watched)}"
        lines += [f"{where} ip ttl 255 udp dport {bfd_ports} accept "
                  'comment "tusk: BFD of the OSPF neighbours"',
                  f"{where} ip6 hoplimit 255 udp dport {bfd_ports} accept "
                  'comment "tusk: BFD of the OSPF neighbours"']
    return lines


def lockdown():
    return _LOCKDOWN
