"""What the target's kernel can do, asked the only way that is certain: nft -c.

nft -c hands the transaction to the kernel, which refuses object types it does not
have (a ct helper type nobody registered, a flowtable without NF_FLOW_TABLE) with
ENOENT. Each probe is a throw-away table checked, never loaded.
"""
from tusklib.formats import FormatRefused, nft
from tusklib.values import InterfaceName, Refused

from . import choices
from .errors import Code, PolicyError, Problem, on_target
from .fastpath import class_devices, fastpath_devices

_PROBE_TABLE = "tusk_probe"


def _probe(target, body):
    return target.nft_check(f"table inet {_PROBE_TABLE} {{\n{body}\n}}\n").ok


def has_bridge_conntrack(target):
    """Whether the kernel tracks bridged frames itself (CONFIG_NF_CONNTRACK_BRIDGE): what
    table bridge tusk_bridge's classes are built on."""
    return target.nft_check(f"table bridge {_PROBE_TABLE} {{\n chain c {{\n"
                            "  ct state established accept\n }\n}\n").ok


def has_helper(target, helper_type):
    return _probe(target, f'ct helper p {{\n type "{helper_type}" protocol tcp\n l3proto inet\n}}')


# The line Tusk's kernel adds to /proc/net/nf_conntrack_seqadj (kernel-patches/0027,
# the counters) where the flowtable's fast path translates sequence numbers (0015; 0016
# lets the seqrand helper's connections in): no nft object shows it.
SEQADJ_STATS = "/proc/net/nf_conntrack_seqadj"
FASTPATH_SEQADJ_LINE = "flowtable_packets_translated"


def has_fastpath_seqadj(target):
    """Whether the target's kernel carries connections with sequence adjustment (seqrand)
    on the flowtable's fast path, translating them there."""
    found = target.run(["cat", SEQADJ_STATS])
    return found.ok and any(line.split()[:1] == [FASTPATH_SEQADJ_LINE]
                            for line in found.stdout.splitlines())


def flowtable_refusals(target, devices):
    """None if a flowtable over all devices works, else the devices (or '*' for the kernel)
    that a flowtable cannot use."""
    def works(devs):
        listed = f"devices = {{ {', '.join(devs)} }}" if devs else ""
        return _probe(target, f"flowtable f {{\n hook ingress priority filter\n {listed}\n}}")
    if works(devices):
        return None
    if not works([]):
        return ["*"]
    return [d for d in devices if not works([d])]


def offloads(target, device):
    """Whether device's driver takes flowtable offload: the kernel asks the driver when a
    flowtable with "flags offload" is made over a device (nft -c too), and one that
    cannot (no hw-tc-offload, or a driver without flowtable offload) refuses. The name
    goes into the probe through nft's one quoting point; a name it refuses (one the
    kernel allows and nft cannot quote) cannot be in a policy either: no offload."""
    try:
        quoted = nft.interface(InterfaceName(device))
    except (Refused, FormatRefused):
        return False
    return _probe(target, f"flowtable f {{\n hook ingress priority filter\n"
                          f" devices = {{ {quoted} }}\n flags offload\n}}")


def check(policy, target):  # noqa: C901 - one probe per capability a class can use
    """Raises PolicyError naming each class (and zone interface) the target cannot serve."""
    problems = []
    with on_target():
        present = target.interfaces()
    for zi, zone in enumerate(policy.zones):
        for ii, ifname in enumerate(zone.interfaces):
            if ifname not in present:
                problems.append(Problem(Code.INTERFACE, f"zones[{zi}].interfaces[{ii}]",
                                        f"{ifname} does not exist on {target}"))
    if problems:
        raise PolicyError(problems)

    if policy.bridged_zones and not has_bridge_conntrack(target):
        for zi, zone in enumerate(policy.zones):
            if zone.bridged:
                problems.append(Problem(
                    Code.CAPABILITY, f"zones[{zi}].bridged",
                    f"zone {zone.name!r} is bridged, which needs the kernel's bridge "
                    f"conntrack (CONFIG_NF_CONNTRACK_BRIDGE, Tusk's kernel); {target} lacks "
                    "it"))
    helper_ok = {}
    for index, cls in enumerate(policy.classes):
        if cls.seqrand == choices.SEQRAND_NONE:
            continue
        helper = choices.SEQRAND_HELPER_TYPES[cls.seqrand]
        if helper not in helper_ok:
            helper_ok[helper] = has_helper(target, helper)
        if not helper_ok[helper]:
            problems.append(Problem(
                Code.CAPABILITY, f"classes[{index}].seqrand",
                f"class {cls.name!r} needs the kernel's {helper!r} conntrack helper "
                f"(CONFIG_NF_CONNTRACK_SEQRAND, Tusk's kernel), which {target} lacks"))

    fast = [(i, c) for i, c in enumerate(policy.classes) if c.always_fast]
    if fast:
        devices = fastpath_devices(policy, auto=False)
        refused = flowtable_refusals(target, [f'"{d}"' for d in devices])
        if refused:
            why = ("flowtables (CONFIG_NF_FLOW_TABLE), which the kernel of " f"{target} lacks"
                   if refused == ["*"] else
                   f"a flowtable over {', '.join(r.strip(chr(34)) for r in refused)}, "
                   "which those interfaces cannot carry")
            for index, cls in fast:
                problems.append(Problem(Code.CAPABILITY, f"classes[{index}].fastpath",
                                        f"class {cls.name!r} needs {why}"))
        randomised = [(i, c) for i, c in fast if c.seqrand != choices.SEQRAND_NONE]
        if randomised and not refused and not has_fastpath_seqadj(target):
            for index, cls in randomised:
                problems.append(Problem(
                    Code.CAPABILITY, f"classes[{index}].fastpath",
                    f"class {cls.name!r} randomises sequence numbers on the fast path, which "
                    f"needs a kernel whose flowtable translates them (Tusk's kernel: "
                    f"{FASTPATH_SEQADJ_LINE} in {SEQADJ_STATS}); {target} has none"))
    hardware = [(i, c) for i, c in enumerate(policy.classes) if c.in_hardware]
    if hardware and flowtable_refusals(target, []) is None:
        offload = {}            # device -> whether it offloads, asked once
        for index, cls in hardware:
            devices = sorted(class_devices(policy, cls))
            for device in devices:
                if device not in offload:
                    offload[device] = offloads(target, device)
            refused = [d for d in devices if not offload[d]]
            if refused:
                names = ", ".join(refused)
                problems.append(Problem(
                    Code.CAPABILITY, f"classes[{index}].hardware",
                    f"class {cls.name!r} lets hardware carry its connections, and the driver "
                    f"of {names} on {target} offers no flowtable offload (ethtool -k: "
                    "hw-tc-offload)"))
    if problems:
        raise PolicyError(problems)


def auto_fastpath(policy, target):
    """Whether fastpath: auto classes get the flowtable on target: its kernel has
    flowtables and they can carry every interface the fast path spans. Where not, those
    classes stay on the slow path (render(flowtable=False)) - nothing is refused, and the
    revision says so (applier.py)."""
    if not any(c.auto_fast for c in policy.classes):
        return True
    devices = fastpath_devices(policy)
    return flowtable_refusals(target, [f'"{d}"' for d in devices]) is None


def report(target):
    """What the kernel offers, for display: name -> bool."""
    found = {f"{h} helper": has_helper(target, h) for h in choices.SEQRAND_HELPER_TYPES.values()}
    found["flowtable"] = flowtable_refusals(target, []) is None
    found["bridge conntrack"] = has_bridge_conntrack(target)
    found["seqrand on the fast path"] = has_fastpath_seqadj(target)
    with on_target():
        devices = sorted(target.interfaces() - {"lo"})
    for device in devices:
        found[f"hardware offload on {device}"] = offloads(target, device)
    return found
