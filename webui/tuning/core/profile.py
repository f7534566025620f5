"""Tuning profiles: tuned-style INI files, one section per subsystem, a comment on
every value, inheritance through `[main] include = <profile>`.

Shipped profiles live in webui/tuning/profiles/ (on the image /usr/lib/tusk/tuning);
an operator's own in /etc/tusk/tuning (or $TUSK_TUNING_DIR: the web tests' agent),
which is searched first, so a file there may also replace a shipped one by name.
Every key is checked against SCHEMA here, before anything is detected or written;
the values that depend on the machine (an MTU above a NIC's maximum) are checked by
the planner, also before any write.

tusk-tune runs as root, from a job any admin (or a forged job row) can queue and from a
restored backup: a profile is looked up by name in the profile directories only, never
opened as a path, and [sysctl] takes only the network stack's sysctls (SYSCTL_PREFIXES),
not kernel.core_pattern or kernel.modprobe, which run a program as root.

A `*` in a [sysctl] name stands for an interface's name, and interface names are not
the profile's: a bond or VLAN an admin names, a NIC udev renames. So the allow-list is
decided on a sysctl's parts (the directories of its /proc/sys path), by one function
(sysctl_refusal) for both the pattern - could any interface's name make it a refused
sysctl? - and every path the planner and the applier are about to write. A name
with a dot (the VLAN eth0.100) is one part, as it is one directory.
"""
import configparser
import fnmatch
import os
import re
from dataclasses import dataclass

from tusklib.problems import Problem

from .errors import Code, TuneError

SHIPPED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "profiles")
OPERATOR_DIR = os.environ.get("TUSK_TUNING_DIR") or "/etc/tusk/tuning"
DEFAULT_PROFILE = "throughput"
# Whole strings only: \Z is the end of the string, where `$` would also match before a
# final newline ("name\n"). Used with fullmatch here; other apps' .match (the backup's)
# gets the whole string too.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
# names, and at most one * (an interface's name) between two of them: the planner fills
# in one *, so another, or one at the end, would be written as a file called "*"
SYSCTL = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?(\.[a-z0-9_]+)+\Z")
IFACE = re.compile(r"[^\s/:]{1,15}\Z")
MAX_INCLUDE_DEPTH = 8
NAME_RULE = "letters, digits and . _ -, at most 64, starting with a letter or digit"
# The sysctls a profile may set: the network stack's, which is what a firewall tunes.
SYSCTL_PREFIXES = (
    "net.core.",        # softirq budget and backlog, the RPS flow table, socket buffers
    "net.ipv4.",        # rp_filter per interface, the box's own TCP
    "net.ipv6.",        # the same for IPv6
    "net.netfilter.",   # the conntrack table's size and timeouts
)
ALLOWED = tuple(tuple(prefix.rstrip(".").split(".")) for prefix in SYSCTL_PREFIXES)
# ... except these, which are not tuning. Forwarding is switched on by the boot step
# (tusk-boot firewall) once a forward ruleset is loaded, and must stay off otherwise: a
# profile applied at boot or from a job must not turn it on with no ruleset in place.
# Each is a sysctl's parts, each part a shell pattern of one directory name (fnmatch);
# ... at the end: and anything below it.
FORWARDING = ("forwarding is the boot step's: tusk-boot firewall turns it on once a forward "
              "ruleset is loaded")
SYSCTL_REFUSED = (
    (("net", "ipv4", "ip_forward"), FORWARDING),
    (("net", "ipv[46]", "conf", "*", "forwarding"), FORWARDING),
    (("net", "ipv[46]", "conf", "*", "mc_forwarding"), FORWARDING),
    (("net", "core", "bpf_*", ...), "the BPF JIT's hardening is the kernel's security, not a "
     "network tune"),
    (("net", "ipv4", "ip_unprivileged_port_start"), "it would let unprivileged users (the "
     "web process) listen on the ports below 1024"),
    (("net", "ipv4", "conf", "*", "route_localnet"), "it would route 127.0.0.0/8 to and from "
     "the network: what listens on the box for the box alone would be reachable"),
)
ANY = "*"    # a pattern's part that any interface's name fills in


def keyword_or_int(keywords, low, high, power_of_two=False):
    def check(value):
        if value in keywords:
            return value
        try:
            number = int(value)
        except ValueError:
            choices = " or ".join(f"'{k}'" for k in keywords)
            raise ValueError(f"'{value}' is neither {choices} nor a whole number") from None
        if not low <= number <= high:
            raise ValueError(f"{number} is outside {low}..{high}")
        if power_of_two and number & (number - 1):
            raise ValueError(f"{number} is not a power of two (the kernel would round it up, "
                             "and verify would then see drift)")
        return number
    check.doc = " | ".join(list(keywords) + [f"{low}..{high}"])
    return check


def keyword(*keywords):
    def check(value):
        if value not in keywords:
            raise ValueError(f"'{value}' is not one of {', '.join(keywords)}")
        return value
    check.doc = " | ".join(keywords)
    return check


def text(value):
    return value


def profile_name(value):
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a profile name ({NAME_RULE})")
    return value


def sysctl_value(value):
    if not value or "\n" in value:
        raise ValueError("a sysctl value is one non-empty line")
    return " ".join(value.split())


SWITCH = keyword("keep", "on", "off")
SCHEMA = {
    "main": {"summary": text, "include": profile_name},
    "channels": {"combined": keyword_or_int(("keep", "max", "cores"), 1, 4096)},
    "rings": {"rx": keyword_or_int(("keep", "max"), 1, 65536),
              "tx": keyword_or_int(("keep", "max"), 1, 65536)},
    "irq": {"affinity": keyword("keep", "spread")},
    "rps": {"cpus": keyword("keep", "off", "auto"),
            "sock_flow_entries": keyword_or_int(("keep",), 0, 1 << 26, power_of_two=True)},
    "xps": {"cpus": keyword("keep", "off", "auto")},
    "features": {"gro": SWITCH, "gso": SWITCH, "tso": SWITCH, "lro": SWITCH},
    "pause": {"autoneg": SWITCH, "rx": SWITCH, "tx": SWITCH},
    "link": {"txqueuelen": keyword_or_int(("keep",), 1, 1_000_000),
             "mtu": keyword_or_int(("keep",), 68, 65535)},
}
INTERFACE_SCHEMA = {"mtu": SCHEMA["link"]["mtu"], "txqueuelen": SCHEMA["link"]["txqueuelen"],
                    "tune": keyword("yes", "no")}
AUTO_SYSCTLS = ("net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets")


@dataclass(frozen=True)
class Setting:
    value: object
    file: str
    why: str = ""               # the comment above the key in its file

    def place(self, section, key):
        return f"{self.file} [{section}] {key}"


@dataclass
class Profile:
    name: str
    path: str
    summary: str
    chain: list                 # this profile and what it includes, child first
    sections: dict              # section -> {key: Setting}, includes merged

    def get(self, section, key, default="keep"):
        setting = self.sections.get(section, {}).get(key)
        return setting.value if setting else default

    def setting(self, section, key):
        return self.sections.get(section, {}).get(key)

    def interfaces(self):
        """{interface name: {key: Setting}} from the [interface NAME] sections."""
        return {section.split(None, 1)[1]: keys for section, keys in self.sections.items()
                if section.startswith("interface ")}

    def sysctls(self):
        return self.sections.get("sysctl", {})


def search_dirs(extra=()):
    return [*extra, OPERATOR_DIR, SHIPPED_DIR]


def available(dirs=None):
    """{name: path} of every profile in the search directories (earlier ones win)."""
    found = {}
    for directory in reversed(dirs or search_dirs()):
        for entry in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
            if entry.endswith(".conf") and NAME.fullmatch(entry[:-5]):
                found[entry[:-5]] = os.path.join(directory, entry)
    return dict(sorted(found.items()))


def catalogue(dirs=None):
    """{name: {"path", "summary", "chain"}} of every available profile, or
    {"path", "error": the TuneError} for one that does not load: what an operator
    chooses from."""
    found = {}
    for name, path in available(dirs).items():
        try:
            loaded = load(name, dirs)
        except TuneError as error:
            found[name] = {"path": path, "error": error}
        else:
            found[name] = {"path": path, "summary": loaded.summary, "chain": loaded.chain}
    return found


def find(name, dirs=None):
    """The file of the profile called name: the first dirs/<name>.conf. A name only,
    never a path: whoever names a profile (a job row, a backup, an include) must not
    make root read a file elsewhere."""
    try:
        profile_name(name)
    except ValueError as error:
        raise TuneError(Code.PROFILE, "", str(error)) from None
    for directory in dirs or search_dirs():
        path = os.path.join(directory, name + ".conf")
        if os.path.isfile(path):
            return path
    names = ", ".join(available(dirs)) or "none"
    raise TuneError(Code.PROFILE, "", f"no profile '{name}' (there are: {names}; "
                    f"searched {', '.join(dirs or search_dirs())})")


def load(name, dirs=None):
    """The profile called name (searched in dirs) -> Profile, includes merged.
    Raises TuneError naming file, section and key for every problem found."""
    path = find(name, dirs)
    chain, files = [], []
    while path:
        if path in files:
            raise TuneError(Code.PROFILE, path, "includes itself: "
                            + " -> ".join(files + [path]))
        if len(files) == MAX_INCLUDE_DEPTH:
            raise TuneError(Code.PROFILE, path, f"more than {MAX_INCLUDE_DEPTH} levels of include")
        files.append(path)
        sections = parse_file(path)
        chain.append(sections)
        include = sections.get("main", {}).get("include")
        path = find(include.value, dirs) if include else None
    merged = {}
    for sections in reversed(chain):
        for section, keys in sections.items():
            target = merged.setdefault(section, {})
            for key, setting in keys.items():
                target[key] = setting
    main = chain[0].get("main", {})
    summary = main["summary"].value if "summary" in main else ""
    merged.get("main", {}).pop("include", None)
    return Profile(name, files[0], summary,
                   [os.path.basename(f)[:-5] for f in files], merged)


def parse_file(path):
    """One profile file -> {section: {key: Setting}}, every key and value checked."""
    parser = configparser.ConfigParser(interpolation=None, strict=True,
                                       comment_prefixes=("#", ";"),
                                       inline_comment_prefixes=None, empty_lines_in_values=False)
    parser.optionxform = str
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle, source=path)
    except OSError as error:
        raise TuneError(Code.PROFILE, path, f"cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TuneError(Code.PROFILE, path, "not UTF-8 text") from None
    except configparser.Error as error:
        raise TuneError(Code.PROFILE, path, syntax_problem(error)) from None
    problems, sections, why = [], {}, comments(path)
    for section in parser.sections():
        keys = sections[section] = {}
        schema = section_schema(section)
        if schema is None:
            problems.append(Problem(Code.PROFILE, f"{path} [{section}]",
                             "unknown section (known: " + ", ".join(
                                 list(SCHEMA) + ["sysctl", "interface NAME"]) + ")"))
            continue
        for key, raw in parser.items(section):
            place = f"{path} [{section}] {key}"
            if schema == "sysctl":
                refused = sysctl_refused(key)
                if refused:
                    problems.append(Problem(Code.PROFILE, place, refused))
                    continue
                check = sysctl_check(key)
            else:
                check = schema.get(key)
            if check is None:
                problems.append(Problem(Code.PROFILE, place, "unknown key (known: "
                                 + ", ".join(schema) + ")"))
                continue
            try:
                keys[key] = Setting(check(raw.strip()), path, why.get((section, key), ""))
            except ValueError as error:
                problems.append(Problem(Code.VALUE, place, str(error)))
    if problems:
        raise TuneError(problems)
    return sections


def section_schema(section):
    if section == "sysctl":
        return "sysctl"
    if section.startswith("interface "):
        name = section.split(None, 1)[1]
        return INTERFACE_SCHEMA if IFACE.fullmatch(name) else None
    return SCHEMA.get(section)


def syntax_problem(error):
    """configparser's error as its line and what is wrong, in words of our own: its
    messages quote the line, which is not ours to show (a job's error once showed the
    first line of a root-only file)."""
    kinds = ((configparser.MissingSectionHeaderError, "no [section] header before it"),
             (configparser.DuplicateSectionError, "a section given twice"),
             (configparser.DuplicateOptionError, "a key given twice in its section"),
             (configparser.ParsingError, "not a [section], key = value or # comment"))
    for kind, what in kinds:
        if isinstance(error, kind):
            line = getattr(error, "lineno", None) or error.errors[0][0]
            return f"line {line}: {what}"
    return "not a valid profile"


def sysctl_refused(key):
    """Why [sysctl] does not take key (a name, or a pattern with one *), or None. A
    pattern is refused when some interface's name in place of its * would make it a
    refused sysctl: net.ipv4.*.all.forwarding is net.ipv4.conf.all.forwarding on a box
    with a bond called conf."""
    if not isinstance(key, str) or not SYSCTL.fullmatch(key):
        return "unknown key: not a sysctl name (net.core.netdev_budget, " \
            "net.ipv4.conf.*.rp_filter)"
    return sysctl_refusal(key.split("."), pattern=True)


def sysctl_path_refused(parts):
    """Why tusk-tune does not write /proc/sys/PARTS (the directories and file of the path,
    an interface's name as it is: eth0.100 is one part), or None."""
    if not parts or not all(path_part(part) for part in parts):
        return "not a path tusk-tune writes (each part one directory name)"
    return sysctl_refusal(parts)


def path_part(part):
    """Whether part names one directory entry: not empty, not . or .., no / and no NUL."""
    return isinstance(part, str) and part not in ("", ".", "..") and not {"/", "\0"} & set(part)


def sysctl_refusal(parts, pattern=False):
    """Why the sysctl of these parts may not be set, or None: the one check of both a
    profile's names (pattern: a part "*" may be any interface's name) and the paths
    written. The network stack's only; of those, none that SYSCTL_REFUSED names."""
    if len(parts) < 3 or tuple(parts[:2]) not in ALLOWED:
        return f"not a sysctl a profile may set (allowed: {', '.join(SYSCTL_PREFIXES)})"
    for rule, why in SYSCTL_REFUSED:
        filled = fill(rule, parts, pattern)
        if filled is None:
            continue
        if filled != list(parts):
            name = next(rule[i] for i, part in enumerate(parts) if part != filled[i])
            like = "like " if set("*?[") & set(name) else ""
            return (f"not a sysctl a profile may set: an interface named {like}{name} "
                    f"would make it {sysctl_name(filled)}, and {why}")
        return f"not a sysctl a profile may set: {why}"
    return None


def fill(rule, parts, pattern):
    """parts as the rule's sysctl - a pattern's * replaced by the name that makes it
    that (or left as it is where the rule takes any) - or None if it cannot be."""
    length = len(rule) - (rule[-1] is ...)
    if len(parts) < length or (len(parts) > length and rule[-1] is not ...):
        return None
    filled = list(parts)
    for i, glob in enumerate(rule[:length]):
        if pattern and parts[i] == ANY:
            filled[i] = ANY if glob == "*" else glob
        elif not fnmatch.fnmatchcase(parts[i], glob):
            return None
    return filled


def sysctl_name(parts):
    """The parts as sysctl(8) names them: dots between, a dot within a part (eth0.100)
    written as a slash - net.ipv4.conf.eth0/100.rp_filter."""
    return ".".join(part.replace(".", "/") for part in parts)


def sysctl_check(key):
    if key in AUTO_SYSCTLS:
        return lambda value: value if value == "auto" else sysctl_value(value)
    return sysctl_value


def comments(path):
    """{(section, key): the comment lines right above the key, as one line}."""
    found, section, block = {}, None, []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stripped = line.strip()
            if stripped.startswith(("#", ";")):
                block.append(stripped.lstrip("#;").strip())
                continue
            if stripped.startswith("["):
                section = stripped.strip("[]").strip()
            elif "=" in stripped and block:
                found[(section, stripped.split("=", 1)[0].strip())] = " ".join(block)
            block = []
    return found


def uncommented(path):
    """[(section, key)] of the keys in a profile file with no comment line right above
    them: every value in a shipped profile says why."""
    why = comments(path)
    return [(section, key) for section, keys in parse_file(path).items()
            for key in keys if (section, key) not in why]
