"""Where tusk-tune reads and writes: the running system (SystemHost) or a fake tree of
/sys and /proc with the NICs' ethtool state as JSON (TreeHost, for tests and for
planning another machine from a copy of its files).

Everything in /sys and /proc is a file path; what lives behind ethtool (channels,
rings, features, pause) and the MTU limits (netlink) have their own calls. One
parsed shape serves both hosts:

    {"driver": "ixgbe",
     "channels": {"max": {"rx": None, "tx": None, "other": 1, "combined": 63},
                  "current": {...}} or None,           # None: the driver has none
     "rings": {"max": {"rx": 4096, "tx": 4096}, "current": {...}} or None,
     "features": {"generic-receive-offload": {"on": True, "fixed": False}, ...} or None,
     "pause": {"autoneg": False, "rx": True, "tx": True} or None,
     "mtu_range": {"min": 68, "max": 9710}}
"""
import errno
import json
import os
import shutil
import subprocess

from .errors import Code, TuneError

ETHTOOL_QUERIES = {"channels": "-l", "rings": "-g", "features": "-k", "pause": "-a"}
ETHTOOL_SETS = {"channels": "-L", "rings": "-G", "features": "-K", "pause": "-A"}
# ethtool -K takes short names; -k prints long ones.
FEATURE_SHORT = {"generic-receive-offload": "gro", "generic-segmentation-offload": "gso",
                 "tcp-segmentation-offload": "tso", "large-receive-offload": "lro",
                 "rx-gro-hw": "rx-gro-hw"}


class Unsupported(Exception):
    """The driver or kernel does not offer this knob (EOPNOTSUPP, a fixed feature,
    an IRQ whose affinity the kernel manages, a sysctl read-only in this namespace)."""


def parse_number(text):
    text = text.strip()
    return None if text in ("n/a", "") else int(text)


def parse_two_sections(text, keys):
    """ethtool -l / -g output -> {"max": {...}, "current": {...}} with only `keys`
    (lower case: "RX Mini" is not "rx")."""
    result, section = {"max": {}, "current": {}}, None
    for line in text.splitlines():
        if line.startswith("Pre-set maximums"):
            section = "max"
        elif line.startswith("Current hardware settings"):
            section = "current"
        elif section and ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            if key in keys and key not in result[section]:
                try:
                    result[section][key] = parse_number(value)
                except ValueError:
                    result[section][key] = None
    for section in result.values():
        for key in keys:
            section.setdefault(key, None)
    return result


def parse_channels(text):
    return parse_two_sections(text, ("rx", "tx", "other", "combined"))


def parse_rings(text):
    return parse_two_sections(text, ("rx", "tx"))


def parse_features(text):
    """ethtool -k -> {name: {"on": bool, "fixed": bool}}, top-level and sub-features."""
    features = {}
    for line in text.splitlines()[1:]:
        if ":" not in line:
            continue
        name, value = line.split(":", 1)
        words = value.split()
        if not words:
            continue
        features[name.strip()] = {"on": words[0] == "on", "fixed": "[fixed]" in value}
    return features


def parse_pause(text):
    keys = {"autonegotiate": "autoneg", "rx": "rx", "tx": "tx"}
    pause = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            if key.strip().lower() in keys:
                pause[keys[key.strip().lower()]] = value.strip() == "on"
    return pause if len(pause) == 3 else None


def parse_driver(text):
    for line in text.splitlines():
        if line.startswith("driver:"):
            return line.split(":", 1)[1].strip() or None
    return None


PARSERS = {"channels": parse_channels, "rings": parse_rings, "features": parse_features,
           "pause": parse_pause}


class SystemHost:
    """The running system (or the network namespace tusk-tune was started in)."""

    name = "this system"

    def read(self, path):
        """The file's text without the final newline, or None if it does not exist
        or cannot be read."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read().rstrip("\n")
        except OSError:
            return None

    def write(self, path, value):
        """Writes value; an OSError the kernel returns is raised as Unsupported when it
        means the knob cannot be set here, as it is otherwise."""
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(str(value))
        except OSError as error:
            if error.errno in (errno.EOPNOTSUPP, errno.EACCES, errno.EPERM, errno.EIO):
                raise Unsupported(os.strerror(error.errno)) from None
            raise

    def listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def exists(self, path):
        return os.path.exists(path)

    def realpath(self, path):
        return os.path.realpath(path)

    def writable(self, path):
        """Whether the file's mode allows writing (root ignores it for ordinary files,
        but a sysctl that is read-only in a network namespace has mode 0444)."""
        try:
            return bool(os.stat(path).st_mode & 0o222)
        except OSError:
            return False

    def ethtool(self, iface):
        if shutil.which("ethtool") is None:
            raise TuneError(Code.IO, "ethtool", "not installed: tusk-tune reads and sets "
                            "channels, rings, offloads and pause with it (Debian package "
                            "ethtool)")
        state = {"driver": parse_driver(self._ethtool("-i", iface) or "")}
        for kind, option in ETHTOOL_QUERIES.items():
            text = self._ethtool(option, iface)
            state[kind] = PARSERS[kind](text) if text is not None else None
        state["mtu_range"] = self._mtu_range(iface)
        return state

    def _ethtool(self, option, iface):
        result = subprocess.run(["ethtool", option, iface], capture_output=True, text=True)
        return result.stdout if result.returncode == 0 else None

    def _mtu_range(self, iface):
        result = subprocess.run(["ip", "-d", "-j", "link", "show", "dev", iface],
                                capture_output=True, text=True)
        if result.returncode != 0:
            return None
        link = json.loads(result.stdout)[0]
        if "max_mtu" not in link:
            return None
        return {"min": link.get("min_mtu", 68), "max": link["max_mtu"]}

    def ethtool_set(self, iface, kind, key, value):
        argv = ["ethtool", ETHTOOL_SETS[kind], iface, ethtool_key(kind, key),
                ethtool_value(value)]
        result = subprocess.run(argv, capture_output=True, text=True)
        message = (result.stderr or result.stdout).strip()
        if result.returncode != 0:
            if "not supported" in message.lower():
                raise Unsupported(message)
            if "could not change any device features" in message.lower():
                # the kernel kept the feature as it was: one it depends on is off (GSO
                # without scatter-gather, e.g. virtio-net on a backend without offloads)
                raise Unsupported(f"{message} (the driver cannot turn {key} "
                                  f"{ethtool_value(value)} with its other features as they are)")
            raise OSError(errno.EINVAL, f"{' '.join(argv)}: {message}")

    def boot_id(self):
        return self.read("/proc/sys/kernel/random/boot_id") or "unknown"


def ethtool_key(kind, key):
    return FEATURE_SHORT.get(key, key) if kind == "features" else key


def ethtool_value(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class TreeHost:
    """A fake machine: root/sys, root/proc and root/ethtool/<iface>.json. Symbolic links
    in the tree are relative, so it can live anywhere. Writes change the tree, so a
    plan, an apply, a verify and a rollback can run against it in turn; `writes`
    records them in order."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.name = f"the tree {self.root}"
        self.writes = []

    def _path(self, path):
        return self.root + path

    def read(self, path):
        try:
            with open(self._path(path), encoding="utf-8") as handle:
                return handle.read().rstrip("\n")
        except OSError:
            return None

    def write(self, path, value):
        if not self.writable(path):
            raise Unsupported("read-only")
        self.writes.append((path, str(value)))
        with open(self._path(path), "w", encoding="utf-8") as handle:
            handle.write(f"{value}\n")

    def listdir(self, path):
        try:
            return sorted(os.listdir(self._path(path)))
        except OSError:
            return []

    def exists(self, path):
        return os.path.exists(self._path(path))

    def realpath(self, path):
        real = os.path.realpath(self._path(path))
        return real[len(self.root):] if real.startswith(self.root) else real

    def writable(self, path):
        try:
            return bool(os.stat(self._path(path)).st_mode & 0o222)
        except OSError:
            return False

    def _ethtool_file(self, iface):
        return os.path.join(self.root, "ethtool", f"{iface}.json")

    def ethtool(self, iface):
        try:
            with open(self._ethtool_file(iface), encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            state = {}
        return {"driver": state.get("driver"), "channels": state.get("channels"),
                "rings": state.get("rings"), "features": state.get("features"),
                "pause": state.get("pause"), "mtu_range": state.get("mtu_range")}

    def ethtool_set(self, iface, kind, key, value):
        state = self.ethtool(iface)
        section = state.get(kind)
        if section is None:
            raise Unsupported("Operation not supported")
        self.writes.append((f"ethtool {ETHTOOL_SETS[kind]} {iface} {ethtool_key(kind, key)}",
                            ethtool_value(value)))
        if kind == "features":
            if section[key]["fixed"]:
                raise Unsupported(f"{key} is fixed")
            section[key]["on"] = value
        elif kind == "pause":
            section[key] = value
        else:
            section["current"][key] = value
            if kind == "channels":
                self._resize_queues(iface, state["channels"]["current"])
        with open(self._ethtool_file(iface), "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1, sort_keys=True)

    def _resize_queues(self, iface, channels):
        """What the kernel does on ethtool -L: queue directories appear and go."""
        combined = channels.get("combined") or 0
        for prefix, count, files in (
                ("rx", combined + (channels.get("rx") or 0), ("rps_cpus", "rps_flow_cnt")),
                ("tx", combined + (channels.get("tx") or 0), ("xps_cpus",))):
            queues = f"{self.root}/sys/class/net/{iface}/queues"
            for name in os.listdir(queues):
                if name.startswith(prefix + "-") and int(name.split("-")[1]) >= count:
                    for file in os.listdir(f"{queues}/{name}"):
                        os.unlink(f"{queues}/{name}/{file}")
                    os.rmdir(f"{queues}/{name}")
            for index in range(count):
                os.makedirs(f"{queues}/{prefix}-{index}", exist_ok=True)
                for file in files:
                    path = f"{queues}/{prefix}-{index}/{file}"
                    if not os.path.exists(path):
                        with open(path, "w") as handle:
                            handle.write("0\n")

    def boot_id(self):
        return self.read("/proc/sys/kernel/random/boot_id") or "tree"
