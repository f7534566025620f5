"""Every limit of the policy model, shared by validation, the CLI and the web forms. The
names other domains rely on too (tables, the ct mark, name rules) are tusklib/names.py."""

POLICY_VERSION = 1

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
