"""bridge-seqrand: sequence randomisation on bridged traffic (issue 39's question: does
the kernel's bridge conntrack confirm through the seqadj step?), with Tusk's policy. fw
bridges veth-c and veth-s with no address (lab bridge=True); the policy's zones are
bridged, so its classes go to table bridge tusk_bridge, built on conntrack's own bridge
hooks (nf_conntrack_bridge, not br_netfilter): class both sets the seqrand-bi helper,
plain does not, diagnostics admits ping; nothing admits port CLOSED. Before the policy,
the ruleset of a policy without bridged zones: the bridge drops everything.

netem on the bridge ports drops 1 % (towards the server while the client uploads,
towards the client while it downloads), so SACK blocks flow both ways; both runs again
over IPv6. Captured on both bridge ports with real checksums; the host pairs every
segment as it does for the routed seqrand-sack (tests/vm/test_bridge.py).

What the dashboard makes of bridged connections, on the same traffic: ulogd on the
image's configuration logs class plain's new connections (log: true) and the default
deny's drops (firewall.json); the Flows page's sampler samples fw's table through
every run (flows-samples.json); and for class plain's iperf3 connection, the ports a
capture of it listens on and its filter (flows/core/flowref.py), with what a route
would have said (flow-capture.json) - the host filters the captures with it.

Saved: fw-inside.pcap, fw-outside.pcap, <run>-client.json / -server.json (iperf3),
state before and after each run (seqadj counters, conntrack, both endpoints' nstat,
the bridge table's counters as <run>-nft-counters.json), ruleset.txt, results.json
(what crossed before the policy, and to the closed port).
"""
import json
import socket
import subprocess
import threading
import time

import seqrand
import yaml

from flows.core.conntrack import Conntrack
from flows.core.flowref import bridged_ports, capture_filter
from flows.core.sampler import Sampler
from lab.namespaces import SERVER_V4, SERVER_V6
from lab.ulogd import ENV, UMASK, argv, listening, render_ulogd_conf

TIME_LIMIT = 300
SECONDS = 3
CLOSED = 5209
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c], bridged: true}}
  - {{name: outside, interfaces: [veth-s], bridged: true}}
services:
  - {{name: rand-both, protocol: tcp, ports: [{seqrand.PORT_BOTH}]}}
  - {{name: plain, protocol: tcp, ports: [{seqrand.PORT_PLAIN}]}}
  - {{name: ping, protocol: icmp}}
  - {{name: ping6, protocol: icmpv6}}
classes:
  - {{name: both, from: inside, to: outside, services: [rand-both], action: accept,
     seqrand: both}}
  - {{name: plain, from: inside, to: outside, services: [plain], action: accept,
     log: true}}
  - {{name: diagnostics, from: inside, to: outside, services: [ping, ping6],
     action: accept}}
"""
# the same zones on routed links: a policy with no bridged zone
UNBRIDGED = """\
version: 1
zones:
  - {name: inside, interfaces: [veth-c]}
  - {name: outside, interfaces: [veth-s]}
"""
RUNS = (("upload", "veth-s", seqrand.PORT_BOTH, (), SERVER_V4),
        ("download", "veth-c", seqrand.PORT_BOTH, ("--reverse",), SERVER_V4),
        ("upload-v6", "veth-s", seqrand.PORT_BOTH, (), SERVER_V6),
        ("download-v6", "veth-c", seqrand.PORT_BOTH, ("--reverse",), SERVER_V6),
        ("plain", "veth-s", seqrand.PORT_PLAIN, (), SERVER_V4))


def impair(ctx, lab, interface):
    for name in ("veth-c", "veth-s"):
        ctx.run("tc", "qdisc", "del", "dev", name, "root", ns=lab.fw, check=False)
    ctx.run("tc", "qdisc", "add", "dev", interface, "root", "netem", "delay", "10ms",
            "loss", "1%", ns=lab.fw)


def save_state(ctx, lab, name):
    seqrand.save_state(ctx, lab, name)
    ctx.run("nft", "-j", "list", "counters", "table", "bridge", "tusk_bridge", ns=lab.fw,
            save=f"{name}-nft-counters.json")


def crosses(ctx, lab, port=None):
    """Whether a ping (port None) or a TCP connection to port crosses the bridge."""
    if port is None:
        return ctx.run("ping", "-c", "1", "-W", "2", SERVER_V4, ns=lab.client,
                       check=False).returncode == 0
    try:
        seqrand.Connection(lab, port, SERVER_V4, socket.AF_INET, timeout=3).close()
        return True
    except OSError:
        return False


class Ulogd:
    """ulogd on the image's ulogd.conf in fw, writing into the scenario's logs/ (as
    tusk-ulogd.service runs it: TZ=UTC, umask 027)."""

    def __init__(self, ctx, lab):
        self.directory = ctx.dir / "logs"
        self.directory.mkdir(exist_ok=True)
        conf = ctx.dir / "ulogd.conf"
        conf.write_text(render_ulogd_conf(self.directory))
        with open(ctx.dir / "ulogd.log", "ab") as out:
            self.proc = subprocess.Popen(argv(lab.fw, conf), env=ENV, umask=UMASK,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        ctx.wait_until(lambda: listening(lab.fw), 10, "ulogd bound NFLOG group 1")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Sampling(threading.Thread):
    """The Flows page's sampler on fw's table every half second, until stopped."""

    def __init__(self, lab):
        super().__init__(daemon=True)
        self.sampler, self.samples, self.done = Sampler(lab.fw, 0.5), [], threading.Event()

    def run(self):
        while not self.done.wait(0.5):
            self.samples.append(self.sampler.sample())

    def stop(self):
        self.done.set()
        self.join(10)
        self.sampler.close()
        return self.samples


def flow_capture(ctx, lab):
    """Class plain's iperf3 data connection (the one of its port with the most bytes):
    the ports the Flows page's capture listens on and its filter, and what fw's routes
    say of its ends (the bridge has no address: no route leads to its ports)."""
    with Conntrack(lab.fw) as conntrack:
        entries = [e for e in conntrack.entries()
                   if e.proto == 6 and e.orig.dport == seqrand.PORT_PLAIN]
    entry = max(entries, key=lambda e: sum(e.bytes or (0, 0)))
    routes = {}
    for end in (entry.orig.src, entry.reply.src):
        found = ctx.run("ip", "-j", "route", "get", end, ns=lab.fw, check=False)
        routes[end] = json.loads(found.stdout or "[]") if found.returncode == 0 \
            else found.stderr.strip()
    ctx.save_json("flow-capture.json", {
        "orig": entry.orig.as_dict(), "mark": entry.mark,
        "ports": [str(p) for p in bridged_ports(yaml.safe_load(POLICY), entry.mark or 0)],
        "filter": capture_filter(entry), "routes": routes})


def run(ctx):
    lab = ctx.lab(bridge=True)
    seqrand.real_checksums(ctx, lab)
    results = {}
    # what the Flows page needs of conntrack (the agent sets them at its start)
    for name in ("nf_conntrack_acct", "nf_conntrack_timestamp"):
        ctx.run("sysctl", "-qw", f"net.netfilter.{name}=1", ns=lab.fw)
    ulogd = Ulogd(ctx, lab)
    try:
        traffic(ctx, lab, results)
    finally:
        time.sleep(1)              # the last records written (sync=1: at once)
        ulogd.stop()


def traffic(ctx, lab, results):
    seqrand.apply_policy(ctx, lab, UNBRIDGED)
    results["before_policy"] = {"ping": crosses(ctx, lab),
                                "tcp": crosses(ctx, lab, seqrand.PORT_PLAIN)}
    seqrand.apply_policy(ctx, lab, POLICY)
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    results["with_policy"] = {"ping": crosses(ctx, lab), "closed": crosses(ctx, lab, CLOSED)}
    ctx.save_text("results.json", json.dumps(results, indent=1) + "\n")
    save_state(ctx, lab, "before")
    sampling = Sampling(lab)
    sampling.start()
    try:
        with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
                ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
            for name, interface, port, args, server in RUNS:
                impair(ctx, lab, interface)
                ctx.iperf3(lab, name, port, "--time", str(SECONDS), *args, server=server)
                save_state(ctx, lab, name)
    finally:
        ctx.save_json("flows-samples.json", sampling.stop())
    flow_capture(ctx, lab)
