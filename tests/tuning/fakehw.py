"""Fake machines for tusk-tune: a description -> a tree of the files Linux shows in /sys
and /proc (and the NICs' ethtool state as JSON) that TreeHost reads and writes.

The layouts follow real ones: CPUs numbered first threads first, SMT siblings after
(cpu N's sibling is N + cores, as on Intel servers); NUMA nodes by blocks of cores;
a NIC's netdev links to its PCI function, whose msi_irqs list the interrupts that
/proc/interrupts names as the driver does (eth0-TxRx-3, virtio0-input.3,
mlx5_comp3@pci:0000:81:00.0); every CPU list and mask in the kernel's own format.
"""
import json
import os
from dataclasses import dataclass, field

FEATURES = ("rx-checksumming", "tx-checksumming", "scatter-gather",
            "tcp-segmentation-offload", "generic-segmentation-offload",
            "generic-receive-offload", "large-receive-offload", "rx-gro-hw")


@dataclass
class Nic:
    name: str
    driver: str
    pci: str                       # the PCI function, 0000:01:00.0
    speed_mbps: int
    link: tuple = (8.0, 8, 8.0, 8)   # current GT/s, width, card's max GT/s, max width
    node: int = -1
    combined: tuple | None = (1, 1)  # (max, current); None: ethtool -l unsupported
    rings: tuple | None = ((4096, 512), (4096, 512))   # (rx max, cur), (tx max, cur)
    features: dict = field(default_factory=dict)       # name -> (on, fixed)
    pause: dict | None = field(default_factory=lambda: {"autoneg": True, "rx": True,
                                                        "tx": True})
    mtu: int = 1500
    max_mtu: int = 9710
    txqueuelen: int = 1000
    irq_names: str = "{name}-TxRx-{queue}"     # or "virtio": separate input/output
    first_irq: int = 40
    misc_irq: bool = True                      # a link/config interrupt before the queues


@dataclass
class Machine:
    cores: int
    threads: int = 1
    nodes: int = 1
    memory_gib: int = 16
    nics: list = field(default_factory=list)
    sysctls: dict = field(default_factory=dict)

    @property
    def cpus(self):
        return self.cores * self.threads


DEFAULT_SYSCTLS = {
    "net/ipv4/ip_forward": "0",
    "net/ipv6/conf/all/forwarding": "0",
    "net/core/netdev_max_backlog": "1000",
    "net/core/netdev_budget": "300",
    "net/core/netdev_budget_usecs": "2000",
    "net/core/rps_sock_flow_entries": "0",
    "net/netfilter/nf_conntrack_max": "262144",
    "net/netfilter/nf_conntrack_buckets": "262144",
    "kernel/random/boot_id": "5b1f2a3c-0000-4000-8000-000000000001",
}


def cpu_list(cpus):
    from tuning.core.hardware import format_cpu_list
    return format_cpu_list(cpus)


def write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(f"{text}\n")


def build(machine, root):
    """Writes machine's tree under root; returns root."""
    cpus = range(machine.cpus)
    write(root, "/sys/devices/system/cpu/online", cpu_list(cpus))
    write(root, "/sys/devices/system/cpu/smt/active", int(machine.threads > 1))
    cores_per_node = machine.cores // machine.nodes
    for cpu in cpus:
        core = cpu % machine.cores
        node = core // cores_per_node
        siblings = [core + t * machine.cores for t in range(machine.threads)]
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        write(root, f"{topology}/physical_package_id", node)
        write(root, f"{topology}/core_id", core % cores_per_node)
        write(root, f"{topology}/thread_siblings_list", cpu_list(siblings))
    for node in range(machine.nodes):
        cores = range(node * cores_per_node, (node + 1) * cores_per_node)
        write(root, f"/sys/devices/system/node/node{node}/cpulist",
              cpu_list([c + t * machine.cores for c in cores for t in range(machine.threads)]))
    write(root, "/proc/meminfo", f"MemTotal:       {machine.memory_gib * 1048576} kB\n"
          "MemFree:         1000000 kB")
    all_cpus = cpu_list(cpus)
    interrupts = ["           " + "".join(f"CPU{c:<8}" for c in cpus)]
    for name, value in {**DEFAULT_SYSCTLS, **machine.sysctls}.items():
        write(root, f"/proc/sys/{name}", value)
    for conf in ("all", "default"):
        write(root, f"/proc/sys/net/ipv4/conf/{conf}/rp_filter", "1")
    for nic in machine.nics:
        interrupts += build_nic(root, machine, nic, all_cpus)
    write(root, "/proc/interrupts", "\n".join(interrupts))
    return root


def build_nic(root, machine, nic, all_cpus):
    device = f"/sys/devices/pci0000:00/{nic.pci}"
    write(root, f"{device}/numa_node", nic.node)
    speed, width, max_speed, max_width = nic.link
    write(root, f"{device}/current_link_speed", f"{speed:g} GT/s PCIe")
    write(root, f"{device}/current_link_width", width)
    write(root, f"{device}/max_link_speed", f"{max_speed:g} GT/s PCIe")
    write(root, f"{device}/max_link_width", max_width)
    net = f"/sys/class/net/{nic.name}"
    os.makedirs(os.path.join(root, net.lstrip("/")), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(root, device.lstrip("/")),
                               os.path.join(root, net.lstrip("/"))),
               os.path.join(root, net.lstrip("/"), "device"))
    write(root, f"{net}/mtu", nic.mtu)
    write(root, f"{net}/tx_queue_len", nic.txqueuelen)
    write(root, f"{net}/speed", nic.speed_mbps)
    write(root, f"/proc/sys/net/ipv4/conf/{nic.name}/rp_filter", "1")
    queues = nic.combined[1] if nic.combined else 1
    for queue in range(queues):
        write(root, f"{net}/queues/rx-{queue}/rps_cpus", "0")
        write(root, f"{net}/queues/rx-{queue}/rps_flow_cnt", "0")
        write(root, f"{net}/queues/tx-{queue}/xps_cpus", "0")
    lines, number = [], nic.first_irq
    names = []
    if nic.misc_irq:
        names.append(f"{nic.name}" if nic.irq_names != "virtio" else "virtio0-config")
    # the driver requests one interrupt per queue it can have (virtio, mlx5) or per
    # queue it has (most others)
    count = nic.combined[0] if nic.irq_names in ("virtio", "mlx5") and nic.combined else queues
    for queue in range(count):
        if nic.irq_names == "virtio":
            names += [f"virtio0-input.{queue}", f"virtio0-output.{queue}"]
        elif nic.irq_names == "mlx5":
            names.append(f"mlx5_comp{queue}@pci:{nic.pci}")
        else:
            names.append(nic.irq_names.format(name=nic.name, queue=queue))
    for name in names:
        write(root, f"{device}/msi_irqs/{number}", "msix")
        write(root, f"/proc/irq/{number}/smp_affinity_list", all_cpus)
        lines.append(f" {number:3}:" + "        0" * machine.cpus
                     + f"  PCI-MSIX-{nic.pci} {number - nic.first_irq}-edge      {name}")
        number += 1
    features = {name: {"on": name != "large-receive-offload", "fixed": False}
                for name in FEATURES}
    for name, (on, fixed) in nic.features.items():
        features[name] = {"on": on, "fixed": fixed}
    ethtool = {
        "driver": nic.driver,
        "channels": None if nic.combined is None else {
            "max": {"rx": None, "tx": None, "other": 1, "combined": nic.combined[0]},
            "current": {"rx": None, "tx": None, "other": 1, "combined": nic.combined[1]}},
        "rings": None if nic.rings is None else {
            "max": {"rx": nic.rings[0][0], "tx": nic.rings[1][0]},
            "current": {"rx": nic.rings[0][1], "tx": nic.rings[1][1]}},
        "features": features,
        "pause": nic.pause,
        "mtu_range": {"min": 68, "max": nic.max_mtu},
    }
    path = os.path.join(root, "ethtool", f"{nic.name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(ethtool, handle, indent=1, sort_keys=True)
    return lines


# The machines of the golden tests (tests/tuning/golden/<machine>/).
MACHINES = {
    # a small box: two one-queue 1G NICs (Realtek, no channels, no ring resize) on 4 cores
    "one-queue-4-cores": Machine(cores=4, memory_gib=4, nics=[
        Nic("eth0", "r8169", "0000:01:00.0", 1000, link=(2.5, 1, 2.5, 1), combined=None,
            rings=None, pause={"autoneg": True, "rx": True, "tx": False}, max_mtu=9194,
            irq_names="{name}", misc_irq=False, first_irq=120),
        Nic("eth1", "r8169", "0000:02:00.0", 1000, link=(2.5, 1, 2.5, 1), combined=None,
            rings=None, pause={"autoneg": True, "rx": True, "tx": False}, max_mtu=9194,
            irq_names="{name}", misc_irq=False, first_irq=121),
    ]),
    # 8 cores with SMT (16 CPUs), a dual-port 10G card with 8 queues per port
    "8-queue-smt": Machine(cores=8, threads=2, memory_gib=32, nics=[
        Nic("eth0", "ixgbe", "0000:03:00.0", 10000, link=(5.0, 8, 5.0, 8), combined=(8, 8),
            first_irq=60),
        Nic("eth1", "ixgbe", "0000:03:00.1", 10000, link=(5.0, 8, 5.0, 8), combined=(8, 8),
            first_irq=80),
    ]),
    # two sockets, 8 cores each; a 25G mlx5 port on node 1 and a 10G i40e on node 0
    "two-numa-nodes": Machine(cores=16, nodes=2, memory_gib=128, nics=[
        Nic("eth0", "i40e", "0000:18:00.0", 10000, link=(8.0, 8, 8.0, 8), node=0,
            combined=(64, 16), irq_names="i40e-{name}-TxRx-{queue}", first_irq=100),
        Nic("eth1", "mlx5_core", "0000:81:00.0", 25000, link=(8.0, 8, 8.0, 16), node=1,
            combined=(32, 16), rings=((8192, 1024), (8192, 1024)), irq_names="mlx5",
            features={"large-receive-offload": (False, False), "rx-gro-hw": (False, True)},
            first_irq=140),
    ]),
    # a 10G card (made for gen2 x8) in a gen2 x1 slot, next to the 1G board port
    "10g-in-gen2-x1": Machine(cores=4, memory_gib=8, nics=[
        Nic("eth0", "igb", "0000:00:19.0", 1000, link=(5.0, 1, 5.0, 1), combined=(4, 4),
            first_irq=30),
        Nic("eth1", "ixgbe", "0000:05:00.0", 10000, link=(5.0, 1, 5.0, 8), combined=(63, 4),
            features={"large-receive-offload": (True, False)}, first_irq=40),
    ]),
}
