"""Every limit of the policy model, shared by validation, the CLI and the web forms."""

POLICY_VERSION = 1

# The nftables tables Tusk owns, all of family inet (one table for IPv4 and IPv6): the
# policy's (render.py), the firewall's own input and the lockdown table that stands in
# for it when the kernel refuses it (render_boot.py, loaded by tusk-boot).
FAMILY = "inet"
TABLE = "tusk"
HOST_TABLE = "tusk_host"
LOCKDOWN_TABLE = "tusk_lockdown"

# Object names become parts of nft chain/set names: keep them short, lower case and
# free of characters nft would need quoted. 'tusk' prefixes keep them off nft keywords.
NAME_MAX = 32
NAME_PATTERN = rf"^[a-z][a-z0-9_-]{{0,{NAME_MAX - 1}}}$"

# Linux IFNAMSIZ is 16 including the NUL.
IFNAME_MAX = 15
# Linux refuses "/", ":" and white space (dev_valid_name()); "." and ".." too.
IFNAME_PATTERN = rf"^[A-Za-z0-9_.@+-]{{1,{IFNAME_MAX}}}$"

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

# ct mark layout owned by Tusk: the low 16 bits carry the TCP profile of the class
# that accepted the connection (so the reply SYN/ACK gets the same treatment),
# bit 16 marks connections for the flowtable fast path. Bits 17-31 are left alone.
CT_MARK_PROFILE_MASK = 0x0000FFFF
CT_MARK_FASTPATH_BIT = 0x00010000
CT_MARK_TUSK_MASK = CT_MARK_PROFILE_MASK | CT_MARK_FASTPATH_BIT
MAX_TCP_PROFILES = CT_MARK_PROFILE_MASK

# Protocols a service may name. Ports only make sense for the first group.
PORT_PROTOCOLS = ("tcp", "udp", "sctp", "udplite")
PORTLESS_PROTOCOLS = ("icmp", "icmpv6", "gre", "esp", "ah")
