"""The fast path's flowtables: which interfaces they span, the one writer of their
lines, and the hardware fast path's table.

Two flowtables, one per table, because the kernel lets an interface be in one
flowtable of a table: `fastpath` in table tusk (software) for the fast-path classes,
and `hardware` ("flags offload") in table tusk_offload for the classes with
`hardware: true`, whose connections the NIC may then carry. Both can span the same
interfaces. Table tusk's forward chain decides (the classes, the default deny) and
puts the software classes' connections in `fastpath`; tusk_offload's forward chain,
one priority later, sees only what tusk accepted and puts the hardware classes'
connections in `hardware`, found by the class ordinal in the ct mark. A hardware
class's mark has no fast-path bit, so table tusk never takes its connections.
"""
import re

from tusklib.names import CT_MARK_CLASS_MASK, CT_MARK_CLASS_SHIFT, FAMILY, OFFLOAD_TABLE, TABLE

FLOWTABLE = "fastpath"
HW_FLOWTABLE = "hardware"
# flowtable name -> the table it is in
TABLE_OF = {FLOWTABLE: TABLE, HW_FLOWTABLE: OFFLOAD_TABLE}


def class_devices(policy, cls):
    """Interfaces of the zones a class connects (all routed zones for 'any': a bridge's
    frames never take the flowtable)."""
    devices = set()
    for zone in (cls.from_zone, cls.to_zone):
        for z in [policy.zone[zone]] if zone else policy.zones:
            if zone or not z.bridged:
                devices.update(z.interfaces)
    return devices


def fastpath_devices(policy, auto=True, hardware=False):
    """Interfaces of the zones that fast-path classes connect: the always classes', and
    with auto the auto classes' too; those of the software flowtable's classes, or with
    hardware those of the hardware flowtable's."""
    devices = set()
    for cls in policy.classes:
        if (cls.always_fast or (auto and cls.auto_fast)) and cls.in_hardware == hardware:
            devices |= class_devices(policy, cls)
    return sorted(devices)


def flowtable_block(head, devices, offload=False):
    """A fast path's flowtable: the one writer of its lines, in a ruleset and when
    devices are added to the live one (attach_fastpath_devices). counter: the flowtable
    adds the packets it forwards (the NIC's too, read back every second) to conntrack's
    accounting, so a promoted connection's bytes (the Flows page, a class's totals
    through the ct mark) go on growing. The kernel takes a flowtable without devices
    (they are added when they appear)."""
    lines = [f"{head} {{", "\thook ingress priority filter"]
    if devices:
        lines.append(f"\tdevices = {{ {', '.join(f'{chr(34)}{d}{chr(34)}' for d in devices)} }}")
    if offload:
        lines.append("\tflags offload")
    return lines + ["\tcounter", "}"]


def _block_re(name):
    return re.compile(rf"^\tflowtable {name} {{\n(?:\t\t[^\n]*\n)*?\t}}\n", re.MULTILINE)


_BLOCK_RE = {name: _block_re(name) for name in TABLE_OF}
_DEVICES_RE = re.compile(r'^\t\tdevices = \{ ((?:"[^"\n]+"(?:, )?)+) \}$', re.MULTILINE)


def ruleset_fastpath_devices(ruleset, name=FLOWTABLE):
    """The devices of flowtable name in a ruleset render() made (a stored revision's,
    of this release or one before), in its order; [] without that flowtable."""
    block = _BLOCK_RE[name].search(ruleset)
    found = _DEVICES_RE.search(block.group(0)) if block else None
    return re.findall(r'"([^"]+)"', found.group(1)) if found else []


def with_fastpath_devices(ruleset, devices, name=FLOWTABLE):
    """ruleset with flowtable name over devices only: what can be loaded while some of
    its interfaces do not exist yet (a VLAN or a bond networkd makes after the firewall
    loaded the policy at boot). The kernel refuses a flowtable over a missing device;
    the agent adds each once it appears (fastpath_addition)."""
    block = _BLOCK_RE[name].search(ruleset)
    if block is None:
        return ruleset
    offload = "\n\t\tflags offload\n" in block.group(0)
    lines = "".join(f"\t{line}\n" for line in flowtable_block(f"flowtable {name}", devices,
                                                                offload))
    return ruleset[:block.start()] + lines + ruleset[block.end():]


def fastpath_addition(devices, name=FLOWTABLE):
    """The nft script that adds devices to the live flowtable name (the same hook,
    priority and flags: the kernel refuses an update that changes them)."""
    return "\n".join(flowtable_block(f"add flowtable {FAMILY} {TABLE_OF[name]} {name}",
                                      devices, offload=name == HW_FLOWTABLE)) + "\n"


def _marks(classes):
    marks = [f"0x{(index + 1) << CT_MARK_CLASS_SHIFT:08x}" for index, _ in classes]
    return f"== {marks[0]}" if len(marks) == 1 else f"{{ {', '.join(marks)} }}"


def _names(classes):
    names = ", ".join(cls.name for _, cls in classes)
    return (f"classes[{classes[0][0]}] {names}" if len(classes) == 1 else
            names if len(names) <= 60 else f"{len(classes)} classes")


def offload_table(policy, auto=True):
    """The hardware fast path's table (the lines after table tusk's in a ruleset): always
    deleted and made again, so that a policy without hardware classes removes the one
    before it; its flowtable and forward chain only where classes have hardware: true.
    Its forward chain accepts everything (table tusk decided) and puts the always
    classes' connections in the hardware flowtable at once, the auto classes' TCP ones
    past their fastpath_after bytes."""
    head = [f"table {FAMILY} {OFFLOAD_TABLE}", f"delete table {FAMILY} {OFFLOAD_TABLE}"]
    devices = fastpath_devices(policy, auto, hardware=True)
    if not devices:
        return head
    always, after = [], {}
    for index, cls in enumerate(policy.classes):
        if cls.in_hardware and cls.always_fast:
            always.append((index, cls))
        elif cls.in_hardware and auto and cls.auto_fast:
            after.setdefault(cls.fastpath_after, []).append((index, cls))
    mask = f"ct mark and 0x{CT_MARK_CLASS_MASK:08x}"
    rules = []
    if always:
        comment = f"tusk: hardware fast path of {_names(always)}"
        rules.append(f"meta l4proto {{ tcp, udp }} {mask} {_marks(always)} flow add "
                     f'@{HW_FLOWTABLE} comment "{comment[:128]}"')
    for threshold, classes in sorted(after.items()):
        comment = (f"tusk: elephants of {_names(classes)} to the hardware fast path after "
                   f"{threshold} bytes")
        rules.append(f"meta l4proto tcp {mask} {_marks(classes)} ct bytes > {threshold} "
                     f'flow add @{HW_FLOWTABLE} comment "{comment[:128]}"')
    return head + [f"table {FAMILY} {OFFLOAD_TABLE} {{"] + [
        f"\t{line}" for line in flowtable_block(f"flowtable {HW_FLOWTABLE}", devices,
                                                offload=True)] + [
        "\tchain forward {",
        "\t\ttype filter hook forward priority filter + 1; policy accept;",
        *(f"\t\t{rule}" for rule in rules),
        "\t}",
        "}"]
