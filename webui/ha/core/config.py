"""The high-availability document (/etc/tusk/ha.toml, the HA page's draft) -> the model,
or every problem at once (docs/HA.md, docs/SCALE.md). A pair (mode "pair", the default):

    [ha]
    enabled = true
    role = "primary"          # primary | secondary: the primary has the higher VRRP priority
    vrid = 51                 # VRRP's virtual router id on every segment, 1-255
    advert_ms = 1000          # VRRPv3 advertisement interval: 10-40950 ms, in steps of 10
    preempt = false           # a recovered primary takes the addresses back
    sync_interface = "ens6"   # the dedicated link to the peer (conntrackd, configuration)
    sync_address = "192.168.255.1/30"   # this box's on it, with its prefix
    peer_address = "192.168.255.2"      # the peer's, on the same subnet

    [[virtual]]               # each segment's addresses the pair holds; the master has them
    interface = "ens4.100"
    addresses = ["198.51.100.1/24", "2001:db8:100::1/64"]

A box of a cluster sharing the load (docs/SCALE.md): no roles, no virtual addresses -
the routers spread connections over every box - only the sync link, on which every box
multicasts its connections to the others:

    [ha]
    enabled = true
    mode = "cluster"
    sync_interface = "ens6"
    sync_address = "192.168.255.1/24"   # IPv4: conntrackd's multicast group is

First every unknown, missing or mistyped key (SCHEMA); once every key is right, every bad
value and every conflict (VALUE). Problem paths are the document's: virtual[1].addresses[0].
"""
import ipaddress
import os
import tomllib
from dataclasses import dataclass
from enum import IntEnum

from tusklib import tomlread, values
from tusklib.checks import address_problem, interface_problem, ip_problem
from tusklib.formats import FormatRefused, conntrackd, keepalived
from tusklib.problems import Problem, Problems, table_values, type_name
from tusklib.tomlwrite import toml_value

DEFAULT_PATH = "/etc/tusk/ha.toml"
TEXT_MAX = 1 << 16
PRIMARY, SECONDARY = "primary", "secondary"
PAIR, CLUSTER = "pair", "cluster"
MODES = (PAIR, CLUSTER)
PRIORITY = {PRIMARY: 200, SECONDARY: 100}
ADVERT_MS_MIN, ADVERT_MS_MAX = 10, 40950      # VRRPv3: 12 bits of centiseconds
VIRTUAL_MAX = 32                               # segments with virtual addresses
ADDRESSES_MAX = 16                             # virtual addresses of one segment


class Code(IntEnum):
    """Stable error codes; the numbers are tusk-ha's exit statuses and never change."""

    SYNTAX = 60      # not valid TOML
    SCHEMA = 61      # an unknown, missing or mistyped section or key
    VALUE = 62       # a value of the wrong form, or values that cannot hold together
    IO = 63          # the file is missing or cannot be read
    LOCKED = 64      # another apply, confirm or rollback holds the lock
    NOT_PENDING = 65 # nothing awaits confirmation
    REVISION = 66    # no such revision
    APPLY = 67       # the daemons or the host table refused the configuration
    ROLE = 68        # the action needs another role (fail over: this box is not master)
    NETWORK = 69     # a link the pair uses is not one the box's network carries


class HaError(Problems):
    """One or more problems, each naming the field (virtual[0].addresses[1]) and why."""

    codes = Code


@dataclass(frozen=True)
class Virtual:
    """One traffic segment's virtual addresses, held by the pair's master."""

    interface: str
    addresses: tuple


@dataclass(frozen=True)
class HaConfig:
    """A box's half of the pair: its peer has the same document with role, sync_address
    and peer_address swapped. Or (mode "cluster") one box of a cluster: role and
    peer_address None, no virtual addresses, vrid, advert_ms and preempt unused."""

    enabled: bool
    role: str | None
    vrid: int
    advert_ms: int
    preempt: bool
    sync_interface: str
    sync_address: str
    peer_address: str | None
    virtual: tuple
    mode: str = PAIR

    @property
    def cluster(self):
        return self.mode == CLUSTER

    @property
    def priority(self):
        return PRIORITY[self.role]

    @property
    def sync_ip(self):
        return str(ipaddress.ip_interface(self.sync_address).ip)

    @property
    def family(self):
        return ipaddress.ip_interface(self.sync_address).version


HA_KEYS = {"enabled": (bool, None), "role": (str, None), "vrid": (int, None),
           "advert_ms": (int, 1000), "preempt": (bool, False), "sync_interface": (str, None),
           "sync_address": (str, None), "peer_address": (str, None)}
# a cluster's [ha]; the pair's other keys are refused there, each saying why
CLUSTER_KEYS = {"enabled": (bool, None), "mode": (str, None), "sync_interface": (str, None),
                "sync_address": (str, None)}
PAIR_ONLY = {"role": "every box of a cluster carries traffic: none is primary or secondary",
             "vrid": "a cluster runs no VRRP: the routers spread connections over its boxes",
             "advert_ms": "a cluster runs no VRRP: BFD between the routers and each box "
                          "finds a failed box",
             "preempt": "a cluster has no addresses to take back: every box carries traffic",
             "peer_address": "every box of a cluster multicasts to all the others on the "
                             "sync link: there is no one peer"}
VIRTUAL_KEYS = {"interface": (str, None), "addresses": (list, None)}


def _mode(ha, problems):
    """The mode [ha] asks for ("pair" without one), or None when it is no mode."""
    mode = ha.get("mode", PAIR)
    if mode in MODES:
        return mode
    problems.append(Problem(Code.SCHEMA if not isinstance(mode, str) else Code.VALUE,
                            "ha.mode", f"{mode!r:.40}: must be pair (two boxes, one holding "
                            "the addresses) or cluster (several boxes sharing the load)"))
    return None


def _cluster_values(ha, entries, problems):
    """A cluster's [ha] values, or None; the pair's keys and [[virtual]] refused."""
    for key in ha:
        if key in PAIR_ONLY:
            problems.append(Problem(Code.SCHEMA, f"ha.{key}", f"not in a cluster: "
                                    f"{PAIR_ONLY[key]} (remove it, or mode = \"pair\")"))
    if entries:
        problems.append(Problem(Code.SCHEMA, "virtual", "not in a cluster: the routers "
                                "spread connections over every box's own addresses, so no "
                                "box holds virtual ones (remove them, or mode = \"pair\")"))
    found = table_values({k: v for k, v in ha.items() if k not in PAIR_ONLY}, CLUSTER_KEYS,
                         "ha", problems, Code.SCHEMA)
    if found is None:
        return None
    return {**found, "role": None, "vrid": 0, "advert_ms": 0, "preempt": False,
            "peer_address": None}


def from_document(document):
    """The model of a document (a dict as the TOML file parses), checked whole; raises
    HaError with every problem."""
    problems = []
    if not isinstance(document, dict):
        raise HaError(Code.SCHEMA, "", f"must be a table, got {type_name(document)}")
    for key in document:
        if key not in ("ha", "virtual"):
            problems.append(Problem(Code.SCHEMA, key,
                                    "unknown section (known: [ha], [[virtual]])"))
    ha = document.get("ha")
    values = None
    entries = document.get("virtual", [])
    mode = None
    if not isinstance(ha, dict):
        problems.append(Problem(Code.SCHEMA, "ha", "missing: the [ha] table is required"
                                if ha is None else "must be a table, written [ha]"))
    else:
        mode = _mode(ha, problems)
        if mode == CLUSTER:
            values = _cluster_values(ha, entries, problems)
            entries = []
        elif mode == PAIR:
            values = table_values({k: v for k, v in ha.items() if k != "mode"}, HA_KEYS,
                                  "ha", problems, Code.SCHEMA)
    virtual = []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(Problem(Code.SCHEMA, "virtual", "must be an array of tables, each "
                                "written [[virtual]] (with two brackets)"))
    else:
        for index, entry in enumerate(entries):
            found = table_values(entry, VIRTUAL_KEYS, f"virtual[{index}]", problems,
                                 Code.SCHEMA)
            virtual.append(Virtual(**found) if found else None)
    if problems:
        raise HaError(problems)
    config = HaConfig(**{key: values[key] for key in HA_KEYS}, virtual=tuple(virtual),
                      mode=mode)
    problems = validate(config)
    if problems:
        raise HaError(problems)
    return config


def to_document(config):
    """The model -> the document from_document takes (and ha.toml holds). A pair's has no
    mode: it is the default, and a release before clusters reads it."""
    if config.cluster:
        return {"ha": {key: getattr(config, key) for key in CLUSTER_KEYS}, "virtual": []}
    return {"ha": {key: getattr(config, key) for key in HA_KEYS},
            "virtual": [{"interface": v.interface, "addresses": list(v.addresses)}
                        for v in config.virtual]}


HEADER = ("# Tusk's high availability (a pair, or a cluster): the dashboard (High\n"
          "# availability) writes this file; docs/HA.md describes every key.\n")


def to_toml(config):
    """The model -> ha.toml's text: deterministic, parse(to_toml(c)) == c."""
    document = to_document(config)
    lines = [HEADER.rstrip("\n"), "[ha]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in document["ha"].items()]
    for entry in document["virtual"]:
        lines += ["", "[[virtual]]"] + [f"{k} = {toml_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


def interfaces_problems(config, present):
    """The sync link and every segment must be interfaces this machine has (present:
    their names) -> [Problem]."""
    problems = []
    names = sorted(present)
    known = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    if config.sync_interface not in present:
        problems.append(Problem(Code.VALUE, "ha.sync_interface",
                                f"{config.sync_interface}: no such interface on this box "
                                f"(it has {known or 'none'})"))
    for index, segment in enumerate(config.virtual):
        if segment.interface not in present:
            problems.append(Problem(Code.VALUE, f"virtual[{index}].interface",
                                    f"{segment.interface}: no such interface on this box "
                                    f"(it has {known or 'none'})"))
    return problems


def parse(text):
    """The model of ha.toml's text; raises HaError."""
    if len(text) > TEXT_MAX:
        raise HaError(Code.SYNTAX, "", f"{len(text)} characters: more than the "
                      f"{TEXT_MAX} an ha.toml may have")
    try:
        # every way tomllib fails, with its line and column
        document = tomlread.checked(tomllib.loads(text), text)
    except tomlread.TomlError as error:
        raise HaError(Code.SYNTAX, "", error.described()) from None
    except (ValueError, RecursionError) as error:   # TOMLDecodeError is a ValueError
        raise HaError(Code.SYNTAX, "", tomlread.error_of(error, text).described()) from None
    return from_document(document)


def load(path=DEFAULT_PATH):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(TEXT_MAX + 1)
    except OSError as error:
        raise HaError(Code.IO, "", f"{path}: {error.strerror}") from None
    return parse(text)


def enabled(path=DEFAULT_PATH):
    """(the model, None) when path holds an enabled pair's valid document; (None, None)
    when there is none or it is disabled; (None, why) when it cannot be used - for the
    boot, which then runs the box alone and says so."""
    if not os.path.exists(path):
        return None, None
    try:
        model = load(path)
    except HaError as error:
        return None, f"{path}: {error}"
    return (model, None) if model.enabled else (None, None)


def format_problem(*checks):
    """Why a daemon's file cannot hold a value: each (format check, typed value) in turn
    (tusklib/formats: the renderer writes the value through the same check), or None."""
    for check, value in checks:
        try:
            check(value)
        except FormatRefused as refused:
            return str(refused)
    return None


def validate(config):  # noqa: C901 - one check per field, each naming it
    """Every bad value and conflict of a well-formed model -> [Problem]."""
    problems = []

    def bad(path, message):
        problems.append(Problem(Code.VALUE, path, message))

    if config.cluster:
        _sync_link(config, bad)
        return problems
    if config.role not in PRIORITY:
        bad("ha.role", f"{config.role!r}: must be primary or secondary")
    if not 1 <= config.vrid <= 255:
        bad("ha.vrid", f"{config.vrid}: VRRP's virtual router id is from 1 to 255")
    if not ADVERT_MS_MIN <= config.advert_ms <= ADVERT_MS_MAX or config.advert_ms % 10:
        bad("ha.advert_ms", f"{config.advert_ms}: VRRPv3 advertises every 10 to 40950 ms, "
                            "in steps of 10")
    own = _sync_link(config, bad)
    reason = ip_problem(config.peer_address, "the peer's address") or format_problem(
        (conntrackd.address, values.IPAddress(config.peer_address)))
    if reason:
        bad("ha.peer_address", reason)
    elif own is not None:
        peer = ipaddress.ip_address(config.peer_address)
        if peer.version != own.version:
            bad("ha.peer_address", f"{peer} is IPv{peer.version}, this box's sync address "
                                   f"IPv{own.version}: both ends of the link use one family")
        elif peer == own.ip:
            bad("ha.peer_address", f"{peer} is this box's own sync address")
        elif peer not in own.network:
            bad("ha.peer_address", f"{peer} is not on the sync link's subnet {own.network}")
    if not config.virtual:
        bad("virtual", "at least one segment with a virtual address: without one, there is "
                       "nothing for the pair to fail over")
    if len(config.virtual) > VIRTUAL_MAX:
        bad("virtual", f"{len(config.virtual)} segments; at most {VIRTUAL_MAX}")
    seen_interfaces, seen_addresses = {}, {}
    for index, segment in enumerate(config.virtual):
        where = f"virtual[{index}]"
        reason = interface_problem(segment.interface) or format_problem(
            (keepalived.word, values.InterfaceName(segment.interface)))
        if reason:
            bad(f"{where}.interface", reason)
        elif segment.interface == config.sync_interface:
            bad(f"{where}.interface", f"{segment.interface} is the sync link; virtual "
                                      "addresses belong on the traffic segments")
        elif segment.interface in seen_interfaces:
            bad(f"{where}.interface", f"{segment.interface} is virtual"
                                      f"[{seen_interfaces[segment.interface]}] already")
        else:
            seen_interfaces[segment.interface] = index
        if not segment.addresses:
            bad(f"{where}.addresses", "at least one address")
        if len(segment.addresses) > ADDRESSES_MAX:
            bad(f"{where}.addresses", f"{len(segment.addresses)} addresses; at most "
                                      f"{ADDRESSES_MAX} on one segment")
        for number, address in enumerate(segment.addresses):
            path = f"{where}.addresses[{number}]"
            reason = address_problem(address)
            if reason:
                bad(path, reason)
                continue
            ip = ipaddress.ip_interface(address).ip
            if ip.is_link_local:
                bad(path, f"{address} is link-local; VRRP makes its own")
            elif own is not None and ip in own.network:
                bad(path, f"{address} is on the sync link's subnet {own.network}")
            elif ip in seen_addresses:
                bad(path, f"{ip} is {seen_addresses[ip]} already")
            else:
                seen_addresses[ip] = path
    return problems


def _sync_link(config, bad):
    """The sync link's interface and this box's address on it checked (bad(path, why) for
    each problem) -> the address as an ip_interface, or None when it is none."""
    reason = interface_problem(config.sync_interface) or format_problem(
        (conntrackd.name, values.InterfaceName(config.sync_interface)))
    if reason:
        bad("ha.sync_interface", reason)
    reason = address_problem(config.sync_address) or format_problem(
        (conntrackd.address, values.IPAddress(values.IPInterface(config.sync_address).ip)))
    if reason:
        bad("ha.sync_address", reason)
        return None
    own = ipaddress.ip_interface(config.sync_address)
    if config.cluster and own.version != 4:
        bad("ha.sync_address", f"{config.sync_address} is IPv6: a cluster's boxes multicast "
                               "their connections to an IPv4 group on the sync link "
                               "(conntrackd's multicast is IPv4 only)")
        return None
    return own
