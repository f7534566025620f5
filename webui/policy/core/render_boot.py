"""Render for the tables tusk-boot loads before any interface is up (appliance/boot.py).
Pure and deterministic like render(); the skeletons live next to ruleset.nft.in, this
module emits the management interface's rule lines. Golden cases: tests/golden/boot/.

failsafe()        table inet tusk, forward: drop - what runs while no confirmed policy
                  is loaded (at boot, and after the first apply on a new box rolls back)
host(management, ha)
                  table inet tusk_host - what may reach the firewall itself: the
                  management ports on the management interface only; with none (None),
                  on none; with ha (an HA pair's ha.core.config.HaConfig), VRRP on its
                  segments and conntrackd's sync from the peer on the sync link
lockdown()        table inet tusk_lockdown - all input but loopback dropped: what
                  stands in when the kernel refuses the host table
"""
from tusklib import values
from tusklib.formats import nft

# The management interface answers on HTTPS, and HTTP, which redirects. No SSH: no SSH
# server ships (the console and the dashboard are the ways in, and one daemon fewer is
# one fewer to keep safe), so port 22 stays closed.
from tusklib.names import HA_PEER_PORT, HA_SYNC_PORT, MGMT_TCP_PORTS, VRRP

from .render import skeleton

_FAILSAFE = skeleton("failsafe.nft.in")
_HOST = skeleton("host.nft.in")
_LOCKDOWN = skeleton("lockdown.nft.in")


def failsafe():
    return _FAILSAFE


def host(management, ha=None):
    """management: the management interface (checked by tusk-net's rules), or None. ha:
    an enabled pair's checked configuration, or None. Names and addresses go through
    nft's one quoting point (tusklib/formats/nft.py) as typed values."""
    lines = []
    if management:
        where = f"iifname {nft.interface(values.InterfaceName(management))}"
        ports = ", ".join(str(port) for port in MGMT_TCP_PORTS)
        lines = [f'{where} tcp dport {{ {ports} }} accept comment "tusk: management"',
                 f'{where} udp sport 67 udp dport 68 accept comment "tusk: DHCP replies"',
                 f'{where} udp sport 547 udp dport 546 accept comment "tusk: DHCPv6 replies"']
    if ha is not None:
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
    return _HOST.replace("@management@\n", "".join(f"\t\t{line}\n" for line in lines))


def lockdown():
    return _LOCKDOWN
