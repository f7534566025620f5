"""Every choice set of the Logs page."""

# the verdicts a log prefix names (tusk:<verdict>:<class>)
VERDICTS = ("accept", "drop", "reject")

# the protocols a record can be filtered by: IP protocol numbers, by name
PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "sctp": 132, "udplite": 136,
             "gre": 47, "esp": 50, "ah": 51}
PROTOCOL_NAMES = {number: name for name, number in PROTOCOLS.items()}

# how the forwarder reaches a remote syslog receiver
TRANSPORTS = ("udp", "tcp")
