"""A fake appliance for tusk-net and tusk-console: a --root tree with the NICs Linux
would show in /sys/class/net, and a command table (TUSK_COMMANDS) whose host programs
(systemctl, networkctl, ip, manage.py, tusk-install) are one recording script, so nothing
touches this host. Tusk's own programs run for real.

Not in conftest.py: see tuskcli.py.
"""
import json
import os
import subprocess
import sys
from dataclasses import dataclass

from lab.paths import ROOT

TUSK_NET = os.path.join(ROOT, "webui", "bin", "tusk-net")
TUSK_CONSOLE = os.path.join(ROOT, "webui", "bin", "tusk-console")

# Appends {"name", "argv", "tusk_config", "cwd"} to record.log beside it, then behaves as
# record.json says for "name first-arg" or "name": {"stdout", "stderr", "sleep", "rc"}.
RECORDER = """\
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
name, args = sys.argv[1], sys.argv[2:]
with open(os.path.join(here, "record.log"), "a") as log:
    log.write(json.dumps({"name": name, "argv": args, "cwd": os.getcwd(),
                          "tusk_config": os.environ.get("TUSK_CONFIG")}) + "\\n")
with open(os.path.join(here, "record.json")) as handle:
    behaviour = json.load(handle)
act = behaviour.get(" ".join([name] + args[:1])) or behaviour.get(name) or {}
sys.stdout.write(act.get("stdout", ""))
sys.stderr.write(act.get("stderr", ""))
sys.stdout.flush()
time.sleep(act.get("sleep", 0))
sys.exit(act.get("rc", 0))
"""
HOST_COMMANDS = ("systemctl", "networkctl", "ip", "manage", "tusk-install", "tusk-boot", "vtysh",
                 "frr-reload")


@dataclass
class Nic:
    name: str
    mac: str = "52:54:00:12:34:56"
    carrier: str | None = "1"      # None: the file cannot be read (an interface that is down)
    operstate: str = "up"
    type: str = "1"
    device: bool = True            # a device behind it (veth, bridges, tunnels: none)
    driver: str = "virtio_net"
    extra: tuple = ()              # directories such as "wireless", "bridge"
    uevent: str = ""


def add_nics(root, *nics):
    """/sys/class/net/<name> as Linux lays it out, the device a link into /sys/devices."""
    net = os.path.join(root, "sys", "class", "net")
    for nic in nics:
        base = os.path.join(net, nic.name)
        os.makedirs(base)
        files = {"type": nic.type, "address": nic.mac, "operstate": nic.operstate,
                 "uevent": nic.uevent or f"INTERFACE={nic.name}\nIFINDEX=2"}
        if nic.carrier is not None:
            files["carrier"] = nic.carrier
        for name, text in files.items():
            with open(os.path.join(base, name), "w") as handle:
                handle.write(text + "\n")
        for directory in nic.extra:
            os.makedirs(os.path.join(base, directory))
        if nic.device:
            device = os.path.join(root, "sys", "devices", "pci0000:00", nic.name)
            driver = os.path.join(root, "sys", "bus", "pci", "drivers", nic.driver)
            os.makedirs(device)
            os.makedirs(driver, exist_ok=True)
            os.symlink(os.path.relpath(device, base), os.path.join(base, "device"))
            os.symlink(os.path.relpath(driver, device), os.path.join(device, "driver"))
    return root


def ip_json(*addresses):
    """What `ip -j addr show dev X` prints: (family, address, prefix, scope) tuples."""
    return json.dumps([{"ifindex": 2, "ifname": "x", "addr_info": [
        {"family": family, "local": address, "prefixlen": prefix, "scope": scope}
        for family, address, prefix, scope in addresses]}])


class Appliance:
    """A --root tree, its command table and what the host programs were asked."""

    def __init__(self, root, *nics, data="tmpfs"):
        self.root = str(root)
        os.makedirs(self.root, exist_ok=True)
        add_nics(self.root, *nics)
        os.makedirs(self.path("/proc"))
        with open(self.path("/proc/mounts"), "w") as handle:
            handle.write("/dev/root / ext4 rw 0 0\n")
            if data:
                handle.write(f"tusk-live /data {data} rw 0 0\n")
        self.bin = os.path.join(self.root, "fakebin")
        os.makedirs(self.bin)
        with open(os.path.join(self.bin, "record.py"), "w") as handle:
            handle.write(RECORDER)
        self.behave({"systemctl is-active": {"rc": 3}})
        self.table = {name: [sys.executable, os.path.join(self.bin, "record.py"), name]
                      for name in HOST_COMMANDS}

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def behave(self, behaviour):
        with open(os.path.join(self.bin, "record.json"), "w") as handle:
            json.dump(behaviour, handle)

    def env(self, **extra):
        return dict(os.environ, TUSK_COMMANDS=json.dumps(self.table), **extra)

    def calls(self):
        """[(name, argv...)] of the host programs run, in order."""
        try:
            with open(os.path.join(self.bin, "record.log")) as handle:
                return [json.loads(line) for line in handle]
        except FileNotFoundError:
            return []

    def commands(self):
        return [(call["name"], *call["argv"]) for call in self.calls()]

    def read(self, path):
        with open(self.path(path)) as handle:
            return handle.read()

    def write(self, path, text):
        os.makedirs(os.path.dirname(self.path(path)), exist_ok=True)
        with open(self.path(path), "w") as handle:
            handle.write(text)

    def network_files(self):
        directory = self.path("/run/systemd/network")
        if not os.path.isdir(directory):
            return {}
        return {name: open(os.path.join(directory, name)).read()
                for name in sorted(os.listdir(directory))}

    def tusk_net(self, *args, env=None):
        return subprocess.run([sys.executable, TUSK_NET, "--root", self.root, *args],
                              capture_output=True, text=True, env=env or self.env())
