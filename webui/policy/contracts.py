"""What the policy's agent tasks keep for the pages (tusklib/contracts.py)."""

# policy.capabilities: what the target's kernel offers, name -> present
# (core/capabilities.report: "ipv4-tcp-seqrand helper", "flowtable", ...)
Capabilities = dict[str, bool]
