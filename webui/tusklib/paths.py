"""The MTU along the policy's paths: a rule of three domains (the policy's classes open the
paths, the network configuration and tusk-tune set the MTUs), so it lives below all
three, on plain data. A path is (class name, interfaces in, interfaces out, whether the
class clamps MSS); box/paths.py makes them from a policy.
"""


def path_mtu_warnings(paths, mtu_of):
    """The one wording of the MTU warning, for the Network pages and tusk-tune's plan.
    mtu_of(interface): the MTU it will have, None when unknown (then no warning)."""
    warnings = []
    for name, inside, outside, clamped in paths:
        if clamped:
            continue
        for a in inside:
            for b in outside:
                mtu_a, mtu_b = mtu_of(a), mtu_of(b)
                if mtu_a is None or mtu_b is None or mtu_a == mtu_b:
                    continue
                big, small = (a, b) if mtu_a > mtu_b else (b, a)
                warnings.append(f"class {name}: {a} (MTU {mtu_a}) -> {b} (MTU {mtu_b}): "
                                f"segments sized for {big} must be cut down to {small}'s "
                                "by path MTU discovery; set the class's MSS clamp to "
                                "pmtu, or the same MTU on both")
    return warnings
