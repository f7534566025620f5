"""Every limit of the policy model, shared by validation, the CLI and the web forms."""

POLICY_VERSION = 1

# The nftables tables Tusk owns, all of family inet (one table for IPv4 and IPv6): the
# policy's (render.py), the firewall's own input and the lockdown table that stands in
# for it when the kernel refuses it (render_boot.py, loaded by tusk-boot).
FAMILY = "inet"
TABLE = "tusk"
HOST_TABLE = "tusk_host"
LOCKDOWN_TABLE = "tusk_lockdown"
# The hardware fast path's table (render.py): a flowtable with "flags offload" over
# the interfaces of the classes that let hardware carry their connections. A table of
# its own because the kernel lets an interface be in one flowtable per table, and the
# other fast-path classes keep the software flowtable of table tusk over the same ones.
OFFLOAD_TABLE = "tusk_offload"

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

# RFC 879 default 536 is a sane floor; 65535 is what the 16-bit option can carry.
MSS_MIN = 536
MSS_MAX = 65535

CONFIRM_TIMEOUT_DEFAULT = 120
CONFIRM_TIMEOUT_MIN = 10
CONFIRM_TIMEOUT_MAX = 3600
# A policy file's largest size: the import form's limit and the agent's (nginx: 17m)
POLICY_MAX_BYTES = 16 * 1024 * 1024

COMMENT_MAX = 128

# fastpath: auto promotes a TCP connection once it carried this many bytes (both
# directions, conntrack's accounting): 1 MB, about 700 full segments. Below it, a flow is
# a mouse the slow path serves as well; past it, every packet it skips the forward chain
# for is a gain. Settable per class (fastpath_after), 0 (at once) up to 1 TB.
FASTPATH_AFTER_DEFAULT = 1_000_000
FASTPATH_AFTER_MAX = 10 ** 12

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

# Logging: every log rule sends to this NFLOG group (ulogd reads it) with the prefix
# tusk:<verdict>:<class> (LOG_PREFIX; the default deny: tusk:drop: with an empty class),
# all through one named limit object, so a flood of logged packets costs at most
# log_rate messages a second whatever the number of classes that log; the burst is
# LOG_BURST_FACTOR times the rate.
LOG_GROUP = 1
LOG_PREFIX = "tusk:{verdict}:{cls}"
LOG_LIMIT = "log_rate"
LOG_RATE_DEFAULT = 50
LOG_RATE_MIN = 1
LOG_RATE_MAX = 1000
LOG_BURST_FACTOR = 2
LOG_DEFAULT_DENY_DEFAULT = True

# A forward whose to_ports is a range maps port by port (8000 -> 9000, 8001 -> 9001,
# ...): nftables has no shifted range, so the rule carries one map element per port.
PORT_SHIFT_MAX = 1024

# Protocols a service may name. Ports only make sense for the first group.
PORT_PROTOCOLS = ("tcp", "udp", "sctp", "udplite")
PORTLESS_PROTOCOLS = ("icmp", "icmpv6", "gre", "esp", "ah")
