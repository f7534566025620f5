"""The bridges' `bpdu = "drop"` (docs/NETWORK.md, "Spanning tree and loops"): a bridge
without spanning tree forwards the switches' BPDUs (Linux does, and the policy's table
lets them pass); where the operator keeps each side's spanning tree to itself, table
bridge tusk_bpdu drops them on those bridges' ports, a base chain before the policy's
(a drop in any chain is final). Rendered from the model alone, names through nft's one
quoting point; both backends load it at the end of an apply (networkd.py, iproute2.py),
and with no such bridge the table goes.

    render(config) -> the nft script that replaces the table (or only deletes it)
    load(target, config) -> [line]   render()'s script loaded on a tusklib Target
"""
from tusklib import values
from tusklib.formats import FormatRefused, nft
from tusklib.names import BPDU_TABLE, BRIDGE_FAMILY

from . import model
from .errors import Code, NetworkError

# the Bridge Group Address 802.1D's BPDUs are sent to
STP_ADDRESS = "01:80:c2:00:00:00"
HEAD = (f"table {BRIDGE_FAMILY} {BPDU_TABLE}\ndelete table {BRIDGE_FAMILY} {BPDU_TABLE}\n")


def dropping(config):
    """[(index in bridges, bridge)] of the bridges whose BPDUs are dropped."""
    return [(index, bridge) for index, bridge in enumerate(config.bridges)
            if bridge.bpdu == model.BPDU_DROP and bridge.stp is not True]


def render(config):
    lines = []
    for index, bridge in dropping(config):
        try:
            ports = ", ".join(nft.interface(values.InterfaceName(member))
                              for member in bridge.members)
        except (values.Refused, FormatRefused) as refused:
            raise NetworkError(Code.VALUE, f"bridges[{index}]", str(refused)) from None
        lines.append(f"\t\tiifname {{ {ports} }} ether daddr {STP_ADDRESS} counter drop "
                     f'comment "tusk: bridges[{index}] bpdu drop"')
    if not lines:
        return HEAD
    return (HEAD + f"table {BRIDGE_FAMILY} {BPDU_TABLE} {{\n\tchain forward {{\n"
            "\t\ttype filter hook forward priority filter - 1; policy accept;\n"
            + "\n".join(lines) + "\n\t}\n}\n")


def load(target, config):
    """The table as config wants it, on target: what the backends' apply says of it, or
    NetworkError(APPLY) when nft refuses (the applier then applies the previous
    configuration the same way)."""
    result = target.nft_load(render(config))
    if not result.ok:
        raise NetworkError(Code.APPLY, "bridges", f"nft refused the BPDU drop on {target}: "
                           f"{result.stderr.strip()}")
    names = [bridge.name for _, bridge in dropping(config)]
    return [f"BPDUs dropped on {', '.join(names)}"] if names else []
