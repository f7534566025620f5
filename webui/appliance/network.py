"""The box's interfaces: /etc/tusk/network.toml, read, checked and rendered for
systemd-networkd.

    [management]              # the interface the dashboard, SSH and DHCP answer on
    interface = "enp0s2"      # a new box: the first Ethernet interface by name
    address = "dhcp"          # or an address with its prefix: "192.168.1.1/24"
    gateway = ""              # only with a static address; inside its subnet
    dns = []                  # only with a static address: ["192.168.1.53"]

    [[traffic]]               # zero or more: the interfaces that forward traffic
    interface = "enp0s3"
    address = ""              # "" = link up, no address; or "10.1.0.1/24"

Every problem is reported with the file, the section and the key, and why; all of them
at once (NetworkError.problems, tusklib.problems' shape; the first code is tusk-net's
exit status): first every unknown, missing or mistyped key, then - once every key is
right - every bad value. The checks of one value (interface_problem,
address_problem, ...) return the reason alone, so the console menu can say it about
what the operator typed.

render() turns a configuration into systemd-networkd files, 10-tusk-<ifname>.network,
which `tusk-net apply` writes to /run/systemd/network/.
"""
import ipaddress
import json
import os
import re
import tomllib
from dataclasses import dataclass
from enum import IntEnum

from policy.core.constants import IFNAME_MAX, IFNAME_PATTERN
from tusklib.files import write_atomically
from tusklib.problems import Problem, Problems

DEFAULT_PATH = "/etc/tusk/network.toml"
SYSFS_NET = "/sys/class/net"
RUN_DIR = "/run/systemd/network"
FILE_PREFIX = "10-tusk-"
FILE_SUFFIX = ".network"
ARPHRD_ETHER = "1"
# Interfaces with a device behind them that are still not Ethernet ports (uevent DEVTYPE)
NOT_ETHERNET = {"wlan", "wwan", "bridge", "bond", "vlan", "team"}


class Code(IntEnum):
    """Stable error codes; the numbers are tusk-net's exit statuses and never change."""

    SYNTAX = 40      # not valid TOML
    SCHEMA = 41      # an unknown, missing or mistyped section or key
    VALUE = 42       # a value of the wrong form, or values that cannot hold together
    INTERFACE = 43   # an interface the machine does not have, or none at all
    IO = 44          # the file is missing or cannot be read


class NetworkError(Problems):
    """One or more problems, each naming the file, the section and key, and the reason."""

    codes = Code


@dataclass(frozen=True)
class Management:
    interface: str
    address: str = "dhcp"
    gateway: str = ""
    dns: tuple = ()

    @property
    def dhcp(self):
        return self.address == "dhcp"


@dataclass(frozen=True)
class Traffic:
    interface: str
    address: str = ""


@dataclass(frozen=True)
class NetworkConfig:
    management: Management
    traffic: tuple = ()

    @property
    def interfaces(self):
        return [self.management.interface] + [t.interface for t in self.traffic]


@dataclass(frozen=True)
class Nic:
    """A physical Ethernet interface found in /sys/class/net."""
    name: str
    mac: str
    link: str        # "up" (carrier), "down" (no carrier) or the operstate when unknown
    driver: str


# -- the checks of one value: a reason, or None ------------------------------------------

def interface_problem(name):
    if not name:
        return "must not be empty"
    if len(name) > IFNAME_MAX:
        return f"{name!r} is {len(name)} characters long; Linux allows at most {IFNAME_MAX}"
    if name in (".", ".."):
        return f"{name!r} is not allowed as an interface name by Linux"
    for char, what in (("/", "'/'"), (":", "':'")):
        if char in name:
            return f"{name!r} contains {what}, which Linux does not allow in an interface name"
    if any(c.isspace() for c in name):
        return f"{name!r} contains white space, which Linux does not allow in an interface name"
    if name == "lo":
        return "the loopback interface cannot be assigned"
    if not re.match(IFNAME_PATTERN, name):
        return (f"{name!r} has characters other than letters, digits and _ . @ + - "
                "(the interface names policy zones accept)")
    return None


def _cidr(value):
    """(ip_interface, None) or (None, reason) for an address with its prefix length."""
    if "%" in value:
        return None, f"{value!r} has a zone (%...); give the address without it"
    address, slash, prefix = value.partition("/")
    if not slash:
        return None, (f"{value!r} has no prefix length; write it with one, e.g. "
                      f"{value}/{'64' if ':' in value else '24'}")
    if not prefix.isdigit():
        return None, f"{value!r}: the prefix length {prefix!r} must be a number (e.g. /24)"
    try:
        iface = ipaddress.ip_interface(value)
    except ValueError:
        return None, f"{value!r} is not an IPv4 or IPv6 address with a prefix length"
    return iface, None


def _unusable(ip):
    for test, what in (("is_unspecified", "the unspecified address"),
                       ("is_loopback", "a loopback address"),
                       ("is_multicast", "a multicast address")):
        if getattr(ip, test):
            return what
    if ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    return None


def address_problem(value, management):
    """The interface's own address: "dhcp" (management), "" (traffic) or address/prefix."""
    if value == "dhcp":
        return None if management else ("\"dhcp\" is only for the management interface; "
                                        "give an address/prefix or \"\" for none")
    if value == "":
        return None if not management else ("must not be empty: \"dhcp\" or an "
                                            "address/prefix such as 192.168.1.1/24")
    iface, reason = _cidr(value)
    if reason:
        return reason
    what = _unusable(iface.ip)
    if what:
        return f"{value!r} is {what}, not one an interface can have"
    net = iface.network
    if net.prefixlen == 0:
        return f"{value!r}: a /0 prefix is not a subnet"
    small = 31 if iface.version == 4 else 127
    if net.prefixlen < small:
        example = f"{net.network_address + 1}/{net.prefixlen}"
        if iface.ip == net.network_address:
            kind = "network address" if iface.version == 4 else "subnet-router anycast address"
            return f"{value!r} is the {kind} of {net}; give the interface's own address, " \
                   f"e.g. {example}"
        if iface.version == 4 and iface.ip == net.broadcast_address:
            return f"{value!r} is the broadcast address of {net}; give the interface's own " \
                   f"address, e.g. {example}"
    return None


def gateway_problem(gateway, address):
    """The default gateway, given a valid static address/prefix."""
    try:
        ip = ipaddress.ip_address(gateway)
    except ValueError:
        return f"{gateway!r} is not an IP address (write it without a prefix length)"
    iface = ipaddress.ip_interface(address)
    if ip.version != iface.version:
        return f"{gateway} is IPv{ip.version} but the address {address} is IPv{iface.version}"
    what = _unusable(ip)
    if what:
        return f"{gateway} is {what}"
    if ip == iface.ip:
        return f"{gateway} is the interface's own address"
    if ip.version == 6 and ip.is_link_local:
        return None  # a router's link-local address is the usual IPv6 gateway
    net = iface.network
    if ip not in net:
        return f"{gateway} is outside the subnet {net} of the address {address}"
    if net.prefixlen < (31 if ip.version == 4 else 127) and (
            ip == net.network_address or ip.version == 4 and ip == net.broadcast_address):
        return f"{gateway} is the {'network' if ip == net.network_address else 'broadcast'} " \
               f"address of {net}"
    return None


def dns_problem(server):
    try:
        ip = ipaddress.ip_address(server)
    except ValueError:
        return f"{server!r} is not an IP address"
    what = _unusable(ip)
    return f"{server} is {what}" if what else None


# -- reading -----------------------------------------------------------------------------

_MANAGEMENT = {"interface": (str, None), "address": (str, "dhcp"), "gateway": (str, ""),
               "dns": (list, [])}
_TRAFFIC = {"interface": (str, None), "address": (str, "")}
_TYPE_NAMES = {str: "a string", list: "a list"}


def _table(table, schema, where, problems):
    """The values of one table by its schema, or None when a key is wrong."""
    values, ok = {}, True
    for key in table:
        if key not in schema:
            problems.append(Problem(Code.SCHEMA, f"{where} {key}",
                                    f"unknown key (known: {', '.join(schema)})"))
            ok = False
    for key, (kind, default) in schema.items():
        if key not in table:
            if default is None:
                problems.append(Problem(Code.SCHEMA, f"{where} {key}", "missing (required)"))
                ok = False
            values[key] = default
        elif not isinstance(table[key], kind):
            problems.append(Problem(Code.SCHEMA, f"{where} {key}", f"expected "
                                    f"{_TYPE_NAMES[kind]}, got {_toml_type(table[key])}"))
            ok = False
        else:
            values[key] = table[key]
    return values if ok else None


def _toml_type(value):
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def parse(text, path=DEFAULT_PATH):
    """The configuration in a network.toml text; NetworkError with every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NetworkError(Code.SYNTAX, path, f"not valid TOML: {exc}") from None
    problems = []
    for section in data:
        if section not in ("management", "traffic"):
            problems.append(Problem(Code.SCHEMA, f"{path}: [{section}]", "unknown section "
                                    "(known: [management], [[traffic]])"))
    management = None
    if "management" not in data:
        problems.append(Problem(Code.SCHEMA, f"{path}: [management]", "missing (required: "
                                "it names the interface the dashboard answers on)"))
    elif not isinstance(data["management"], dict):
        problems.append(Problem(Code.SCHEMA, f"{path}: [management]", "must be a table"))
    else:
        values = _table(data["management"], _MANAGEMENT, f"{path}: [management]", problems)
        if values is not None:
            dns = values["dns"]
            bad = [d for d in dns if not isinstance(d, str)]
            if bad:
                problems.append(Problem(Code.SCHEMA, f"{path}: [management] dns", "expected "
                                        f"a list of strings, got {_toml_type(bad[0])} in it"))
            else:
                management = Management(values["interface"], values["address"],
                                        values["gateway"], tuple(dns))
    traffic = []
    entries = data.get("traffic", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(Problem(Code.SCHEMA, f"{path}: [[traffic]]", "must be an array of "
                                "tables, each written [[traffic]] (with two brackets)"))
        entries = []
    for number, entry in enumerate(entries, 1):
        values = _table(entry, _TRAFFIC, f"{path}: [[traffic]] #{number}", problems)
        traffic.append(Traffic(values["interface"], values["address"]) if values else None)
    if management is not None and None not in traffic:
        config = NetworkConfig(management, tuple(traffic))
        problems += validate(config, path)
    if problems:
        raise NetworkError(problems)
    return config


def load(path=DEFAULT_PATH):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise NetworkError(Code.IO, path, "does not exist (`tusk-net apply` creates it with "
                           "the first Ethernet interface on DHCP)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NetworkError(Code.IO, path, "cannot read: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path)


def _where(index):
    return "[management]" if index == 0 else f"[[traffic]] #{index}"


def validate(config, path=DEFAULT_PATH, present=None):
    """Every problem of a configuration (Problem); empty when it is good. With present
    (the names of the machine's interfaces), interfaces it lacks are problems too."""
    problems = []
    entries = [config.management] + list(config.traffic)
    seen = {}
    static = []   # (where, ip_interface)
    for index, entry in enumerate(entries):
        where = f"{path}: {_where(index)}"
        code, reason = Code.VALUE, interface_problem(entry.interface)
        if reason is None and entry.interface in seen:
            reason = f"{entry.interface!r} is already used by {_where(seen[entry.interface])}"
        if reason is None and present is not None and entry.interface not in present:
            code, reason = Code.INTERFACE, (
                f"{entry.interface!r}: this machine has no such interface (it has: "
                f"{', '.join(present) or 'none'})")
        if reason:
            problems.append(Problem(code, f"{where} interface", reason))
        seen.setdefault(entry.interface, index)
        reason = address_problem(entry.address, management=index == 0)
        if reason:
            problems.append(Problem(Code.VALUE, f"{where} address", reason))
        elif entry.address not in ("", "dhcp"):
            static.append((index, ipaddress.ip_interface(entry.address)))
    mgmt, where = config.management, f"{path}: [management]"
    if mgmt.dhcp:
        if mgmt.gateway:
            problems.append(Problem(Code.VALUE, f"{where} gateway", "only with a static "
                                    "address (address is \"dhcp\": DHCP gives the gateway); "
                                    "leave it \"\""))
        if mgmt.dns:
            problems.append(Problem(Code.VALUE, f"{where} dns", "only with a static address "
                                    "(address is \"dhcp\": DHCP gives the DNS servers); "
                                    "leave it []"))
    else:
        static_ok = any(index == 0 for index, _ in static)
        if mgmt.gateway and static_ok:
            reason = gateway_problem(mgmt.gateway, mgmt.address)
            if reason:
                problems.append(Problem(Code.VALUE, f"{where} gateway", reason))
        for server in mgmt.dns:
            reason = dns_problem(server)
            if reason:
                problems.append(Problem(Code.VALUE, f"{where} dns", reason))
    for later, (index, iface) in enumerate(static):
        for other, other_iface in static[:later]:
            if iface.version == other_iface.version and iface.network.overlaps(
                    other_iface.network):
                problems.append(Problem(
                    Code.VALUE, f"{path}: {_where(index)} address", f"{iface} overlaps "
                    f"{_where(other)}'s {other_iface} (subnet {other_iface.network}): a "
                    "subnet belongs to one interface"))
    return problems


# -- writing -----------------------------------------------------------------------------

def _quote(value):
    return json.dumps(value, ensure_ascii=False)   # a JSON string is a TOML basic string


def to_toml(config):
    mgmt = config.management
    lines = ["# Tusk's interfaces: the console menu (options 1 and 2) writes this file;",
             "# `tusk-net check` checks it, `tusk-net apply` puts it into effect.",
             "[management]",
             f"interface = {_quote(mgmt.interface)}",
             f"address = {_quote(mgmt.address)}",
             f"gateway = {_quote(mgmt.gateway)}",
             f"dns = [{', '.join(_quote(d) for d in mgmt.dns)}]"]
    for traffic in config.traffic:
        lines += ["", "[[traffic]]", f"interface = {_quote(traffic.interface)}",
                  f"address = {_quote(traffic.address)}"]
    return "\n".join(lines) + "\n"


def write(config, path=DEFAULT_PATH):
    """Checks the configuration, then replaces the file; NetworkError and no write if bad."""
    problems = validate(config, path)
    if problems:
        raise NetworkError(problems)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomically(path, to_toml(config), 0o644)


# -- systemd-networkd ----------------------------------------------------------------------

HEADER = "# Written by tusk-net from {source}: change that file (or use the console menu).\n"


def render(config, source=DEFAULT_PATH):
    """{file name: text} of the systemd-networkd files, one per interface."""
    files = {}
    mgmt = config.management
    lines = [HEADER.format(source=source), "[Match]", f"Name={mgmt.interface}", "",
             "[Link]", "RequiredForOnline=yes", "", "[Network]"]
    if mgmt.dhcp:
        lines.append("DHCP=ipv4")
    else:
        lines += ["DHCP=no", f"Address={ipaddress.ip_interface(mgmt.address)}"]
        if mgmt.gateway:
            lines.append(f"Gateway={ipaddress.ip_address(mgmt.gateway)}")
        lines += [f"DNS={ipaddress.ip_address(server)}" for server in mgmt.dns]
    files[file_name(mgmt.interface)] = "\n".join(lines) + "\n"
    for traffic in config.traffic:
        lines = [HEADER.format(source=source), "[Match]", f"Name={traffic.interface}", "",
                 "[Link]", "RequiredForOnline=no", "", "[Network]", "DHCP=no",
                 "ConfigureWithoutCarrier=yes", "LinkLocalAddressing=no", "IPv6AcceptRA=no"]
        if traffic.address:
            lines.append(f"Address={ipaddress.ip_interface(traffic.address)}")
        files[file_name(traffic.interface)] = "\n".join(lines) + "\n"
    return files


def file_name(interface):
    return f"{FILE_PREFIX}{interface}{FILE_SUFFIX}"


def is_tusk_file(name):
    return name.startswith(FILE_PREFIX) and name.endswith(FILE_SUFFIX)


# -- the machine ---------------------------------------------------------------------------

def read_text(path):
    """A small file's text, stripped; None when it cannot be read (the carrier of an
    interface that is down: EINVAL)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _natural(name):
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
    return sorted(nics, key=lambda nic: _natural(nic.name))


def default_config(interfaces):
    """A new box: the first Ethernet interface by name manages it, on DHCP; no traffic.
    interfaces: Nic objects or names."""
    names = sorted((getattr(i, "name", i) for i in interfaces), key=_natural)
    if not names:
        raise NetworkError(Code.INTERFACE, "", "no Ethernet interface found: there is "
                           "nothing to manage the box through (is the NIC's driver in the "
                           "kernel?)")
    return NetworkConfig(Management(names[0]))


def addresses_from_ip_json(text):
    """The addresses `ip -j addr show` lists, global ones (no link-local), IPv4 first."""
    found = []
    for link in json.loads(text or "[]"):
        for info in link.get("addr_info", []):
            if info.get("scope") != "link" and info.get("local"):
                found.append((info.get("family") != "inet", info["local"]))
    return [address for _, address in sorted(found, key=lambda item: item[0])]


# -- for people ----------------------------------------------------------------------------

def summary(config):
    """Lines that say what a configuration does."""
    mgmt = config.management
    if mgmt.dhcp:
        lines = [f"management  {mgmt.interface:<15}  DHCP"]
    else:
        extra = [f"gateway {mgmt.gateway}"] if mgmt.gateway else ["no gateway"]
        extra.append(f"DNS {', '.join(mgmt.dns)}" if mgmt.dns else "no DNS servers")
        lines = [f"management  {mgmt.interface:<15}  {mgmt.address} ({', '.join(extra)})"]
    lines += [f"traffic     {t.interface:<15}  {t.address or '(link up, no address)'}"
              for t in config.traffic]
    if not config.traffic:
        lines.append("traffic     (none)")
    return lines


def nic_lines(nics, numbered=False):
    """A table of detected interfaces: name, MAC, link, driver."""
    lines = []
    for number, nic in enumerate(nics, 1):
        lead = f"{number:>2}) " if numbered else "  "
        lines.append(f"{lead}{nic.name:<15}  {nic.mac:<17}  link {nic.link:<7}  "
                     f"{nic.driver}".rstrip())
    return lines or ["  (no Ethernet interface found)"]
