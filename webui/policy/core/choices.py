"""Every choice set of the policy model: the values the YAML file and the web forms accept."""

VERDICTS = ("accept", "drop", "reject")

# MSS clamping: leave the option alone (the FWSM lesson: no rewrite unless asked),
# clamp to a fixed value, or clamp to the path MTU of the route.
MSS_NONE = "none"
MSS_FIXED = "fixed"
MSS_PMTU = "pmtu"
MSS_MODES = (MSS_NONE, MSS_FIXED, MSS_PMTU)

OPTION_KEEP = "keep"
OPTION_STRIP = "strip"
OPTION_ACTIONS = (OPTION_KEEP, OPTION_STRIP)

# TCP options a class may strip, and the name nft gives each in `reset tcp option`.
TCP_OPTIONS = {
    "window_scale": "window",
    "sack_permitted": "sack-perm",
    "timestamps": "timestamp",
}

# Sequence-number randomisation through the kernel's seqrand conntrack helper:
# the initiator's sequence space only, or both directions. Each mode is a helper
# type the kernel registers.
SEQRAND_NONE = "none"
SEQRAND_INITIATOR = "initiator"
SEQRAND_BOTH = "both"
SEQRAND_MODES = (SEQRAND_NONE, SEQRAND_INITIATOR, SEQRAND_BOTH)
SEQRAND_HELPER_TYPES = {SEQRAND_INITIATOR: "seqrand", SEQRAND_BOTH: "seqrand-bi"}

# The flowtable fast path: established packets skip the forward chain and conntrack's
# per-packet work. always: a class's connections (TCP and UDP) from their first reply;
# auto: its TCP connections once they prove to be elephants (FASTPATH_AFTER bytes, both
# directions together); never: the slow path only. The default is auto for an accepting,
# tracked class that matches TCP, never for any other (normalise.py).
FASTPATH_ALWAYS = "always"
FASTPATH_AUTO = "auto"
FASTPATH_NEVER = "never"
FASTPATH_MODES = (FASTPATH_AUTO, FASTPATH_ALWAYS, FASTPATH_NEVER)

# Source NAT: the egress interface's own address (masquerade) or a given address/range.
TRANSLATE_MASQUERADE = "masquerade"
TRANSLATE_ADDRESS = "address"
TRANSLATE_MODES = (TRANSLATE_MASQUERADE, TRANSLATE_ADDRESS)

# A source NAT port range applies to these; other protocols get the address only.
SNAT_PORT_PROTOCOLS = ("tcp", "udp")
