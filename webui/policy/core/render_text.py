"""The pieces of nft text every part of the policy's renderer writes: the address
families' names, a comment (a class's), a named set and a named verdict map."""

FAMILIES = {"ipv4": ("ip", "v4"), "ipv6": ("ip6", "v6")}   # family -> (nft's, name suffix)
L4PROTO = {"icmpv6": "ipv6-icmp"}                             # nft's name where it differs


def nft_comment(text):
    return f'comment "{text[:128]}"'


def named_set(name, type_, elements, interval=True):
    lines = [f"\tset {name} {{", f"\t\ttype {type_}"]
    if interval:
        lines.append("\t\tflags interval")
    lines.append(f"\t\telements = {{ {', '.join(elements)} }}")
    lines.append("\t}")
    return lines


def verdict_map(name, type_, elements, interval=True):
    """A named verdict map, an element ("key : verdict") a line."""
    lines = [f"\tmap {name} {{", f"\t\ttype {type_} : verdict"]
    if interval:
        lines.append("\t\tflags interval")
    return lines + ["\t\telements = {", ",\n".join(f"\t\t\t{e}" for e in elements),
                    "\t\t}", "\t}"]


def class_comment(index, cls):
    return f"tusk: classes[{index}] {cls.name}"


def zone_keys(zone):
    """A zone of VLANs' set elements: each port with each VLAN id."""
    return [f'"{i}" . {vid}' for i in zone.interfaces for vid in zone.vlans]
