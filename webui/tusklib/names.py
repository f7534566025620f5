"""Names and numbers more than one domain of Tusk relies on: the nftables tables Tusk owns,
the rule for object and interface names, the conntrack mark's layout, and the ports the
host table opens for the dashboard and an HA pair. The policy engine renders them; network,
HA, flows, metrics and the appliance read them here, below all of them.
"""

# The nftables tables Tusk owns, all of family inet (one table for IPv4 and IPv6): the
# policy's (render.py), the firewall's own input and the lockdown table that stands in
# for it when the kernel refuses it (policy/core/render_boot.py, loaded by tusk-boot).
FAMILY = "inet"
TABLE = "tusk"
HOST_TABLE = "tusk_host"
LOCKDOWN_TABLE = "tusk_lockdown"
# The hardware fast path's table (render.py): a flowtable with "flags offload" over
# the interfaces of the classes that let hardware carry their connections. A table of
# its own because the kernel lets an interface be in one flowtable per table, and the
# other fast-path classes keep the software flowtable of table tusk over the same ones.
OFFLOAD_TABLE = "tusk_offload"
# The transparent bridge mode's table (render.py): the policy's classes between bridged
# zones, in family bridge - bridged frames never reach family inet's hooks (no
# br_netfilter: docs/NETWORK.md). Rendered with every policy, with no bridged zone a
# forward chain that drops all: a bridge fails closed.
BRIDGE_FAMILY = "bridge"
BRIDGE_TABLE = "tusk_bridge"
# The network's bpdu = "drop" (network/core/bpdu.py): the switches' BPDUs dropped on those
# bridges' ports, before the policy's table lets them pass.
BPDU_TABLE = "tusk_bpdu"
# The IDS hook's table (flows/core/hook.py): its sets of blocked and bypassed addresses
# and connections, with timeouts. A table of its own because the policy's is replaced
# whole by every apply, and these entries must outlive an apply (but not a reboot).
HOOK_TABLE = "tusk_hook"

# An 802.1Q VLAN id (0 and 4095 are reserved): a network's VLAN link or a VLAN-aware
# bridge's VLAN, and a bridged zone's VLANs in the policy.
VLAN_ID_MIN, VLAN_ID_MAX = 1, 4094
# The VLAN a VLAN-aware bridge gives untagged frames (its ports' PVID).
DEFAULT_VLAN = 1

# Object names become parts of nft chain/set names: keep them short, lower case and
# free of characters nft would need quoted. 'tusk' prefixes keep them off nft keywords.
# The patterns match whole text only (\Z, not $: "$" also matches before a final line
# break, and "inside\n" passed until nft -c refused it), with re.match, re.search and
# re.fullmatch alike; NAME_BODY is the name without anchors, to build other patterns from.
NAME_MAX = 32
NAME_BODY = rf"[a-z][a-z0-9_-]{{0,{NAME_MAX - 1}}}"
NAME_PATTERN = rf"^{NAME_BODY}\Z"

# Linux IFNAMSIZ is 16 including the NUL.
IFNAME_MAX = 15
# Linux refuses "/", ":" and white space (dev_valid_name()); "." and ".." too.
IFNAME_PATTERN = rf"^[A-Za-z0-9_.@+-]{{1,{IFNAME_MAX}}}\Z"

PORT_MIN = 1
PORT_MAX = 65535

# ct mark layout: Tusk owns all 32 bits, and a class writes them all at once when it
# accepts a connection (ct mark set <value>). The low 16 bits carry the TCP profile of
# the class (so the reply SYN/ACK gets the same treatment), bit 16 marks connections
# for the flowtable fast path, bits 17-31 the 1-based ordinal of the class in the
# policy (classes[i] is i + 1; 0: no class - untracked, or accepted before any class,
# such as related traffic of another connection's helper). Live flows read the class
# from there, so the number of classes is limited to what 15 bits hold.
CT_MARK_PROFILE_MASK = 0x0000FFFF
CT_MARK_FASTPATH_BIT = 0x00010000
CT_MARK_CLASS_SHIFT = 17
CT_MARK_CLASS_MASK = 0xFFFE0000
MAX_TCP_PROFILES = CT_MARK_PROFILE_MASK
MAX_CLASSES = CT_MARK_CLASS_MASK >> CT_MARK_CLASS_SHIFT

# The packet mark (meta mark) bit a hairpin forward's DNAT sets on the first packet of
# a reflected connection, so nat_postrouting masquerades exactly those. Nothing else in
# Tusk sets or reads the packet mark (no policy routing by fwmark, no ct mark copied
# into it); it lives only as long as that packet, between prerouting and postrouting.
META_MARK_HAIRPIN_BIT = 0x00000001

# The box's own ports the host table opens (policy/core/render_boot.py): the dashboard on
# the management interface, and an HA pair's VRRP, state sync and peer agent on theirs.
MGMT_TCP_PORTS = (80, 443)
VRRP = 112            # IP protocol number (keepalived's advertisements)
HA_SYNC_PORT = 3780   # conntrackd's UDP (ha/core/render.py)
HA_PEER_PORT = 3781   # the peer's agent: status and configuration (ha/core/peer.py)
# a cluster's conntrackd multicast group (administratively scoped, RFC 2365), on UDP
# HA_SYNC_PORT (docs/SCALE.md)
CLUSTER_GROUP = "239.255.37.80"
# and routing's, from its neighbours (network/core/frr.py): BGP's TCP, single-hop BFD's
# control and echo (RFC 5881: sent with TTL 255, a packet with less is refused), OSPF's
# IP protocol (v2 and v3 alike)
BGP_PORT = 179
# SNMP's agent (snmpd, snmp/core/render.py), from the configuration's prefixes
SNMP_PORT = 161
BFD_PORTS = (3784, 3785)
OSPF = 89
