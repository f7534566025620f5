"""Detection: what the machine has, read from /sys and /proc (and ethtool) through a
Host. Nothing here writes.

CPUs: online ones, their core and package (topology/), NUMA node (node*/cpulist),
SMT siblings. NICs: every interface with a device behind it (virtual interfaces only
when a profile names them), its driver, queues, per-queue interrupts (the PCI
function's msi_irqs, named in /proc/interrupts), RPS/XPS, ethtool state, MTU and its
limits, link speed, and the PCIe link of its slot.
"""
import re
from dataclasses import dataclass, field

CPU = "/sys/devices/system/cpu"
NODES = "/sys/devices/system/node"
NET = "/sys/class/net"
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
# A queue interrupt's name ends in the queue number: virtio0-input.3, eth0-TxRx-3,
# i40e-eth0-TxRx-3, eth0-rx-3, mlx5_comp3@pci:0000:01:00.0.
QUEUE_IRQ = re.compile(r"(input|output|txrx|rxtx|rx|tx|comp)[-._]?(\d+)\Z", re.IGNORECASE)
IRQ_KIND = {"input": "rx", "rx": "rx", "output": "tx", "tx": "tx"}
# Payload Gbit/s per lane and direction after line encoding, by transfer rate (GT/s):
# 8b/10b up to 5 GT/s, 128b/130b from 8, PAM4 FLIT (242/256) at 64.
PCIE_LANE_GBPS = {2.5: 2.0, 5.0: 4.0, 8.0: 7.877, 16.0: 15.754, 32.0: 31.508, 64.0: 60.5}
PCIE_GENERATION = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# What is left for packet data after TLP headers, framing and link-layer traffic
# (256-byte TLPs carry 24 bytes of overhead) and the NIC's descriptor reads.
PCIE_USABLE = 0.85


def parse_cpu_list(text):
    """'0-3,8,10-11' -> frozenset of CPU numbers; '' -> empty."""
    cpus = set()
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        else:
            cpus.add(int(part))
    return frozenset(cpus)


def format_cpu_list(cpus):
    """frozenset -> '0-3,8' (the kernel's own form)."""
    cpus = sorted(cpus)
    if not cpus:
        return ""
    runs, start, previous = [], cpus[0], cpus[0]
    for cpu in cpus[1:] + [None]:
        if cpu is not None and cpu == previous + 1:
            previous = cpu
            continue
        runs.append(f"{start}" if start == previous else f"{start}-{previous}")
        if cpu is not None:
            start = previous = cpu
    return ",".join(runs)


def parse_mask(text):
    """A /sys CPU bitmap ('00000000,0000000f') -> frozenset of CPU numbers."""
    value = int((text or "0").replace(",", "").strip() or "0", 16)
    return frozenset(bit for bit in range(value.bit_length()) if value >> bit & 1)


def format_mask(cpus):
    """frozenset -> bitmap in 32-bit comma-separated chunks, as the kernel parses it."""
    value = sum(1 << cpu for cpu in cpus)
    digits = f"{value:x}"
    chunks = []
    while len(digits) > 8:
        chunks.insert(0, digits[-8:])
        digits = digits[:-8]
    return ",".join([digits] + chunks)


@dataclass(frozen=True)
class Cpu:
    id: int
    package: int
    core: int
    node: int
    siblings: frozenset

    @property
    def first_thread(self):
        """Whether this is its core's first (lowest-numbered) hardware thread."""
        return self.id == min(self.siblings)


@dataclass(frozen=True)
class PciLink:
    address: str
    speed: float | None        # GT/s
    width: int | None
    max_speed: float | None
    max_width: int | None

    @staticmethod
    def gbps(speed, width):
        if speed is None or width is None:
            return None
        return round(PCIE_LANE_GBPS.get(speed, speed * 0.98) * width * PCIE_USABLE, 1)

    @property
    def usable_gbps(self):
        return self.gbps(self.speed, self.width)

    @property
    def card_gbps(self):
        return self.gbps(self.max_speed, self.max_width)

    @property
    def slot(self):
        """domain:bus:device - the functions of one card share its slot."""
        return self.address.rsplit(".", 1)[0]

    def describe(self, speed=None, width=None):
        speed = self.speed if speed is None else speed
        width = self.width if width is None else width
        generation = PCIE_GENERATION.get(speed)
        name = f"gen{generation}" if generation else f"{speed:g} GT/s"
        return f"PCIe {name} x{width}"


@dataclass(frozen=True)
class Irq:
    number: int
    name: str
    queue: int | None          # None: not a queue's interrupt (config, link, misc)
    kind: str                  # rx, tx or rxtx
    affinity: frozenset


@dataclass
class Nic:
    name: str
    virtual: bool
    driver: str | None = None
    numa_node: int = -1
    pci: PciLink | None = None
    speed_mbps: int | None = None
    mtu: int | None = None
    mtu_range: dict | None = None
    txqueuelen: int | None = None
    rx_queues: list = field(default_factory=list)
    tx_queues: list = field(default_factory=list)
    irqs: list = field(default_factory=list)
    rps: dict = field(default_factory=dict)          # rx queue -> frozenset of CPUs
    rps_flow_cnt: dict = field(default_factory=dict)
    xps: dict = field(default_factory=dict)          # tx queue -> frozenset of CPUs
    ethtool: dict = field(default_factory=dict)

    @property
    def queue_irqs(self):
        return [irq for irq in self.irqs if irq.queue is not None]


@dataclass
class Machine:
    host_name: str
    cpus: list
    nics: list
    virtual: list            # names of the interfaces without a device
    memory_kib: int | None

    @property
    def nodes(self):
        return sorted({cpu.node for cpu in self.cpus})

    @property
    def cores(self):
        return [cpu for cpu in self.cpus if cpu.first_thread]

    @property
    def smt(self):
        return any(len(cpu.siblings) > 1 for cpu in self.cpus)

    def nic(self, name):
        return next((nic for nic in self.nics if nic.name == name), None)

    def summary(self):
        nodes = len(self.nodes)
        threads = len(self.cpus) // max(len(self.cores), 1)
        text = (f"{len(self.cpus)} CPUs ({len(self.cores)} cores x {threads} "
                f"thread{'s' if threads > 1 else ''}, {nodes} NUMA node{'s' if nodes > 1 else ''})")
        if self.memory_kib:
            text += f", {self.memory_kib / 1048576:.1f} GiB"
        return text


def detect(host, include_virtual=()):
    """Host -> Machine. include_virtual: virtual interfaces to describe as NICs too."""
    cpus = detect_cpus(host)
    interrupts = read_interrupts(host)
    nics, virtual = [], []
    for name in host.listdir(NET):
        if not host.exists(f"{NET}/{name}/device") and name not in include_virtual:
            if name != "lo" and host.exists(f"{NET}/{name}/mtu"):
                virtual.append(name)
            continue
        nics.append(detect_nic(host, name, interrupts))
    return Machine(host.name, cpus, nics, virtual, read_meminfo(host))


def detect_cpus(host):
    online = parse_cpu_list(host.read(f"{CPU}/online") or "0")
    node_of = {}
    for entry in host.listdir(NODES):
        if re.fullmatch(r"node\d+", entry):
            for cpu in parse_cpu_list(host.read(f"{NODES}/{entry}/cpulist")):
                node_of[cpu] = int(entry[4:])
    cpus = []
    for cpu in sorted(online):
        topology = f"{CPU}/cpu{cpu}/topology"

        def number(name, default):
            text = host.read(f"{topology}/{name}")
            return int(text) if text not in (None, "") else default

        siblings = parse_cpu_list(host.read(f"{topology}/thread_siblings_list")) & online
        cpus.append(Cpu(cpu, number("physical_package_id", 0), number("core_id", cpu),
                        node_of.get(cpu, 0), siblings or frozenset({cpu})))
    return cpus


def read_meminfo(host):
    for line in (host.read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def read_interrupts(host):
    """/proc/interrupts -> {irq number: name (its last column)}."""
    names = {}
    for line in (host.read("/proc/interrupts") or "").splitlines()[1:]:
        words = line.split()
        if words and words[0].rstrip(":").isdigit():
            names[int(words[0].rstrip(":"))] = words[-1]
    return names


def pci_function(host, device):
    """The PCI function a NIC's device path belongs to (the device itself, or its
    parent for virtio) -> its /sys path, or None."""
    path = device
    while path and path != "/":
        if PCI_ADDRESS.fullmatch(path.rsplit("/", 1)[-1]):
            return path
        path = path.rsplit("/", 1)[0]
    return None


def link_speed(text):
    """'8.0 GT/s PCIe' -> 8.0; 'Unknown' -> None."""
    match = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def number_or_none(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value


def detect_nic(host, name, interrupts):
    base = f"{NET}/{name}"
    nic = Nic(name, virtual=not host.exists(f"{base}/device"))
    nic.mtu = number_or_none(host.read(f"{base}/mtu"))
    nic.txqueuelen = number_or_none(host.read(f"{base}/tx_queue_len"))
    speed = number_or_none(host.read(f"{base}/speed"))
    nic.speed_mbps = speed if speed and speed > 0 else None
    for queue in host.listdir(f"{base}/queues"):
        kind, _, index = queue.partition("-")
        if not index.isdigit():
            continue
        index = int(index)
        if kind == "rx":
            nic.rx_queues.append(index)
            mask = host.read(f"{base}/queues/{queue}/rps_cpus")
            if mask is not None:
                nic.rps[index] = parse_mask(mask)
            count = number_or_none(host.read(f"{base}/queues/{queue}/rps_flow_cnt"))
            if count is not None:
                nic.rps_flow_cnt[index] = count
        elif kind == "tx":
            nic.tx_queues.append(index)
            mask = host.read(f"{base}/queues/{queue}/xps_cpus")
            if mask is not None:
                nic.xps[index] = parse_mask(mask)
    nic.rx_queues.sort()
    nic.tx_queues.sort()
    nic.ethtool = host.ethtool(name)
    nic.driver = nic.ethtool.get("driver")
    nic.mtu_range = nic.ethtool.get("mtu_range")
    if nic.virtual:
        return nic
    function = pci_function(host, host.realpath(f"{base}/device"))
    if function:
        node = number_or_none(host.read(f"{function}/numa_node"))
        nic.numa_node = node if node is not None and node >= 0 else -1
        speed = link_speed(host.read(f"{function}/current_link_speed"))
        if speed is not None:
            nic.pci = PciLink(function.rsplit("/", 1)[-1], speed,
                              number_or_none(host.read(f"{function}/current_link_width")),
                              link_speed(host.read(f"{function}/max_link_speed")),
                              number_or_none(host.read(f"{function}/max_link_width")))
        for entry in host.listdir(f"{function}/msi_irqs"):
            if entry.isdigit():
                nic.irqs.append(describe_irq(host, int(entry), interrupts.get(int(entry), "")))
    if len(nic.irqs) == 1 and len(nic.rx_queues) <= 1 and nic.irqs[0].queue is None:
        # a one-queue NIC's only interrupt serves that queue (r8169 names it eth0)
        irq = nic.irqs[0]
        nic.irqs = [Irq(irq.number, irq.name, 0, "rxtx", irq.affinity)]
    nic.irqs.sort(key=lambda irq: (irq.queue is None, irq.queue or 0, irq.kind, irq.number))
    return nic


def describe_irq(host, number, name):
    match = QUEUE_IRQ.search(name.split("@", 1)[0])
    queue, kind = None, "rxtx"
    if match:
        queue = int(match.group(2))
        kind = IRQ_KIND.get(match.group(1).lower(), "rxtx")
    affinity = parse_cpu_list(host.read(f"/proc/irq/{number}/smp_affinity_list"))
    return Irq(number, name, queue, kind, affinity)
