"""tune-nic: tusk-tune on a real multi-queue NIC (virtio-net, 4 queue pairs, 4 vCPUs;
booted by tests/vm/conftest.py's nic_guest with QEMU in a host namespace that has the
tap and an iperf3 server).

    host namespace tusk-vmnic            guest
    tap0 10.203.0.1  iperf3 -s  <--NIC-->  eth0 10.203.0.2 (fw: the root namespace)
                                                veth-r 10.203.1.1 <-> recv 10.203.1.2

Three cases (CASES): throughput from one open queue pair (the channel change),
throughput from four queue pairs with every interrupt on one CPU and no XPS, and
conservative from one queue pair (RPS). Each: snapshot of every value tusk-tune may
touch, apply, snapshot, verify, for the last two one iperf3 flow from the host through
fw to recv (captured in recv, softnet, interrupt and per-queue counters around it),
rollback, snapshot. The host-side tests judge (tests/vm/test_vm_tuning.py).

The receiving iperf3 is pinned to one CPU: it lives on the firewall here, and tun
steers a flow to the queue the guest last sent it on, so a reader on another CPU
would move the flow between queues - an artefact of the receiver sitting on the
firewall, not of the firewall's own processing.
"""
import sys
from pathlib import Path

TIME_LIMIT = 420
HOST = "10.203.0.1"
FW, FW_INNER, RECV = "10.203.0.2", "10.203.1.1", "10.203.1.2"
PORT = 5201
SECONDS = 5
TUNE = Path(__file__).resolve().parents[4] / "webui" / "bin" / "tusk-tune"
SYSCTLS = ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/core/netdev_max_backlog",
           "net/core/netdev_budget", "net/core/netdev_budget_usecs",
           "net/core/rps_sock_flow_entries", "net/netfilter/nf_conntrack_max",
           "net/netfilter/nf_conntrack_buckets", "net/ipv4/conf/all/rp_filter",
           "net/ipv4/conf/default/rp_filter", "net/ipv4/conf/eth0/rp_filter")
# which CPU the receiving iperf3 runs on for each profile's flow
READER_CPU = {"throughput": 2, "conservative": 1}


def read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def nic_name():
    names = [p.name for p in Path("/sys/class/net").iterdir() if (p / "device").exists()]
    assert len(names) == 1, f"expected one NIC, found {names}"
    return names[0]


def nic_irqs(iface):
    """{irq number: name} of the virtio device behind iface, from /proc/interrupts."""
    device = Path(f"/sys/class/net/{iface}/device").resolve().name      # virtio0
    irqs = {}
    for line in Path("/proc/interrupts").read_text().splitlines()[1:]:
        words = line.split()
        if words and words[0].rstrip(":").isdigit() and words[-1].startswith(device + "-"):
            irqs[int(words[0].rstrip(":"))] = words[-1]
    return irqs


def snapshot(ctx, name, iface):
    """Every value tusk-tune may set, read straight from /sys, /proc and ethtool."""
    files = {}
    base = Path(f"/sys/class/net/{iface}")
    for queue in sorted((base / "queues").iterdir()):
        for knob in ("rps_cpus", "rps_flow_cnt", "xps_cpus"):
            if (queue / knob).exists():
                files[str(queue / knob)] = read(queue / knob)
    for knob in ("tx_queue_len", "mtu"):
        files[str(base / knob)] = read(base / knob)
    for irq in nic_irqs(iface):
        files[f"/proc/irq/{irq}/smp_affinity_list"] = read(f"/proc/irq/{irq}/smp_affinity_list")
    for sysctl in SYSCTLS:
        files[f"/proc/sys/{sysctl}"] = read(f"/proc/sys/{sysctl}")
    ethtool = {option: ctx.run("ethtool", option, iface, check=False).stdout
               for option in ("-l", "-g", "-k", "-a")}
    ctx.save_json(f"{name}.json", {"files": files, "ethtool": ethtool,
                                   "irqs": nic_irqs(iface)})


def tune(ctx, name, *args, check=True):
    result = ctx.run(sys.executable, str(TUNE), "--no-policy", "--state-dir",
                     str(ctx.dir / "tune-state"), "--json", *args, check=check,
                     save=f"{name}.json", timeout=120)
    return result


def counters(ctx, name, iface):
    ctx.save_text(f"{name}-softnet.txt", Path("/proc/net/softnet_stat").read_text())
    ctx.save_text(f"{name}-interrupts.txt", Path("/proc/interrupts").read_text())
    ctx.save_text(f"{name}-ethtool-S.txt", ctx.run("ethtool", "-S", iface).stdout)


def flow(ctx, profile, iface):
    name = f"flow-{profile}"
    with ctx.capture("recv", "veth-recv", f"{name}-recv", f"tcp port {PORT}", snaplen=96):
        counters(ctx, f"{name}-before", iface)
        ctx.run("taskset", "-c", str(READER_CPU[profile]), "iperf3", "--client", HOST,
                "--port", str(PORT), "--reverse", "--time", str(SECONDS), "--json",
                ns="recv", save=f"{name}-iperf3.json", timeout=SECONDS + 90)
        counters(ctx, f"{name}-after", iface)


def set_up(ctx, iface):
    # forwarding is the boot step's (tusk-boot firewall), which no profile may set
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    ctx.run("ip", "link", "set", "lo", "up")
    ctx.run("ip", "addr", "add", f"{FW}/24", "dev", iface)
    ctx.run("ip", "link", "set", iface, "up")
    ctx.run("ip", "netns", "add", "recv")
    ctx.run("ip", "link", "add", "veth-r", "type", "veth", "peer", "name", "veth-recv",
            "netns", "recv")
    ctx.run("ip", "addr", "add", f"{FW_INNER}/24", "dev", "veth-r")
    ctx.run("ip", "link", "set", "veth-r", "up")
    ctx.run("ip", "link", "set", "lo", "up", ns="recv")
    ctx.run("ip", "addr", "add", f"{RECV}/24", "dev", "veth-recv", ns="recv")
    ctx.run("ip", "link", "set", "veth-recv", "up", ns="recv")
    ctx.run("ip", "route", "add", "default", "via", FW_INNER, ns="recv")
    ctx.wait_until(lambda: ctx.run("ping", "-c1", "-W1", HOST, check=False).returncode == 0,
                   30, "the host's end of the NIC")


def one_queue(ctx, iface):
    """As a driver that opens one queue pair."""
    ctx.run("ethtool", "-L", iface, "combined", "1")


def scrambled(ctx, iface):
    """Every queue pair open, but all interrupts on the last CPU and no XPS: as a driver
    (or an irqbalance) that ignores which queue is whose. virtio-net itself spreads
    them when its channels change, so this comes after that."""
    ctx.run("ethtool", "-L", iface, "combined", "4")
    for irq, name in nic_irqs(iface).items():
        if "-input." in name or "-output." in name:
            Path(f"/proc/irq/{irq}/smp_affinity_list").write_text("3")
    for queue in Path(f"/sys/class/net/{iface}/queues").glob("tx-*"):
        (queue / "xps_cpus").write_text("0")


# (name, profile, how the NIC starts, whether a flow crosses it)
CASES = (("throughput-from-one-queue", "throughput", one_queue, False),
         ("throughput", "throughput", scrambled, True),
         ("conservative", "conservative", one_queue, True))


def run(ctx):
    iface = nic_name()
    set_up(ctx, iface)
    ctx.save_text("nic.txt", iface + "\n")
    for name, profile, start, with_flow in CASES:
        start(ctx, iface)
        snapshot(ctx, f"{name}-before", iface)
        tune(ctx, f"{name}-plan", "plan", profile)
        tune(ctx, f"{name}-apply", "apply", profile)
        snapshot(ctx, f"{name}-applied", iface)
        tune(ctx, f"{name}-verify", "verify", check=False)
        if with_flow:
            flow(ctx, name, iface)
        tune(ctx, f"{name}-rollback", "rollback")
        snapshot(ctx, f"{name}-rolled-back", iface)
    # drift: change one applied value behind tusk-tune's back, verify must name it
    tune(ctx, "drift-apply", "apply", "throughput")
    target = f"/sys/class/net/{iface}/tx_queue_len"
    Path(target).write_text("1000")
    ctx.save_text("drift-target.txt", target + "\n")
    tune(ctx, "drift-verify", "verify", check=False)
    tune(ctx, "drift-rollback", "rollback")
