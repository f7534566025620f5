"""Profile + Machine -> Plan: the ordered list of writes, each old -> new with the
reason, and the warnings an operator can act on. Pure: reads nothing but what it is
given (sysctl values come through the Host's read), writes nothing.

Order: per tuned interface (by name) channels, rings, features, pause, MTU,
txqueuelen, queue interrupts, RPS, XPS; then the RFS table and the [sysctl]
section. Channels come first because they create and remove queues: apply writes
them, detects again and plans the rest against the queues that then exist.
"""
from tusklib.paths import path_mtu_warnings
from tusklib.problems import Problem

from . import profile as profiles
from .errors import Code, TuneError
from .hardware import format_cpu_list, format_mask
from .report import Plan, Write, same

FEATURES = {"gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
            "tso": "tcp-segmentation-offload", "lro": "large-receive-offload"}
FEATURE_ORDER = ("gro", "gso", "tso", "lro")
CONNTRACK_BYTES_PER_ENTRY = 32 * 1024
CONNTRACK_MIN, CONNTRACK_MAX = 65536, 2097152
SOCK_FLOW = ("net", "core", "rps_sock_flow_entries")
SYSCTL_ROOT = "/proc/sys"


def sysctl_path(parts):
    """/proc/sys/PARTS: built from its parts, each one directory (eth0.100 too), never
    from a dotted name."""
    return "/".join((SYSCTL_ROOT, *parts))


class Planner:
    def __init__(self, profile, machine, host, paths=(), network=None):
        """paths: [(class name, [interfaces in], [interfaces out], clamps_mss)] from the
        live policy: the interfaces traffic crosses, for the MTU check. network: the box's
        network configuration (network.core.model.NetworkConfig) or None: the MTU its
        VLANs and bonds will have, which no NIC of the machine shows."""
        self.profile = profile
        self.machine = machine
        self.host = host
        self.paths = paths
        self.network = network
        self.plan = Plan(profile, machine)
        self.problems = []
        self.overrides = profile.interfaces()

    # -- helpers ------------------------------------------------------------------

    def add(self, kind, target, old, new, reason, form="text", iface=""):
        if not same(form, old, new):
            self.plan.writes.append(Write(kind, target, old, new, reason, form, iface))

    def setting(self, section, key, nic=None):
        """(value, place) - an [interface NAME] key overrides the general one."""
        value, place, _ = self.setting_why(section, key, nic)
        return value, place

    def setting_why(self, section, key, nic=None):
        """(value, place, the profile's comment on it)."""
        if nic is not None and key in self.overrides.get(nic.name, {}):
            setting = self.overrides[nic.name][key]
            return setting.value, setting.place(f"interface {nic.name}", key), setting.why
        setting = self.profile.setting(section, key)
        if setting is None:
            return "keep", f"{self.profile.path} [{section}] {key}", ""
        return setting.value, setting.place(section, key), setting.why

    def problem(self, place, message, code=Code.VALUE):
        self.problems.append(Problem(code, place, message))

    # -- CPU placement ------------------------------------------------------------

    def cpu_order(self, nic):
        """The CPUs in the order queues take them: the NIC's node's physical cores,
        then their SMT siblings, then other nodes' cores and siblings."""
        local = [c for c in self.machine.cpus if nic.numa_node < 0 or c.node == nic.numa_node]
        if not local:
            local = list(self.machine.cpus)
        remote = [c for c in self.machine.cpus if c not in local]
        return ([c.id for c in local if c.first_thread]
                + [c.id for c in local if not c.first_thread]
                + [c.id for c in remote if c.first_thread]
                + [c.id for c in remote if not c.first_thread])

    def local_cores(self, nic):
        order = self.cpu_order(nic)
        cores = {c.id for c in self.machine.cores}
        local = {c.id for c in self.machine.cpus
                 if nic.numa_node < 0 or c.node == nic.numa_node} or set(order)
        return [cpu for cpu in order if cpu in cores and cpu in local]

    def where(self, nic):
        return f"NUMA node {nic.numa_node}" if nic.numa_node >= 0 else "the machine"

    # -- the plan -----------------------------------------------------------------

    def run(self):
        tuned = self.tuned_nics()
        for nic in tuned:
            self.plan_nic(nic)
        self.plan_rfs(tuned)
        self.plan_sysctls(tuned)
        self.warnings(tuned)
        if self.problems:
            raise TuneError(self.problems)
        return self.plan

    def tuned_nics(self):
        for name in self.overrides:
            if self.machine.nic(name) is None:
                place = f"{self.profile.path} [interface {name}]"
                self.problem(place, f"no interface {name} on {self.machine.host_name} "
                             f"(there are: {', '.join(n.name for n in self.machine.nics) or 'none'}"
                             + (f"; virtual: {', '.join(self.machine.virtual)}"
                                if self.machine.virtual else "") + ")", Code.INTERFACE)
        return [nic for nic in self.machine.nics
                if self.setting("interface", "tune", nic)[0] != "no"
                and (not nic.virtual or nic.name in self.overrides)]

    def plan_nic(self, nic):
        rx, tx = list(nic.rx_queues), list(nic.tx_queues)
        if not nic.virtual:
            rx, tx = self.plan_channels(nic, rx, tx)
            self.plan_rings(nic)
        self.plan_features(nic)
        if not nic.virtual:
            self.plan_pause(nic)
        self.plan_link(nic)
        if not nic.virtual:
            self.plan_irqs(nic, max(len(rx), len(tx)))
        self.plan_rps(nic, rx)
        self.plan_xps(nic, tx)

    def plan_channels(self, nic, rx, tx):
        want, place = self.setting("channels", "combined", nic)
        channels = nic.ethtool.get("channels")
        if want == "keep":
            return rx, tx
        if channels is None:
            self.plan.warn("unsupported", f"{nic.name}: the driver ({nic.driver}) cannot change "
                           "its number of queues (ethtool -l): channels skipped")
            return rx, tx
        cores = len(self.local_cores(nic))
        keys = ["combined"] if channels["max"].get("combined") else ["rx", "tx"]
        result = {"rx": len(rx), "tx": len(tx)}
        for key in keys:
            maximum = channels["max"].get(key) or 0
            current = channels["current"].get(key)
            if maximum < 1:
                continue
            if want == "max":
                target, why = maximum, "the most the NIC has"
            elif want == "cores":
                target = min(maximum, cores)
                why = (f"one per physical core of {self.where(nic)} ({cores})"
                       + (f", capped at the NIC's {maximum}" if maximum < cores else ""))
            else:
                if want > maximum:
                    self.problem(place, f"{want} queues: {nic.name} has at most {maximum} "
                                 f"{key} channels")
                    continue
                target, why = want, "the profile's number"
            self.add("ethtool", (nic.name, "channels", key), current, target, why, "int", nic.name)
            if key == "combined":
                # a combined channel is one rx and one tx queue, next to dedicated ones
                for side in ("rx", "tx"):
                    result[side] = target + (channels["current"].get(side) or 0)
            else:
                result[key] = target
        if result["rx"] != len(rx) or result["tx"] != len(tx):
            self.plan.notes.append(
                f"{nic.name}: the queue settings below are for the {result['rx']} rx / "
                f"{result['tx']} tx queues after the channel change; apply plans them again "
                "once the kernel has made them")
        return list(range(result["rx"])), list(range(result["tx"]))

    def plan_rings(self, nic):
        rings = nic.ethtool.get("rings")
        for key in ("rx", "tx"):
            want, place = self.setting("rings", key, nic)
            if want == "keep":
                continue
            if rings is None or rings["max"].get(key) is None:
                self.plan.warn("unsupported", f"{nic.name}: the driver ({nic.driver}) cannot "
                               "change its ring sizes (ethtool -g): rings skipped")
                continue
            maximum = rings["max"][key]
            if want == "max":
                target, why = maximum, f"{maximum}, the deepest ring the NIC has"
            elif want > maximum:
                self.problem(place, f"{want} descriptors: {nic.name}'s {key} ring holds at "
                             f"most {maximum}")
                continue
            else:
                target, why = want, f"{want} descriptors, the profile's bound"
            self.add("ethtool", (nic.name, "rings", key), rings["current"][key], target, why,
                     "int", nic.name)

    def plan_features(self, nic):
        features = nic.ethtool.get("features")
        for short in FEATURE_ORDER:
            want, _, comment = self.setting_why("features", short, nic)
            if want == "keep":
                continue
            long = FEATURES[short]
            on = want == "on"
            state = (features or {}).get(long)
            if state is None:
                self.plan.warn("unsupported", f"{nic.name}: the driver ({nic.driver}) has no "
                               f"{long}: skipped")
                continue
            if state["on"] != on and state["fixed"]:
                self.plan.warn("unsupported", f"{nic.name}: {long} is fixed "
                               f"{'on' if state['on'] else 'off'} by the driver ({nic.driver}): "
                               "skipped")
                continue
            self.add("ethtool", (nic.name, "features", long), state["on"], on,
                     comment or f"[features] {short} = {want}", "bool", nic.name)

    def plan_pause(self, nic):
        pause = nic.ethtool.get("pause")
        for key in ("autoneg", "rx", "tx"):
            want, _, comment = self.setting_why("pause", key, nic)
            if want == "keep":
                continue
            if pause is None:
                self.plan.warn("unsupported", f"{nic.name}: the driver ({nic.driver}) has no "
                               "flow control settings (ethtool -a): pause skipped")
                continue
            self.add("ethtool", (nic.name, "pause", key), pause[key], want == "on",
                     comment or f"[pause] {key} = {want}", "bool", nic.name)

    def plan_link(self, nic):
        base = f"/sys/class/net/{nic.name}"
        mtu, place, comment = self.setting_why("link", "mtu", nic)
        if mtu != "keep":
            limits = nic.mtu_range or {"min": 68, "max": 65535}
            if not limits["min"] <= mtu <= limits["max"]:
                self.problem(place, f"MTU {mtu} is outside {nic.name}'s {limits['min']}.."
                             f"{limits['max']} (driver {nic.driver})")
            else:
                self.add("file", (f"{base}/mtu",), nic.mtu, mtu,
                         comment or f"{place.split('] ')[0]}]", "int", nic.name)
        qlen, place, comment = self.setting_why("link", "txqueuelen", nic)
        if qlen != "keep":
            self.add("file", (f"{base}/tx_queue_len",), nic.txqueuelen, qlen,
                     comment or f"qdisc queue of {qlen} packets", "int", nic.name)

    def plan_irqs(self, nic, queues):
        want, _ = self.setting("irq", "affinity", nic)
        if want == "keep":
            return
        irqs = [irq for irq in nic.queue_irqs if irq.queue < queues]
        if not irqs:
            self.plan.warn("irq", f"{nic.name}: no per-queue interrupts found (no MSI-X?): "
                           "interrupt affinity left alone")
            return
        order = self.cpu_order(nic)
        for irq in irqs:
            cpu = order[irq.queue % len(order)]
            self.add("file", (f"/proc/irq/{irq.number}/smp_affinity_list",),
                     format_cpu_list(irq.affinity), str(cpu),
                     f"{irq.name}: queue {irq.queue} on {self.describe_cpu(cpu)}",
                     "cpulist", nic.name)

    def describe_cpu(self, cpu_id):
        cpu = next(c for c in self.machine.cpus if c.id == cpu_id)
        text = f"cpu {cpu_id} (core {cpu.core}"
        if len(self.machine.nodes) > 1:
            text += f", node {cpu.node}"
        if not cpu.first_thread:
            text += f", SMT sibling of cpu {min(cpu.siblings)}"
        return text + ")"

    def rps_cpus(self, nic, rx):
        """The CPU set RPS should use on each of nic's rx queues, and why."""
        want, _ = self.setting("rps", "cpus", nic)
        if want == "keep":
            return None, ""
        cores = self.local_cores(nic)
        if want == "off":
            return frozenset(), "RPS off ([rps] cpus = off)"
        if len(self.machine.cpus) < 2:
            return frozenset(), "one CPU: nothing to steer to"
        if len(rx) >= len(cores):
            return frozenset(), (f"{len(rx)} receive queues for {len(cores)} cores of "
                                 f"{self.where(nic)}: the NIC spreads flows itself")
        return frozenset(cores), (f"{len(rx)} receive queue{'s' if len(rx) > 1 else ''} for "
                                  f"{len(cores)} physical cores of {self.where(nic)}: RPS "
                                  "hashes each flow to one of them")

    def plan_rps(self, nic, rx):
        cpus, why = self.rps_cpus(nic, rx)
        if cpus is None:
            return
        base = f"/sys/class/net/{nic.name}/queues"
        entries = self.profile.get("rps", "sock_flow_entries")
        flow_cnt = 0
        if cpus and entries not in ("keep", 0):
            flow_cnt = max(1, entries // len(rx))
            flow_cnt = 1 << (flow_cnt - 1).bit_length()
        for queue in rx:
            old = nic.rps.get(queue)
            self.add("file", (f"{base}/rx-{queue}/rps_cpus",),
                     None if old is None else format_mask(old), format_mask(cpus), why, "mask",
                     nic.name)
        if entries == "keep":
            return
        for queue in rx:
            self.add("file", (f"{base}/rx-{queue}/rps_flow_cnt",), nic.rps_flow_cnt.get(queue),
                     flow_cnt, "RFS flow table: the [rps] sock_flow_entries shared by "
                     f"{len(rx)} queue{'s' if len(rx) > 1 else ''}" if cpus
                     else "no RPS, no RFS", "int", nic.name)

    def plan_xps(self, nic, tx):
        want, _ = self.setting("xps", "cpus", nic)
        if want == "keep" or len(tx) < 2:
            return
        base = f"/sys/class/net/{nic.name}/queues"
        order = self.cpu_order(nic)
        for queue in tx:
            cpus = frozenset(order[i] for i in range(len(order)) if i % len(tx) == queue) \
                if want == "auto" else frozenset()
            why = (f"cpus {format_cpu_list(cpus)} send on queue {queue}, the queue whose "
                   "interrupt is on the first of them" if want == "auto" else "XPS off")
            old = nic.xps.get(queue)
            self.add("file", (f"{base}/tx-{queue}/xps_cpus",),
                     None if old is None else format_mask(old), format_mask(cpus), why, "mask",
                     nic.name)

    def plan_rfs(self, tuned):
        entries = self.profile.get("rps", "sock_flow_entries")
        if entries == "keep":
            return
        if not any(self.rps_cpus(nic, nic.rx_queues or [0])[0] for nic in tuned):
            return
        self.plan_sysctl(SOCK_FLOW, str(entries), "the RFS table of connections ending on "
                         "the box, for the NICs that get RPS",
                         self.setting("rps", "sock_flow_entries")[1])

    def plan_sysctls(self, tuned):
        """[sysctl]: a name with a * once for all, default and every tuned interface - the
        interface's name put in as one part of the path, and what that makes checked
        again: an interface's name is the machine's, not the profile's."""
        for name, setting in self.profile.sysctls().items():
            value = setting.value
            why = setting.why or f"[sysctl] {name}"
            place = setting.place("sysctl", name)
            if value == "auto":
                value, why = self.auto_sysctl(name)
            parts = name.split(".")
            if profiles.ANY not in parts:
                self.plan_sysctl(parts, value, why, place)
                continue
            star = parts.index(profiles.ANY)
            for iface in dict.fromkeys(["all", "default"] + [nic.name for nic in tuned]):
                if not profiles.path_part(iface):
                    self.problem(place, f"interface {iface!r} cannot be a directory of "
                                 f"{SYSCTL_ROOT}: nothing is planned for {name}", Code.INTERFACE)
                    continue
                self.plan_sysctl(parts[:star] + [iface] + parts[star + 1:], value, why, place,
                                 iface)

    def plan_sysctl(self, parts, value, why, place, iface=None):
        """One sysctl write, if the sysctl may be set, exists here and is writable."""
        name = profiles.sysctl_name(parts)
        refused = profiles.sysctl_path_refused(parts)
        if refused:
            self.problem(place, (f"with interface {iface} it is {name}: " if iface else
                                 f"{name}: ") + refused, Code.PROFILE)
            return
        path = sysctl_path(parts)
        old = self.host.read(path)
        if old is None:
            self.plan.warn("unsupported", f"sysctl {name} does not exist here (not in this "
                           "kernel, module not loaded, or not in this network namespace): skipped")
            return
        if not same("words", old, value) and not self.host.writable(path):
            self.plan.warn("unsupported", f"sysctl {name} is read-only here (in a network "
                           "namespace only the host's is writable): skipped")
            return
        self.add("file", (path,), " ".join(old.split()), value, why, "words")

    def auto_sysctl(self, name):
        memory = (self.machine.memory_kib or 0) * 1024
        entries = min(max(memory // CONNTRACK_BYTES_PER_ENTRY, CONNTRACK_MIN), CONNTRACK_MAX)
        entries = 1 << (entries.bit_length() - 1)
        gib = memory / (1 << 30)
        if name.endswith("nf_conntrack_max"):
            return str(entries), f"one entry per 32 KiB of {gib:.1f} GiB RAM"
        return str(entries), f"one bucket per conntrack entry ({entries})"

    # -- warnings -----------------------------------------------------------------

    def warnings(self, tuned):
        self.warn_pcie()
        self.warn_smt()
        self.warn_rps(tuned)
        self.warn_mtu(tuned)

    def warn_pcie(self):
        slots = {}
        for nic in self.machine.nics:
            if nic.pci and nic.speed_mbps:
                slots.setdefault(nic.pci.slot, []).append(nic)
        for nics in slots.values():
            link = nics[0].pci
            usable = link.usable_gbps
            need = sum(nic.speed_mbps for nic in nics) / 1000
            if usable is None or usable >= need:
                continue
            ports = " + ".join(f"{n.name} {n.speed_mbps / 1000:g}" for n in nics)
            message = (f"{', '.join(n.name for n in nics)}: the slot at {link.address} runs "
                       f"{link.describe()}, {usable:g} Gbit/s usable each way, less than the "
                       f"line rate it must carry each way ({ports} Gbit/s)")
            card = link.card_gbps
            if card and card > usable:
                message += (f"; the card can do {link.describe(link.max_speed, link.max_width)} "
                            f"({card:g} Gbit/s): move it to a slot with more lanes or a newer "
                            "PCIe generation")
            else:
                message += ": this card cannot carry its ports at line rate"
            self.plan.warn("pcie", message)

    def warn_smt(self):
        if not self.machine.smt:
            return
        pairs = sorted({format_cpu_list(c.siblings) for c in self.machine.cpus
                        if len(c.siblings) > 1})
        self.plan.warn("smt", f"SMT (hyper-threading) is on: cpus {'; '.join(pairs[:4])}"
                       f"{' ...' if len(pairs) > 4 else ''} share a core. A flow's softirq gets "
                       "half a core when its sibling is busy: turn SMT off in the firmware or "
                       "boot with nosmt. Tusk places queues on one thread per core either way")

    def warn_rps(self, tuned):
        if len(self.machine.cpus) < 2:
            return
        for nic in tuned:
            rx = nic.rx_queues
            if nic.virtual or len(rx) != 1:
                continue
            cpus, _ = self.rps_cpus(nic, rx)
            planned = cpus if cpus is not None else nic.rps.get(0, frozenset())
            if not planned:
                self.plan.warn("rps", f"{nic.name} has one receive queue and RPS stays off: "
                               f"every packet it receives is handled by one CPU of "
                               f"{len(self.machine.cpus)}. Use a profile with [rps] cpus = auto")

    def planned_mtu(self, nic):
        for write in self.plan.writes:
            if write.kind == "file" and write.target[0] == f"/sys/class/net/{nic.name}/mtu":
                return write.new
        return nic.mtu

    def warn_mtu(self, tuned):
        mtus = {nic.name: self.planned_mtu(nic) for nic in self.machine.nics}
        if self.network is not None:
            # a VLAN or bond has the MTU its configuration gives it (its own, else its
            # parent's or bond's); a port keeps what this plan sets on it
            mtus.update((link.name, self.network.effective_mtu(link.name))
                        for link in self.network.links if link.kind != "port")
        if self.paths:
            for warning in path_mtu_warnings(self.paths, mtus.get):
                self.plan.warn("mtu", warning)
            return
        names = [nic.name for nic in tuned if not nic.virtual]
        if len({mtus[n] for n in names}) > 1:
            listing = ", ".join(f"{n} {mtus[n]}" for n in names)
            self.plan.warn("mtu", f"the NICs' MTUs differ ({listing}): a flow between two of "
                           "them relies on path MTU discovery or an MSS clamp (a class with "
                           "mss pmtu); with a policy loaded, this check names the classes")


def plan(profile, machine, host, paths=(), network=None):
    return Planner(profile, machine, host, paths, network).run()


