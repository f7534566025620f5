"""What a plan is, as data and as text: the Writes (old -> new, why) in order, the
warnings, and the hardware they were planned for. planner.py makes one; applier.py
carries it out and keeps its Writes in the state file; the CLI and the web UI show it."""
from dataclasses import dataclass, field

from . import hardware
from .hardware import format_cpu_list
from .host import ETHTOOL_SETS, ethtool_key, ethtool_value


@dataclass(frozen=True)
class Write:
    """One value to set. kind "file" (path) or "ethtool" (iface, section, key).
    form says how values compare: text, words, int, cpulist, mask, bool."""
    kind: str
    target: tuple
    old: object
    new: object
    reason: str
    form: str = "text"
    iface: str = ""

    @property
    def phase(self):
        return 1 if self.kind == "ethtool" and self.target[1] == "channels" else 2

    @property
    def label(self):
        if self.kind == "file":
            return self.target[0]
        iface, section, key = self.target
        return f"ethtool {ETHTOOL_SETS[section]} {iface} {ethtool_key(section, key)}"

    def show(self, value):
        if value is None:
            return "(none yet)"
        if self.kind == "ethtool":
            return ethtool_value(value)
        if self.form == "mask":
            cpus = hardware.parse_mask(value)
            return f"{value} (cpus {format_cpu_list(cpus) or 'none'})"
        return str(value)

    def line(self):
        return f"{self.label}: {self.show(self.old)} -> {self.show(self.new)}  # {self.reason}"

    def as_dict(self):
        return {"kind": self.kind, "target": list(self.target), "old": self.old, "new": self.new,
                "reason": self.reason, "form": self.form, "iface": self.iface,
                "label": self.label, "line": self.line()}

    @staticmethod
    def from_dict(data):
        return Write(data["kind"], tuple(data["target"]), data["old"], data["new"],
                     data["reason"], data["form"], data["iface"])


def same(form, a, b):
    """Whether two values of a knob are equal in the kernel's eyes."""
    if a is None or b is None:
        return a is b
    if form == "cpulist":
        return hardware.parse_cpu_list(str(a)) == hardware.parse_cpu_list(str(b))
    if form == "mask":
        return hardware.parse_mask(str(a)) == hardware.parse_mask(str(b))
    if form == "words":
        return str(a).split() == str(b).split()
    if form == "int":
        try:
            return int(a) == int(b)
        except ValueError:
            return False
    return a == b


@dataclass(frozen=True)
class Warning:
    kind: str       # pcie, smt, rps, mtu, unsupported, irq
    message: str

    def line(self):
        return f"{self.kind}: {self.message}"


@dataclass
class Plan:
    profile: object
    machine: object
    writes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def warn(self, kind, message):
        warning = Warning(kind, message)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def text(self):
        lines = [f"profile {self.profile.name} ({' <- '.join(self.profile.chain)}) on "
                 f"{self.machine.host_name}",
                 f"hardware: {self.machine.summary()}"]
        for nic in self.machine.nics:
            lines.append("  " + describe_nic(nic))
        if self.machine.virtual:
            lines.append("  virtual, not tuned unless a profile names them: "
                         + ", ".join(self.machine.virtual))
        lines.append(f"writes ({len(self.writes)}):")
        lines += [f"  {write.line()}" for write in self.writes]
        lines += [f"  note: {note}" for note in self.notes]
        lines.append(f"warnings ({len(self.warnings)}):")
        lines += [f"  {warning.line()}" for warning in self.warnings]
        return "\n".join(lines) + "\n"

    def as_dict(self):
        return {"profile": self.profile.name, "chain": self.profile.chain,
                "summary": self.profile.summary, "hardware": machine_dict(self.machine),
                "writes": [w.as_dict() for w in self.writes], "notes": self.notes,
                "warnings": [{"kind": w.kind, "message": w.message} for w in self.warnings]}


def describe_nic(nic):
    parts = [nic.name, nic.driver or "unknown driver"]
    if nic.virtual:
        parts.append("virtual")
    parts.append(f"{nic.speed_mbps} Mb/s" if nic.speed_mbps else "speed unknown")
    if nic.pci:
        parts.append(f"{nic.pci.address} {nic.pci.describe()} ({nic.pci.usable_gbps} Gbit/s "
                     "usable each way)")
    if nic.numa_node >= 0:
        parts.append(f"node {nic.numa_node}")
    parts.append(f"{len(nic.rx_queues)} rx/{len(nic.tx_queues)} tx queues")
    parts.append(f"{len(nic.queue_irqs)} queue IRQs")
    parts.append(f"MTU {nic.mtu}" + (f" (max {nic.mtu_range['max']})" if nic.mtu_range else ""))
    return ", ".join(parts)


def machine_dict(machine):
    return {
        "summary": machine.summary(), "memory_kib": machine.memory_kib, "smt": machine.smt,
        "cpus": [{"id": c.id, "package": c.package, "core": c.core, "node": c.node,
                  "siblings": format_cpu_list(c.siblings)} for c in machine.cpus],
        "nics": [{"name": n.name, "driver": n.driver, "virtual": n.virtual,
                  "numa_node": n.numa_node, "speed_mbps": n.speed_mbps, "mtu": n.mtu,
                  "mtu_range": n.mtu_range, "txqueuelen": n.txqueuelen,
                  "rx_queues": len(n.rx_queues), "tx_queues": len(n.tx_queues),
                  "queue_irqs": len(n.queue_irqs),
                  "pci": None if n.pci is None else {
                      "address": n.pci.address, "link": n.pci.describe(),
                      "card": n.pci.describe(n.pci.max_speed, n.pci.max_width)
                      if n.pci.max_speed else None, "usable_gbps": n.pci.usable_gbps},
                  "channels": (n.ethtool.get("channels") or {}).get("current"),
                  "rings": (n.ethtool.get("rings") or {}).get("current"),
                  "describe": describe_nic(n)} for n in machine.nics],
        "virtual": machine.virtual,
    }
