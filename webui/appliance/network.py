"""The box's Ethernet ports as the console menu and tusk-net see them, and the
configuration in words. The configuration itself - /etc/tusk/network.toml, its model, its
checks and its renderings - is network/core/ (one model for the dashboard, the console,
tusk-net and boot); this module re-exports what the console and tusk-net use of it.
"""
import dataclasses
import json
import os

from network.core import model
from network.core.errors import Code, NetworkError
from network.core.model import NetworkConfig, Port, Route
from network.core.normalise import DEFAULT_PATH, load, parse, to_toml
from network.core.sysfs import SYSFS_NET, Nic, detect_interfaces, natural, read_text
from network.core.validate import validate
from tusklib import checks
from tusklib.files import write_atomically

__all__ = ["Code", "NetworkError", "NetworkConfig", "Port", "Route", "load", "parse", "validate",
           "checks", "model", "SYSFS_NET", "Nic", "detect_interfaces", "read_text"]

def write(config, path=DEFAULT_PATH, present=None):
    """Checks the configuration, then replaces the file; NetworkError and no write if bad."""
    problems = validate(config, present=present)
    if problems:
        raise NetworkError(problems)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomically(path, to_toml(config), 0o644)


def with_management(config, port, dhcp, addresses, gateway, dns):
    """config with the management port's address settings replaced: DHCP or the static
    addresses, the default route through it (gateway, "" for none) and the DNS servers."""
    ports = tuple(dataclasses.replace(p, dhcp=dhcp, addresses=tuple(addresses))
                  if p.name == port else p for p in config.interfaces)
    routes = tuple(r for r in config.routes if not (r.destination == model.DEFAULT_ROUTE
                                                   and r.interface == port))
    if gateway:
        routes = (Route(model.DEFAULT_ROUTE, gateway, 0, port),) + routes
    system = dataclasses.replace(config.system, dns=tuple(dns))
    return dataclasses.replace(config, interfaces=ports, routes=routes, system=system)


# -- the machine ---------------------------------------------------------------------------

def default_config(interfaces):
    """A new box: the first Ethernet interface by name manages it, on DHCP; no traffic.
    interfaces: Nic objects or names."""
    names = sorted((getattr(i, "name", i) for i in interfaces), key=natural)
    if not names:
        raise NetworkError(Code.INTERFACE, "", "no Ethernet interface found: there is "
                           "nothing to manage the box through (is the NIC's driver in the "
                           "kernel?)")
    return NetworkConfig(interfaces=(Port(names[0], role=model.MANAGEMENT, dhcp=True),))


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
    bond_of = {**config.bond_of, **config.bridge_of}
    lines = []
    for link in config.links:
        what = [a for a in link.addresses]
        if link.dhcp:
            what.insert(0, "DHCP")
        if link.autoconf:
            what.insert(1 if link.dhcp else 0, "IPv6 autoconf")
        if link.kind == "vlan":
            what.append(f"VLAN {link.id} on {link.parent}")
        elif link.kind == "bond":
            what.append(f"{link.mode} bond of {', '.join(link.members)}")
        elif link.kind == "bridge":
            what.append(f"transparent bridge of {', '.join(link.members)}"
                        + (", STP" if link.stp else "")
                        + (f", VLANs {', '.join(map(str, link.vlans))}" if link.vlans else ""))
        if link.name in bond_of:
            what = [f"member of {bond_of[link.name]}"]
        role = link.role if link.kind == "port" else link.kind
        text = ", ".join(what) or ("(link down)" if link.role == model.UNUSED
                                   else "(link up, no address)")
        lines.append(f"{role:<11} {link.name:<15}  {text}")
    for route in config.routes:
        via = f" via {route.gateway}" if route.gateway else ""
        dev = f" dev {route.interface}" if route.interface else ""
        lines.append(f"route       {route.destination}{via}{dev}"
                     + (f" metric {route.metric}" if route.metric else ""))
    system = config.system
    lines.append(f"system      host {system.hostname}, DNS {', '.join(system.dns) or 'none'}"
                 f", NTP {', '.join(system.ntp) or 'none'}, time zone {system.timezone}")
    return lines


def nic_lines(nics, numbered=False):
    """A table of detected interfaces: name, MAC, link, driver."""
    lines = []
    for number, nic in enumerate(nics, 1):
        lead = f"{number:>2}) " if numbered else "  "
        lines.append(f"{lead}{nic.name:<15}  {nic.mac:<17}  link {nic.link:<7}  "
                     f"{nic.driver}".rstrip())
    return lines or ["  (no Ethernet interface found)"]
