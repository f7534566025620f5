"""policy-auto-fastpath: elephants promoted to the flowtable by the ruleset, with nothing
set (issue 35), live on Tusk's kernel (the host kernel has no flowtables).

One TCP connection per class, its bytes sent in steps a test controls (a client that
sends what it is told on stdin and holds the connection open between steps), so each
reading of its conntrack entry is taken at a known count:
  elephant - the default (auto, 1 MB)
  stay     - fastpath: never
  patient  - auto after 20 MB
  rand     - the default with seqrand: both (promoted, translated on the fast path)
After 300 kB, after 2 MB, after 8 MB and (patient) after 30 MB, the entry is saved,
waiting first (up to WAIT s) for the offload where the class would promote by then.

The inside network is masqueraded towards outside: promoted connections are NATed ones.
Last, the elephant's entry is deleted as the Flows page's Drop does (pick-up mid-stream
off, as on an HA pair): 2 MB more must not reach the server.

Then an interface made after the policy was loaded, as at boot (the firewall loads the
policy before networkd makes the VLANs and bonds its zones name): a second link late7
joins the client (routing it to the server) and the inside zone, the policy is applied
and confirmed, then the box "boots": late7 goes, the table too, the boot step loads the
confirmed revision (appliance/boot.py load_forward_ruleset), late7 comes back and the
agent's periodic task (Applier.attach_fastpath_devices) adds it to the flowtable. A
connection over late7 is then promoted, and its packets from the client take the fast
path: a table of the test's counts them in the forward hook, which the fast path skips.

Saved: policy.yaml, acct.txt (nf_conntrack_acct after the apply), <class>-<step>.json
(the connection's entry), <class>-received.txt (bytes the server read), elephant-dropped
and elephant-after-drop.json, after- state (nft counters, seqadj counters, the ruleset);
late-boot.json (the boot step's exit, log and the flowtable's devices after it, with
late7 gone and back, after the agent's task), late-<step>.json, late-received.txt;
flowexport.bin (every datagram tusk-flowexport sent while the four classes' connections
ran, each after its length as 4 bytes), flowexport-status.json, flowexport-stderr.txt.
"""
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import conntrack
import seqrand
from collectors import SINK
from scenario import TUSK, listening

from flows.core import export
from lab.namespaces import SERVER_V4

TIME_LIMIT = 420
WAIT = 15
PORTS = {"elephant": 5301, "stay": 5302, "patient": 5303, "rand": 5304}
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: elephant, protocol: tcp, ports: [{PORTS["elephant"]}]}}
  - {{name: stay, protocol: tcp, ports: [{PORTS["stay"]}]}}
  - {{name: patient, protocol: tcp, ports: [{PORTS["patient"]}]}}
  - {{name: rand, protocol: tcp, ports: [{PORTS["rand"]}]}}
classes:
  - {{name: elephant, from: inside, to: outside, services: [elephant], action: accept}}
  - {{name: stay, from: inside, to: outside, services: [stay], action: accept,
     fastpath: never}}
  - {{name: patient, from: inside, to: outside, services: [patient], action: accept,
     fastpath_after: 20 MB}}
  - {{name: rand, from: inside, to: outside, services: [rand], action: accept,
     seqrand: both}}
address_sets:
  - {{name: inside-nets, entries: [10.10.1.0/24]}}
nat:
  source:
    - {{name: inside-out, to: outside, source: [inside-nets], translate: masquerade}}
"""
# (step, bytes sent in total by then); patient's last step only for patient
STEPS = (("small", 300_000), ("past", 2_000_000), ("more", 8_000_000), ("late", 30_000_000))
PROMOTED_BY = {"elephant": 1_000_000, "rand": 1_000_000, "patient": 20_000_000,
               "late": 1_000_000}
LATE, LATE_CLIENT, LATE_FW = "late7", "10.10.7.2", "10.10.7.1"
LATE_POLICY = POLICY.replace("interfaces: [veth-c]", f"interfaces: [veth-c, {LATE}]")
BOOT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from appliance.boot import load_forward_ruleset
from policy.core.applier import Applier
applier = Applier(sys.argv[2], sys.argv[3])
if sys.argv[4] == "boot":
    print(json.dumps(load_forward_ruleset(applier)))
else:
    print(json.dumps(applier.attach_fastpath_devices()))
"""

EXPORT_PORT = 4739
SERVER = """
import socket, sys
listener = socket.create_server(("0.0.0.0", int(sys.argv[1])))
print("listening", flush=True)
connection, _ = listener.accept()
total = 0
while data := connection.recv(1 << 16):
    total += len(data)
    print(total, flush=True)
"""
CLIENT = """
import socket, sys
connection = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print(connection.getsockname()[1], flush=True)
for line in sys.stdin:
    count = int(line)
    if not count:
        break
    connection.sendall(b"x" * count)
    print("sent", flush=True)
connection.close()
"""


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab, POLICY)
    ctx.save_text("acct.txt", lab.ns(lab.fw, "sysctl", "-n",
                                     "net.netfilter.nf_conntrack_acct").stdout)
    exporting = start_export(ctx, lab)
    for name, port in PORTS.items():
        transfer(ctx, lab, name, port)
    stop_export(ctx, exporting)
    seqrand.save_state(ctx, lab, "after")
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    late_interface(ctx, lab)


def start_export(ctx, lab):
    """tusk-flowexport in fw (IPFIX, the shortest active timeout) to a sink in the server's
    namespace that keeps every datagram (the host's test reads them with nfdump's
    collector): the records of connections on the fast path."""
    conf, status = ctx.dir / "flowexport.json", ctx.dir / "flowexport-status.json"
    conf.write_text(export.render(export.check({
        "active_timeout": 5, "collectors": [{"address": SERVER_V4, "port": EXPORT_PORT}]})))
    sink = lab.popen(lab.server, sys.executable, "-c", SINK, SERVER_V4, str(EXPORT_PORT),
                     str(ctx.dir / "flowexport.bin"), text=True, stdout=subprocess.PIPE,
                     stdin=subprocess.DEVNULL)
    assert sink.stdout.readline().strip() == "listening"
    exporter = lab.popen(lab.fw, sys.executable, str(Path(TUSK).parent / "tusk-flowexport"),
                         str(conf), str(status), stdin=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    ctx.wait_until(lambda: status.exists() or exporter.poll() is not None, 30,
                   "the exporter's first status")
    return exporter, sink


def stop_export(ctx, exporting):
    """The exporter ended as the agent ends it (SIGTERM: it sends what moved since its
    last records), then the sink."""
    exporter, sink = exporting
    exporter.terminate()
    try:
        exporter.wait(60)
    finally:
        ctx.save_text("flowexport-stderr.txt", exporter.stderr.read()[-4000:])
        time.sleep(1)
        sink.kill()
        sink.wait(30)


def flowtable_devices(lab):
    listed = json.loads(lab.ns(lab.fw, "nft", "-j", "list", "flowtable", "inet", "tusk",
                               "fastpath").stdout)["nftables"]
    dev = next(item["flowtable"] for item in listed if "flowtable" in item).get("dev", [])
    return sorted([dev] if isinstance(dev, str) else dev)


def boot_step(ctx, lab, what):
    """load_forward_ruleset (boot) or attach_fastpath_devices (attach), as the boot
    step and the agent run them, on fw with this scenario's revisions."""
    done = lab.ns(lab.fw, sys.executable, "-c", BOOT, str(Path(TUSK).parents[1]),
                  str(ctx.dir / "tusk-state"), lab.fw, what, check=False)
    return {"exit": done.returncode, "out": done.stdout, "err": done.stderr[-2000:]}


def wire_late(lab):
    lab.wire(lab.client, "eth1", lab.fw, LATE)
    lab.address(lab.client, "eth1", f"{LATE_CLIENT}/24")
    lab.address(lab.fw, LATE, f"{LATE_FW}/24")
    lab.ns(lab.client, "ip", "route", "add", f"{SERVER_V4}/32", "via", LATE_FW)


def late_interface(ctx, lab):
    wire_late(lab)
    policy = ctx.dir / "policy-late.yaml"
    policy.write_text(LATE_POLICY)
    ctx.tusk(lab, "apply", policy)
    ctx.tusk(lab, "confirm")
    said = {"applied": flowtable_devices(lab)}
    lab.ns(lab.fw, "ip", "link", "del", LATE)
    said["deleted"] = flowtable_devices(lab)
    lab.ns(lab.fw, "nft", "delete", "table", "inet", "tusk")
    said["boot"] = boot_step(ctx, lab, "boot")
    said["booted"] = flowtable_devices(lab)
    wire_late(lab)
    said["attach"] = boot_step(ctx, lab, "attach")
    said["attached"] = flowtable_devices(lab)
    said["attach_again"] = boot_step(ctx, lab, "attach")
    ctx.save_json("late-boot.json", said)
    # what the client sends over late7 passes the forward hook only on the slow path:
    # past 1.5 MB (promoted at 1 MB), next to nothing should
    lab.ns(lab.fw, "nft", "-f", "-", input=(
        "table inet probe {\n chain forward {\n  type filter hook forward priority -10\n"
        f'  iifname "{LATE}" tcp dport {PORTS["elephant"]} ct bytes > 1500000 counter\n'
        " }\n}\n"))
    transfer(ctx, lab, "late", PORTS["elephant"])
    ctx.run("nft", "list", "table", "inet", "probe", ns=lab.fw, save="late-probe.txt")


def transfer(ctx, lab, name, port):
    server = lab.popen(lab.server, sys.executable, "-c", SERVER, str(port), text=True,
                       stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    client = None
    received = [0]
    try:
        assert server.stdout.readline().strip() == "listening"
        ctx.wait_until(lambda: listening(lab, port), 30, f"the server on {port}")
        client = lab.popen(lab.client, sys.executable, "-c", CLIENT, SERVER_V4, str(port),
                           text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        sport = int(client.stdout.readline())
        state = {"sent": 0}

        def push(count, promoted):
            """count bytes more, all of them through fw; then, where the class promotes by
            now, up to WAIT s for the offload (a byte at a time: the flowtable takes a
            connection with a packet past the threshold). -> the entry."""
            client.stdin.write(f"{count}\n")
            client.stdin.flush()
            assert client.stdout.readline().strip() == "sent"
            state["sent"] += count
            while received[0] < state["sent"]:
                received[0] = int(server.stdout.readline())
            deadline = time.monotonic() + (WAIT if promoted else 1)
            entry = conntrack.find(conntrack.entries(lab.fw), sport, port)
            while promoted and not entry["status"] & conntrack.IPS_OFFLOAD and \
                    time.monotonic() < deadline:
                client.stdin.write("1\n")
                client.stdin.flush()
                assert client.stdout.readline().strip() == "sent"
                state["sent"] += 1
                time.sleep(0.2)
                entry = conntrack.find(conntrack.entries(lab.fw), sport, port)
            return entry

        for step, total in STEPS:
            if step == "late" and name != "patient":
                break
            entry = push(max(total - state["sent"], 1),
                         total > PROMOTED_BY.get(name, float("inf")))
            ctx.save_json(f"{name}-{step}.json", {"sent": state["sent"], "entry": entry})
        if name == "patient":
            policy_change(ctx, lab, push)
        sent = state["sent"]
        if name == "elephant":
            sent += drop(ctx, lab, client, server, sport, port, received)
            client.kill()
            client.wait(30)
            server.kill()
            server.wait(30)
            ctx.save_text(f"{name}-received.txt", f"{received[0]} {sent}\n")
            return
        client.stdin.write("0\n")
        client.stdin.flush()
        client.wait(30)
        for line in server.stdout:
            received[0] = int(line)
        server.wait(30)
        ctx.save_text(f"{name}-received.txt", f"{received[0]} {sent}\n")
    finally:
        for process in (client, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


def policy_change(ctx, lab, push):
    """A policy applied while the patient's connection (30 MB) is on the fast path: its
    class now promotes only past 50 MB. Replacing the table ends every fast path, and the
    new rules decide again, as for any established connection on the slow path: 1 MB more
    and it stays there. Then the first policy again (a rollback's effect): promoted once
    more."""
    changed = ctx.dir / "policy-50mb.yaml"
    changed.write_text(POLICY.replace("fastpath_after: 20 MB", "fastpath_after: 50 MB"))
    for path, step, promoted in ((changed, "changed", False),
                                 (ctx.dir / "policy.yaml", "restored", True)):
        ctx.tusk(lab, "apply", path)
        ctx.tusk(lab, "confirm")
        entry = push(1_000_000, promoted)
        ctx.save_json(f"patient-{step}.json", {"entry": entry})


def drop(ctx, lab, client, server, sport, port, received):
    """What the Flows page's Drop does to a promoted connection (flows.drop: the entry
    deleted over ctnetlink), with pick-up mid-stream off as on an HA pair: the flowtable
    lets go of it and nothing more gets through. Returns the bytes sent after."""
    lab.ns(lab.fw, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0")
    entry = conntrack.find(conntrack.entries(lab.fw), sport, port)
    ctx.save_json("elephant-dropped.json", {"entry": entry, "received": received[0]})
    conntrack.delete(lab.fw, entry)
    time.sleep(2)           # the flowtable's garbage collector runs every second
    before = received[0]
    client.stdin.write("2000000\n")
    client.stdin.flush()
    got, pending, deadline = [before], b"", time.monotonic() + 5
    descriptor = server.stdout.fileno()
    os.set_blocking(descriptor, False)
    while time.monotonic() < deadline:          # what the server reads meanwhile
        if select.select([descriptor], [], [], 0.2)[0]:
            chunk = os.read(descriptor, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            got += [int(line) for line in lines if line.strip().isdigit()]
    lab.ns(lab.fw, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=1")
    ctx.save_json("elephant-after-drop.json", {
        "received_before": before, "entries": [e for e in conntrack.entries(lab.fw)
                                               if e["orig"]["dport"] == port],
        "server_alive": server.poll() is None, "received_after": max(got)})
    return 2000000

