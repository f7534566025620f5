"""A network document (the TOML file, the web UI's draft, a backup's section) -> the model,
or every problem at once; and the model back to a document and to the file's text.

    [system]                       # all optional
    hostname = "tusk"
    dns = ["192.0.2.53"]
    ntp = ["0.pool.ntp.org"]
    timezone = "UTC"

    [[interfaces]]                 # the Ethernet ports; the one with role management
    name = "enp1s0"                # is where the dashboard, SSH and DHCP answer
    role = "management"            # management | traffic | unused
    dhcp = true                    # DHCPv4 (management only)
    autoconf = false               # IPv6 router advertisements (management only)
    addresses = ["192.168.1.1/24"]
    mtu = 0                        # 0: as the driver sets it
    description = ""

    [[bonds]]                      # name, members, mode 802.3ad | active-backup,
    [[vlans]]                      # name, parent, id 1-4094
    [[bridges]]                    # name, members, stp, bpdu forward | drop, vlans
    [[routes]]                     # destination ("default" or a prefix), gateway,
                                   # metric, interface
    [routing]                      # FRR: BGP, OSPF, BFD (routing.py)

First every unknown, missing or mistyped key (SCHEMA); once every key is right, every
bad value and every conflict (validate.py, VALUE). Problem paths are the document's:
interfaces[1].addresses[0]. The file of releases before 2 ([management] and [[traffic]])
is read too and turned into this shape; it is written back in this one.
"""
import re

from tusklib import tomlread
from tusklib.problems import Integers, table_values, type_name
from tusklib.tomlwrite import toml_value

from . import model, routing
from .errors import Code, NetworkError, Problem
from .model import Bond, Bridge, NetworkConfig, Port, Route, System, Vlan
from .validate import validate

DEFAULT_PATH = "/etc/tusk/network.toml"
TEXT_MAX = 1 << 20   # a network.toml far larger than any box needs is refused unread

_STR, _BOOL, _INT, _LIST = str, bool, int, list
SCHEMA = {
    "system": ({"hostname": (_STR, model.HOSTNAME_DEFAULT), "dns": (_LIST, []),
                "ntp": (_LIST, []), "timezone": (_STR, model.TIMEZONE_DEFAULT)}, System),
    "interfaces": ({"name": (_STR, None), "role": (_STR, model.TRAFFIC),
                    "description": (_STR, ""), "addresses": (_LIST, []),
                    "dhcp": (_BOOL, False), "autoconf": (_BOOL, False),
                    "mtu": (_INT, 0)}, Port),
    "bonds": ({"name": (_STR, None), "mode": (_STR, model.LACP),
               "hash_policy": (_STR, model.DEFAULT_HASH_POLICY), "members": (_LIST, None),
               "description": (_STR, ""), "addresses": (_LIST, []), "mtu": (_INT, 0)}, Bond),
    "vlans": ({"name": (_STR, None), "parent": (_STR, None), "id": (_INT, None),
               "description": (_STR, ""), "addresses": (_LIST, []), "mtu": (_INT, 0)}, Vlan),
    "bridges": ({"name": (_STR, None), "members": (_LIST, None), "stp": (_BOOL, False),
                 "bpdu": (_STR, model.BPDU_FORWARD), "vlans": (Integers, []),
                 "description": (_STR, ""), "mtu": (_INT, 0)}, Bridge),
    "routes": ({"destination": (_STR, None), "gateway": (_STR, ""), "metric": (_INT, 0),
                "interface": (_STR, "")}, Route),
}
LISTS = ("interfaces", "bonds", "vlans", "bridges", "routes")
TOP = ("version", "system") + LISTS + ("routing",)


def _table(table, schema, where, problems):
    """The values of one table by its schema (defaults filled in), or None when a key is
    wrong."""
    return table_values(table, schema, where, problems, Code.SCHEMA)


def from_document(document, present=None, zones=None):
    """The model of a document (a dict as the TOML file parses), checked whole; raises
    NetworkError with every problem. present, zones: see validate.validate."""
    problems = []
    if not isinstance(document, dict):
        raise NetworkError(Code.SCHEMA, "", f"must be a table, got {type_name(document)}")
    for key in document:
        if key not in TOP:
            problems.append(Problem(Code.SCHEMA, key, "unknown section (known: "
                                    "[system], [[interfaces]], [[bonds]], [[vlans]], "
                                    "[[bridges]], [[routes]], [routing])"))
    version = document.get("version", model.VERSION)
    if version != model.VERSION or isinstance(version, bool):
        problems.append(Problem(Code.SCHEMA, "version", f"{version!r}: this release reads "
                                f"version {model.VERSION}"))
    parts = {}
    system = document.get("system", {})
    if not isinstance(system, dict):
        problems.append(Problem(Code.SCHEMA, "system", "must be a table, written [system]"))
    else:
        values = _table(system, SCHEMA["system"][0], "system", problems)
        parts["system"] = System(**values) if values else None
    for key in LISTS:
        schema, kind = SCHEMA[key]
        entries = document.get(key, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            problems.append(Problem(Code.SCHEMA, key, f"must be an array of tables, each "
                                    f"written [[{key}]] (with two brackets)"))
            parts[key] = None
            continue
        items = []
        for index, entry in enumerate(entries):
            values = _table(entry, schema, f"{key}[{index}]", problems)
            items.append(kind(**values) if values else None)
        parts[key] = None if None in items else tuple(items)
    if "routing" in document:
        parts["routing"] = routing.from_document(document["routing"], problems)
    if problems or None in parts.values():
        raise NetworkError(problems)
    config = NetworkConfig(**parts)
    problems = validate(config, present=present, zones=zones)
    if problems:
        raise NetworkError(problems)
    return config


LEGACY = {"management": {"interface": (_STR, None), "address": (_STR, "dhcp"),
                         "gateway": (_STR, ""), "dns": (_LIST, [])},
          "traffic": {"interface": (_STR, None), "address": (_STR, "")}}


def legacy_document(data):
    """The document of a release-1 file ([management] + [[traffic]]): the management
    interface's gateway becomes a default route through it, its DNS servers the system's.
    Its own keys are checked first, named as that file names them."""
    problems = []
    for key in data:
        if key not in LEGACY:
            problems.append(Problem(Code.SCHEMA, f"[{key}]", "unknown section (known: "
                                    "[management], [[traffic]])"))
    mgmt = data.get("management")
    if mgmt is None:
        problems.append(Problem(Code.SCHEMA, "[management]", "missing (required: it names "
                                "the interface the dashboard answers on)"))
    elif not isinstance(mgmt, dict):
        problems.append(Problem(Code.SCHEMA, "[management]", "must be a table"))
    else:
        mgmt = _table(mgmt, LEGACY["management"], "[management]", problems)
    traffic = data.get("traffic", [])
    if not isinstance(traffic, list) or not all(isinstance(e, dict) for e in traffic):
        problems.append(Problem(Code.SCHEMA, "[[traffic]]", "must be an array of tables, "
                                "each written [[traffic]] (with two brackets)"))
        traffic = []
    traffic = [_table(entry, LEGACY["traffic"], f"[[traffic]] #{number}", problems)
               for number, entry in enumerate(traffic, 1)]
    if problems:
        raise NetworkError([Problem(p.code, re.sub(r"^(\[[a-z]+\]|\[\[traffic\]\] #\d+)\.",
                                                   r"\1 ", p.path), p.message)
                            for p in problems])
    address = mgmt["address"]
    port = {"name": mgmt["interface"], "role": model.MANAGEMENT, "dhcp": address == "dhcp",
            "addresses": [] if address in ("dhcp", "") else [address]}
    document = {"system": {"dns": list(mgmt["dns"])}, "interfaces": [port], "routes": []}
    if mgmt["gateway"]:
        document["routes"].append({"destination": model.DEFAULT_ROUTE,
                                   "gateway": mgmt["gateway"], "interface": port["name"]})
    for entry in traffic:
        address = entry["address"]
        port = {"name": entry["interface"], "role": model.TRAFFIC,
                "addresses": [address] if address and address != "dhcp" else []}
        if address == "dhcp":
            port["dhcp"] = True   # refused by validate, naming the field
        document["interfaces"].append(port)
    return document


def legacy_path(path):
    """A problem's path in a converted release-1 file, as that file names it."""
    match = re.match(r"^interfaces\[(\d+)\](?:\.(\w+))?(\[\d+\])?$", path)
    if match:
        index, key = int(match.group(1)), match.group(2) or ""
        where = "[management]" if index == 0 else f"[[traffic]] #{index}"
        key = {"name": "interface", "addresses": "address", "dhcp": "address",
               "role": "interface"}.get(key, key)
        return f"{where} {key}".rstrip()
    if path.startswith("routes[0]"):
        return "[management] gateway"
    if path.startswith("system.dns"):
        return "[management] dns"
    return path


def is_legacy(data):
    """A release-1 file: [management] or [[traffic]], and none of this release's keys."""
    return isinstance(data, dict) and ("management" in data or "traffic" in data) and \
        not any(key in data for key in TOP)


def parse(text, path=DEFAULT_PATH, present=None, zones=None):
    """The configuration in a network.toml text; NetworkError with every problem, each
    path prefixed with the file's ("/etc/tusk/network.toml: interfaces[0].name")."""
    if len(text) > TEXT_MAX:
        raise NetworkError(Code.SCHEMA, path, f"is over {TEXT_MAX >> 10} KiB; not read")
    try:
        data = tomlread.loads(text)
    except tomlread.TomlError as exc:
        raise NetworkError(Code.SYNTAX, path, exc.described()) from None
    legacy = is_legacy(data)
    try:
        return from_document(legacy_document(data) if legacy else data, present=present,
                             zones=zones)
    except NetworkError as error:
        where = legacy_path if legacy else str
        raise NetworkError([Problem(p.code, f"{path}: {where(p.path)}" if p.path else path,
                                    p.message) for p in error.problems]) from None


def load(path=DEFAULT_PATH, present=None, zones=None):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(TEXT_MAX + 1)
    except FileNotFoundError:
        raise NetworkError(Code.IO, path, "does not exist (`tusk-net apply` creates it with "
                           "the first Ethernet interface on DHCP)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NetworkError(Code.IO, path, "cannot read: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path, present=present, zones=zones)


# -- back to a document and to text ---------------------------------------------------------

def to_document(config):
    """The document of a configuration: the file's structure, every key written."""
    def item(obj, schema):
        return {key: list(getattr(obj, key)) if isinstance(getattr(obj, key), tuple)
                else getattr(obj, key) for key in schema}
    return {"version": model.VERSION,
            "system": item(config.system, SCHEMA["system"][0]),
            **{key: [item(obj, SCHEMA[key][0]) for obj in getattr(config, key)]
               for key in LISTS},
            "routing": routing.to_document(config.routing)}


HEADER = ("# Tusk's network: the dashboard (Network) and the console menu write this file;\n"
          "# `tusk-net check` checks it. docs/NETWORK.md describes every key.\n")


def to_toml(config):
    document = to_document(config)
    lines = [HEADER.rstrip("\n"), f"version = {model.VERSION}", "", "[system]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in document["system"].items()]
    for key in LISTS:
        for entry in document[key]:
            lines += ["", f"[[{key}]]"] + [f"{k} = {toml_value(v)}" for k, v in entry.items()]
    if config.routing != model.Routing():
        lines += _routing_toml(document["routing"])
    return "\n".join(lines) + "\n"


def _routing_toml(table):
    def keys(entry, skip=()):
        return [f"{k} = {toml_value(v)}" for k, v in entry.items() if k not in skip]
    bgp = table["bgp"]
    lines = ["", "[routing]"] + keys(table, ("bgp", "ospf"))
    lines += ["", "[routing.bgp]"] + keys(bgp, ("neighbours",))
    for neighbour in bgp["neighbours"]:
        lines += ["", "[[routing.bgp.neighbours]]"] + keys(neighbour)
    for link in table["ospf"]:
        lines += ["", "[[routing.ospf]]"] + keys(link)
    return lines


_PASSWORD_LINE = re.compile(r'^(password = )"[^"\n]+"$', re.MULTILINE)


def redacted(text):
    """network.toml's text as a page shows it (a diff, a revision): each password
    replaced by "(hidden)"."""
    return _PASSWORD_LINE.sub(r'\1"(hidden)"', text)
