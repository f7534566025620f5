"""The SNMP document (/etc/tusk/snmp.toml, the SNMP page's form) -> the model, or every
problem at once (docs/MONITORING.md, "SNMP"):

    [snmp]
    enabled = true
    location = "Hall B, rack 4"       # sysLocation, one line of printable ASCII
    contact = "noc@example.net"       # sysContact
    allow = ["192.0.2.0/24"]          # who may ask: the host table admits UDP 161 from these

    [[user]]                          # SNMPv3, always authPriv (USM, RFC 3414)
    name = "noc"
    auth = "SHA-256"                  # SHA-256 | SHA-384 | SHA-512 (RFC 7860)
    auth_passphrase = "..."           # 8-64 characters
    privacy = "AES"                   # AES-128 (RFC 3826)
    privacy_passphrase = "..."

    [community]                       # optional: read-only SNMPv2c, only from its own
    name = "..."                      # prefixes (which must be inside allow's)
    allow = ["192.0.2.7/32"]

The passphrases and the community are secrets: the agent keeps them in root's files, and
what it mirrors for the web process (redacted()) has none of them. So a document may leave
a user's passphrase (or the community's name) out to keep the one in force: the agent
fills it in (fill()) from the configuration in force, for a user of the same name.

First every unknown, missing or mistyped key (SCHEMA); then every bad value (VALUE).
Plain Python: no Django, no app."""
import ipaddress
import os
import tomllib
from dataclasses import dataclass, replace
from enum import IntEnum

from tusklib import tomlread, values
from tusklib.formats import FormatRefused, snmpd
from tusklib.problems import Problem, Problems, table_values, type_name
from tusklib.tomlwrite import toml_value

DEFAULT_PATH = "/etc/tusk/snmp.toml"
TEXT_MAX = 1 << 16
AUTH = ("SHA-256", "SHA-384", "SHA-512")
PRIVACY = ("AES",)
USERS_MAX = 8
ALLOW_MAX = 16
NAME_MAX = 32
PASSPHRASE_MIN, PASSPHRASE_MAX = 8, 64    # USM's minimum; net-snmp refuses shorter
COMMUNITY_MIN, COMMUNITY_MAX = 8, 32
TEXT_LENGTH = 255                          # sysLocation/sysContact: DisplayString
SECRETS = ("auth_passphrase", "privacy_passphrase")


class Code(IntEnum):
    """Stable error codes (tusk-snmp's exit statuses)."""

    SYNTAX = 80
    SCHEMA = 81
    VALUE = 82
    IO = 83
    LOCKED = 84
    NOT_PENDING = 85
    REVISION = 86
    APPLY = 87


class SnmpError(Problems):
    """One or more problems, each naming the field (user[1].auth_passphrase) and why."""

    codes = Code


@dataclass(frozen=True)
class User:
    """An SNMPv3 user; a passphrase None: the one in force is kept (fill())."""

    name: str
    auth: str
    auth_passphrase: str | None
    privacy: str
    privacy_passphrase: str | None

    def __repr__(self):     # never a passphrase in a log or a traceback
        return f"User({self.name!r}, {self.auth}, {self.privacy})"


@dataclass(frozen=True)
class Community:
    """The read-only SNMPv2c community; name None: the one in force is kept."""

    name: str | None
    allow: tuple

    def __repr__(self):
        return f"Community(<hidden>, {self.allow})"


@dataclass(frozen=True)
class SnmpConfig:
    enabled: bool
    location: str
    contact: str
    allow: tuple
    users: tuple
    community: Community | None = None

    def prefixes(self):
        """Every prefix the host table admits UDP 161 from (allow's: the community's are
        inside them)."""
        return self.allow if self.enabled else ()


OFF = SnmpConfig(enabled=False, location="", contact="", allow=(), users=())
SNMP_KEYS = {"enabled": (bool, None), "location": (str, ""), "contact": (str, ""),
             "allow": (list, [])}
USER_KEYS = {"name": (str, None), "auth": (str, "SHA-256"), "auth_passphrase": (str, ""),
             "privacy": (str, "AES"), "privacy_passphrase": (str, "")}
COMMUNITY_KEYS = {"name": (str, ""), "allow": (list, None)}


def from_document(document):
    """The model of a document (a dict as snmp.toml parses), checked whole - a passphrase
    or community left out (or "") is None: kept. Raises SnmpError with every problem."""
    if not isinstance(document, dict):
        raise SnmpError(Code.SCHEMA, "", f"must be a table, got {type_name(document)}")
    problems = []
    for key in document:
        if key not in ("snmp", "user", "community"):
            problems.append(Problem(Code.SCHEMA, key, "unknown section (known: [snmp], "
                                                      "[[user]], [community])"))
    snmp = document.get("snmp")
    found = None
    if not isinstance(snmp, dict):
        problems.append(Problem(Code.SCHEMA, "snmp", "missing: the [snmp] table is required"
                                if snmp is None else "must be a table, written [snmp]"))
    else:
        found = table_values(snmp, SNMP_KEYS, "snmp", problems, Code.SCHEMA)
    entries = document.get("user", [])
    users = []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(Problem(Code.SCHEMA, "user", "must be an array of tables, each "
                                "written [[user]] (with two brackets)"))
    else:
        for index, entry in enumerate(entries):
            user = table_values(entry, USER_KEYS, f"user[{index}]", problems, Code.SCHEMA)
            if user is not None:
                users.append(User(**{k: (v or None) if k in SECRETS else v
                                     for k, v in user.items()}))
    community = None
    if "community" in document:
        table = document["community"]
        if not isinstance(table, dict):
            problems.append(Problem(Code.SCHEMA, "community", "must be a table, written "
                                                              "[community]"))
        else:
            found_community = table_values(table, COMMUNITY_KEYS, "community", problems,
                                           Code.SCHEMA)
            if found_community is not None:
                community = Community(found_community["name"] or None,
                                      found_community["allow"])
    if problems:
        raise SnmpError(problems)
    config = SnmpConfig(enabled=found["enabled"], location=found["location"],
                        contact=found["contact"], allow=found["allow"], users=tuple(users),
                        community=community)
    problems = validate(config)
    if problems:
        raise SnmpError(problems)
    return _canonical(config)


def _canonical(config):
    """Prefixes in their canonical text (values.IPNetwork)."""
    def nets(items):
        return tuple(str(values.IPNetwork(item)) for item in items)
    community = config.community and replace(config.community,
                                             allow=nets(config.community.allow))
    return replace(config, allow=nets(config.allow), community=community)


def _text_problem(value):
    """Why value cannot be sysLocation's or sysContact's text ("": none written)."""
    try:
        text = values.Text(value, TEXT_LENGTH)
        if value:
            snmpd.rest("sysLocation", text)
    except (values.Refused, FormatRefused) as refused:
        return str(refused)
    return None


def _prefix_problems(items, where, bad):
    """Each prefix of items checked -> the ip_networks that are good."""
    good = []
    if len(items) > ALLOW_MAX:
        bad(where, f"{len(items)} prefixes; at most {ALLOW_MAX}")
    for index, item in enumerate(items):
        reason = values.IPNetwork.problem(item)
        if reason is None:
            net = ipaddress.ip_network(str(values.IPNetwork(item)))
            if net.network_address.is_multicast:
                reason = f"{item} is multicast: no one asks from there"
            elif net.network_address.is_loopback:
                reason = f"{item} is loopback: the box asks itself without the host table"
        if reason:
            bad(f"{where}[{index}]", reason)
        else:
            good.append(net)
    return good


def validate(config):  # noqa: C901 - one check per field, each naming it
    """Every bad value of a well-formed model -> [Problem]. A passphrase None is kept,
    not checked here (fill() checks the one it takes)."""
    problems = []

    def bad(path, message):
        problems.append(Problem(Code.VALUE, path, message))

    for key in ("location", "contact"):
        reason = _text_problem(getattr(config, key))
        if reason:
            bad(f"snmp.{key}", reason)
    allowed = _prefix_problems(config.allow, "snmp.allow", bad)
    if config.enabled and not config.allow:
        bad("snmp.allow", "at least one prefix the managers ask from (0.0.0.0/0 and ::/0 "
                          "let anyone try)")
    if config.enabled and not config.users and config.community is None:
        bad("user", "at least one user (or a community): no one could ask otherwise")
    if len(config.users) > USERS_MAX:
        bad("user", f"{len(config.users)} users; at most {USERS_MAX}")
    seen = {}
    for index, user in enumerate(config.users):
        where = f"user[{index}]"
        reason = values.Identifier.problem(user.name, NAME_MAX)
        if reason:
            bad(f"{where}.name", reason)
        elif user.name in seen:
            bad(f"{where}.name", f"{user.name} is user[{seen[user.name]}] already")
        else:
            seen[user.name] = index
        if user.auth not in AUTH:
            bad(f"{where}.auth", f"{user.auth!r:.40}: must be one of {', '.join(AUTH)} "
                                 "(MD5 and SHA-1 are not offered)")
        if user.privacy not in PRIVACY:
            bad(f"{where}.privacy", f"{user.privacy!r:.40}: must be AES (AES-128, RFC 3826);"
                                    " DES is not offered")
        for key in SECRETS:
            passphrase = getattr(user, key)
            reason = passphrase is not None and secret_problem(passphrase, PASSPHRASE_MIN,
                                                               PASSPHRASE_MAX)
            if reason:
                bad(f"{where}.{key}", reason)
        if user.auth_passphrase is not None and user.auth_passphrase == user.privacy_passphrase:
            bad(f"{where}.privacy_passphrase", "must differ from the authentication "
                                               "passphrase")
    if config.community is not None:
        reason = config.community.name is not None and secret_problem(
            config.community.name, COMMUNITY_MIN, COMMUNITY_MAX)
        if reason:
            bad("community.name", reason)
        if not config.community.allow:
            bad("community.allow", "at least one prefix: SNMPv2c sends the community in "
                                   "clear, so it is only taken from addresses named here")
        for index, net in enumerate(_prefix_problems(config.community.allow,
                                                     "community.allow", bad)):
            if not any(net.version == outer.version and net.subnet_of(outer)
                       for outer in allowed):
                bad(f"community.allow[{index}]", f"{net} is not inside any of snmp.allow's "
                                                 "prefixes: the host table would drop it")
    return problems


def secret_problem(text, low, high):
    """Why text cannot be a passphrase or a community (too short, a character
    snmpd.conf's words or the other daemons' files would not hold), or None."""
    reason = values.Secret.problem(text, high)
    if reason:
        return reason
    if len(text) < low:
        return f"is {len(text)} characters long; at least {low}"
    return None


def fill(config, keep):
    """config with each secret left out taken from keep (the configuration in force, or
    None) - a user's from keep's user of the same name. SnmpError naming each that
    cannot be filled."""
    kept = {user.name: user for user in (keep.users if keep else ())}
    problems, users = [], []
    for index, user in enumerate(config.users):
        found = {}
        for key in SECRETS:
            if getattr(user, key) is None:
                old = kept.get(user.name)
                found[key] = getattr(old, key) if old else None
                if found[key] is None:
                    problems.append(Problem(Code.VALUE, f"user[{index}].{key}", "missing: a "
                                            f"new user ({user.name}) needs its passphrase"))
        users.append(replace(user, **found))
    community = config.community
    if community is not None and community.name is None:
        old = keep.community.name if keep and keep.community else None
        if old is None:
            problems.append(Problem(Code.VALUE, "community.name", "missing: a new community "
                                                                  "needs its name"))
        community = replace(community, name=old)
    if problems:
        raise SnmpError(problems)
    return replace(config, users=tuple(users), community=community)


def to_document(config, secrets=True):
    """The model -> the document from_document takes; secrets False: without passphrases
    and community (what the web process sees)."""
    snmp = {"enabled": config.enabled, "location": config.location,
            "contact": config.contact, "allow": list(config.allow)}
    users = []
    for user in config.users:
        entry = {"name": user.name, "auth": user.auth, "privacy": user.privacy}
        if secrets:
            entry.update(auth_passphrase=user.auth_passphrase,
                         privacy_passphrase=user.privacy_passphrase)
        users.append(entry)
    document = {"snmp": snmp, "user": users}
    if config.community is not None:
        document["community"] = {"allow": list(config.community.allow)}
        if secrets:
            document["community"] = {"name": config.community.name, **document["community"]}
    return document


HEADER = ("# Tusk's SNMP agent: the dashboard (SNMP) writes this file; docs/MONITORING.md\n"
          "# describes every key. The passphrases make it root's alone.\n")


def to_toml(config, secrets=True):
    """The model -> snmp.toml's text, deterministic: parse(to_toml(c)) == c."""
    document = to_document(config, secrets)
    lines = [HEADER.rstrip("\n"), "[snmp]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in document["snmp"].items()]
    for entry in document["user"]:
        lines += ["", "[[user]]"] + [f"{k} = {toml_value(v)}" for k, v in entry.items()
                                     if v is not None]
    if "community" in document:
        lines += ["", "[community]"] + [f"{k} = {toml_value(v)}"
                                        for k, v in document["community"].items()
                                        if v is not None]
    return "\n".join(lines) + "\n"


def redacted(text):
    """snmp.toml's text without its secrets, for the web process's mirror; "" when the
    text is not a configuration."""
    try:
        return to_toml(parse(text), secrets=False)
    except SnmpError:
        return ""


def parse(text):
    """The model of snmp.toml's text; raises SnmpError."""
    if len(text) > TEXT_MAX:
        raise SnmpError(Code.SYNTAX, "", f"{len(text)} characters: more than the "
                        f"{TEXT_MAX} an snmp.toml may have")
    try:
        document = tomlread.checked(tomllib.loads(text), text)
    except tomlread.TomlError as error:
        raise SnmpError(Code.SYNTAX, "", error.described()) from None
    except (ValueError, RecursionError) as error:
        raise SnmpError(Code.SYNTAX, "", tomlread.error_of(error, text).described()) from None
    return from_document(document)


def load(path=DEFAULT_PATH):
    """The model of the file at path; OFF when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(TEXT_MAX + 1)
    except FileNotFoundError:
        return OFF
    except OSError as error:
        raise SnmpError(Code.IO, "", f"{path}: {error.strerror}") from None
    return parse(text)


def in_force(path=DEFAULT_PATH):
    """(the model, None) of path - OFF when there is none -, or (OFF, why) when it cannot
    be used: for the boot and the host table, which then admit no SNMP and say so."""
    if not os.path.exists(path):
        return OFF, None
    try:
        return load(path), None
    except SnmpError as error:
        return OFF, f"{path}: {error}"
