"""The tools page's arithmetic, plain functions (tested without Django).

TCP window: a single flow can carry at most one window per round trip, so it needs
a window of bandwidth x RTT (the bandwidth-delay product) to fill the path, and a
window above 65 535 bytes needs the window-scale option (RFC 7323) with shift
ceil(log2(window / 65535)), at most 14 - which is why stripping that option caps
an elephant flow at 65 535 bytes per RTT.

PCIe slot: lanes x transfer rate x encoding efficiency per direction (8b/10b for
generations 1 and 2, 128b/130b for 3 to 5), before TLP/DLLP protocol overhead,
which costs another 10-20 % in practice (the BSD tuning notes).
"""
import math

MAX_WINDOW_UNSCALED = 65535
MAX_SHIFT = 14
PCIE = {  # generation: (GT/s per lane, encoding efficiency)
    1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
}
LANES = (1, 2, 4, 8, 16)


def bdp_bytes(bandwidth_bps, rtt_s):
    return bandwidth_bps * rtt_s / 8


def window_shift(window_bytes):
    """The window-scale shift a window needs (0 when it fits 16 bits), or None when
    even the largest shift (14: 1 GiB) is not enough."""
    if window_bytes <= MAX_WINDOW_UNSCALED:
        return 0
    shift = math.ceil(math.log2(window_bytes / MAX_WINDOW_UNSCALED))
    return shift if shift <= MAX_SHIFT else None


def window_cap_bps(window_bytes, rtt_s):
    """The most one flow with this window can carry over this RTT."""
    return window_bytes * 8 / rtt_s


def pcie_bps(generation, lanes):
    """Usable bandwidth of a slot in each direction, bit/s, before protocol overhead."""
    rate, efficiency = PCIE[generation]
    return rate * 1e9 * efficiency * lanes
