"""The machine's physical Ethernet ports as /sys/class/net shows them: what the console,
tusk-net and the networkd backend under a test root offer as ports."""
import dataclasses
import os
import re

SYSFS_NET = "/sys/class/net"
ARPHRD_ETHER = "1"
# Interfaces with a device behind them that are still not Ethernet ports (uevent DEVTYPE)
NOT_ETHERNET = {"wlan", "wwan", "bridge", "bond", "vlan", "team"}


@dataclasses.dataclass(frozen=True)
class Nic:
    """A physical Ethernet interface found in /sys/class/net."""
    name: str
    mac: str
    link: str        # "up" (carrier), "down" (no carrier) or the operstate when unknown
    driver: str


def read_text(path):
    """A small file's text, stripped; None when it cannot be read (the carrier of an
    interface that is down: EINVAL)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def natural(name):
    """enp0s2 < enp0s10, eth2 < eth10: numbers compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name) if part]


def detect_interfaces(sysfs=SYSFS_NET):
    """The physical Ethernet interfaces (type 1, a device behind them, not Wi-Fi, a bridge
    or a bond), by name with numbers in order."""
    nics = []
    try:
        names = os.listdir(sysfs)
    except OSError:
        return []
    for name in names:
        base = os.path.join(sysfs, name)
        if name == "lo" or read_text(f"{base}/type") != ARPHRD_ETHER:
            continue
        if not os.path.exists(f"{base}/device"):
            continue   # veth, bridges, tunnels, dummies: no hardware behind them
        if any(os.path.exists(f"{base}/{d}") for d in ("wireless", "phy80211", "bridge",
                                                        "bonding")):
            continue
        uevent = read_text(f"{base}/uevent") or ""
        devtype = dict(line.split("=", 1) for line in uevent.splitlines() if "=" in line)
        if devtype.get("DEVTYPE") in NOT_ETHERNET:
            continue
        carrier = read_text(f"{base}/carrier")
        link = {"1": "up", "0": "down"}.get(carrier) or read_text(f"{base}/operstate") \
            or "unknown"
        driver = os.path.basename(os.path.realpath(f"{base}/device/driver")) \
            if os.path.exists(f"{base}/device/driver") else ""
        nics.append(Nic(name, read_text(f"{base}/address") or "", link, driver))
    return sorted(nics, key=lambda nic: natural(nic.name))
