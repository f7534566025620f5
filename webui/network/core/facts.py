"""The machine's live network, read through a tusklib.target.Target (the host, or the
lab's fw namespace): its Ethernet ports with their facts, and its links, addresses and
routes (table main, IPv4 and IPv6) as `ip -j` reports them.

    ports(target)     -> {name: Port}   the Ethernet ports the operator can configure
    snapshot(target)  -> Live            its links, addresses and routes

Each reader runs the commands and hands their text to a parse_* function, which is pure
(text -> objects): the unit tests feed those recorded output.
"""
import ipaddress
import json
from dataclasses import dataclass

from .errors import Code, NetworkError

DEFAULT_ROUTE = "default"
IPV6_USER_METRIC = 1024   # the kernel's metric for an IPv6 route added with metric 0


@dataclass(frozen=True)
class Port:
    """An Ethernet port as the machine has it now."""
    name: str
    mac: str = ""
    link: str = "down"        # "up" when the port has a carrier
    speed: int | None = None  # Mbit/s; None when the driver does not know (no link, virtual)
    duplex: str | None = None
    driver: str = ""
    mtu: int = 0
    min_mtu: int | None = None
    max_mtu: int | None = None
    pci: str = ""             # the PCI function, 0000:01:00.0, when the port is on PCI


@dataclass(frozen=True)
class Link:
    """Any link: a port, a bond, a VLAN, a bridge, ..."""
    name: str
    kind: str = ""            # linkinfo's kind: "" for hardware, veth, vlan, bond, ...
    up: bool = False          # administratively up (the UP flag)
    carrier: bool = False
    mtu: int = 0
    master: str = ""          # the bond (or bridge) it is enslaved to
    alias: str = ""           # ifalias; "tusk" on the links Tusk created
    parent: str = ""          # a VLAN's lower link
    vlan_id: int = 0
    bond_mode: str = ""
    hash_policy: str = ""
    stp: bool = False         # a bridge's spanning tree (stp_state not 0)
    vlan_filtering: bool = False   # a VLAN-aware bridge
    mac: str = ""
    link_type: str = ""       # ether, loopback, none, ...
    min_mtu: int | None = None
    max_mtu: int | None = None
    pci: str = ""


@dataclass(frozen=True)
class Address:
    interface: str
    address: str              # "192.0.2.1/24", "2001:db8::1/64"
    scope: str = "global"
    dynamic: bool = False     # from DHCP or router advertisements (it has a lifetime)


@dataclass(frozen=True)
class Route:
    destination: str          # "default" or a prefix, always with its length
    gateway: str = ""
    interface: str = ""
    metric: int = 0
    protocol: str = ""        # kernel, static, dhcp, ra, boot, ...
    family: int = 4

    @property
    def network(self):
        if self.destination == DEFAULT_ROUTE:
            return ipaddress.ip_network("::/0" if self.family == 6 else "0.0.0.0/0")
        return ipaddress.ip_network(self.destination)


@dataclass(frozen=True)
class Live:
    links: tuple = ()
    addresses: tuple = ()
    routes: tuple = ()
    bridge_vlans: tuple = ()  # (port, frozenset of VLAN ids) of every bridge port

    def link(self, name):
        return next((link for link in self.links if link.name == name), None)


# -- parsing (pure) -------------------------------------------------------------------------

def _json(text, what):
    try:
        data = json.loads(text or "[]")
    except ValueError as exc:
        raise NetworkError(Code.APPLY, "", f"cannot read {what}: {exc}") from None
    return data if isinstance(data, list) else []


def parse_links(text):
    """`ip -j -d link show` -> [Link]."""
    links = []
    for item in _json(text, "ip link's output"):
        info = item.get("linkinfo") or {}
        data = info.get("info_data") or {}
        kind = info.get("info_kind", "")
        flags = item.get("flags", [])
        links.append(Link(
            name=item["ifname"], kind=kind, up="UP" in flags, carrier="LOWER_UP" in flags,
            mtu=item.get("mtu", 0), master=item.get("master", ""),
            alias=item.get("ifalias", ""),
            parent=item.get("link", "") if kind == "vlan" else "",
            vlan_id=data.get("id", 0) if kind == "vlan" else 0,
            bond_mode=data.get("mode", "") if kind == "bond" else "",
            hash_policy=data.get("xmit_hash_policy", "") if kind == "bond" else "",
            stp=bool(data.get("stp_state")) if kind == "bridge" else False,
            vlan_filtering=bool(data.get("vlan_filtering")) if kind == "bridge" else False,
            mac=item.get("address", ""), link_type=item.get("link_type", ""),
            # 0 from drivers that set no limits (the loopback): unknown
            min_mtu=item.get("min_mtu") or None, max_mtu=item.get("max_mtu") or None,
            pci=item.get("parentdev", "") if item.get("parentbus") == "pci" else ""))
    return links


def parse_addresses(text):
    """`ip -j addr show` -> [Address] (IPv4 and IPv6, every scope)."""
    found = []
    for item in _json(text, "ip addr's output"):
        for info in item.get("addr_info", []):
            if info.get("family") not in ("inet", "inet6"):
                continue
            found.append(Address(
                interface=item["ifname"], address=f"{info['local']}/{info['prefixlen']}",
                scope=info.get("scope", "global"),
                dynamic=bool(info.get("dynamic")) or
                info.get("valid_life_time", 0xFFFFFFFF) != 0xFFFFFFFF))
    return found


def parse_routes(text, family):
    """`ip [-6] -j route show table main` -> [Route] of the unicast routes through one
    interface (multipath and unreachable-type routes are not Tusk's to manage)."""
    found = []
    for item in _json(text, "ip route's output"):
        if item.get("type", "unicast") != "unicast" or "dev" not in item:
            continue
        destination = item["dst"]
        if destination != DEFAULT_ROUTE:   # ip prints a host route without its length
            destination = str(ipaddress.ip_network(destination, strict=False))
        found.append(Route(destination=destination, gateway=item.get("gateway", ""),
                           interface=item["dev"], metric=item.get("metric", 0),
                           protocol=item.get("protocol", ""), family=family))
    return found


def parse_bridge_vlans(text):
    """`bridge -j vlan show` -> ((port, frozenset of VLAN ids), ...) (ranges expanded)."""
    found = []
    for item in _json(text, "bridge vlan's output"):
        vids = set()
        for entry in item.get("vlans", []):
            first = entry.get("vlan", 0)
            vids.update(range(first, entry.get("vlanEnd", first) + 1))
        found.append((item.get("ifname", ""), frozenset(vids)))
    return tuple(found)


def parse_sysfs(text):
    """Lines of name, speed, duplex, driver (tab-separated) -> {name: sysfs_fields(...)}."""
    found = {}
    for line in text.splitlines():
        name, speed, duplex, driver = (line.split("\t") + ["", "", ""])[:4]
        found[name] = sysfs_fields(speed, duplex, driver)
    return found


def sysfs_fields(speed, duplex, driver):
    """A port's /sys/class/net texts (None: unreadable) -> (speed or None, duplex or None,
    driver)."""
    speed, duplex = (speed or "").strip(), (duplex or "").strip()
    number = int(speed) if speed.lstrip("-").isdigit() else 0
    # the kernel reports -1 (or an error) for "unknown", e.g. with no link
    return (number if number > 0 else None, duplex if duplex in ("full", "half") else None,
            driver or "")


def is_port(link):
    """An Ethernet port: hardware (no linkinfo kind) or a veth (the lab's stand-ins), not a
    bond, VLAN, bridge or tunnel."""
    return link.link_type == "ether" and link.kind in ("", "veth")


def make_ports(links, sysfs):
    """{name: Port} of the Ethernet ports among links."""
    ports = {}
    for link in filter(is_port, links):
        speed, duplex, driver = sysfs.get(link.name, (None, None, ""))
        ports[link.name] = Port(
            name=link.name, mac=link.mac, link="up" if link.carrier else "down",
            speed=speed, duplex=duplex, driver=driver or link.kind, mtu=link.mtu,
            min_mtu=link.min_mtu, max_mtu=link.max_mtu, pci=link.pci)
    return ports


# -- reading (runs ip and sh in the target) -------------------------------------------------

def _run(target, argv):
    result = target.run(argv)
    if not result.ok:
        raise NetworkError(Code.APPLY, "", f"`{' '.join(argv)}` failed on {target}: "
                           f"{result.stderr.strip() or result.returncode}")
    return result.stdout


# what snapshot() runs; parse_live takes their output by the same keys
COMMANDS = {"link": ["ip", "-j", "-d", "link", "show"], "addr": ["ip", "-j", "addr", "show"],
            "route": ["ip", "-j", "route", "show", "table", "main"],
            "route6": ["ip", "-6", "-j", "route", "show", "table", "main"],
            "vlan": ["bridge", "-j", "vlan", "show"]}


def parse_live(link, addr, route, route6, vlan="[]"):
    """The output of COMMANDS -> Live."""
    return Live(tuple(parse_links(link)), tuple(parse_addresses(addr)),
                tuple(parse_routes(route, 4) + parse_routes(route6, 6)),
                parse_bridge_vlans(vlan))


def links(target):
    return parse_links(_run(target, COMMANDS["link"]))


def addresses(target):
    return parse_addresses(_run(target, COMMANDS["addr"]))


def routes(target):
    """Table main's routes, IPv4 then IPv6."""
    return (parse_routes(_run(target, COMMANDS["route"]), 4) +
            parse_routes(_run(target, COMMANDS["route6"]), 6))


def snapshot(target):
    """The target's links, addresses and routes now."""
    found = links(target)
    vlans = parse_bridge_vlans(_run(target, COMMANDS["vlan"])) \
        if any(link.kind == "bridge" for link in found) else ()
    return Live(tuple(found), tuple(addresses(target)), tuple(routes(target)), vlans)


def port_sysfs(target, names):
    """{name: (speed or None, duplex or None, driver)} from each port's /sys/class/net
    entry as the target sees it. speed and duplex read EINVAL while a port has no link; a
    virtual port has no device/driver."""
    def path(name, what):
        return f"/sys/class/net/{name}/{what}"
    files = target.read_files([path(name, what) for name in names
                               for what in ("speed", "duplex")])
    drivers = target.read_links([path(name, "device/driver") for name in names])
    return {name: sysfs_fields(files[path(name, "speed")], files[path(name, "duplex")],
                               drivers[path(name, "device/driver")])
            for name in names}


def ports(target, found=None):
    """{name: Port} of the target's Ethernet ports; found: its links, when the caller has
    just read them (snapshot's)."""
    found = links(target) if found is None else found
    return make_ports(found, port_sysfs(target, [link.name for link in found if is_port(link)]))
