"""bridge-vlan: Tusk's policy on a VLAN-aware bridge (issue 39's transparent bridge mode
with `vlans`): fw's bridge filters VLANs (vlan_filtering 1, VLANs 10 and 20 tagged on
both ports, untagged frames in the default VLAN 1), as the network's iproute2 backend
makes it; client and server talk over VLAN sub-interfaces of their eth0 and untagged.

The bridge's VLAN code moves a frame's tag out of the frame (the kernel's "accelerated"
tag) before the bridge family's hooks, so the questions are whether the policy's
matches - ARP's passage, addresses, ports, conntrack's state - see tagged traffic as
they see untagged, and whether zones naming a port and its VLANs (`vlans` of a bridged
zone) tell one VLAN's traffic from another's on the same ports.

Saved: results.json ({phase: {what: crossed}}), <phase>-ruleset.txt,
<phase>-nft-counters.json, <phase>-conntrack.json.
"""
import json
import socket

import conntrack
import seqrand

from lab.namespaces import BRIDGE, SERVER_V4

TIME_LIMIT = 180
VLANS = (10, 20)
OPEN, CLOSED = seqrand.PORT_PLAIN, 5209
SERVICES = f"""\
services:
  - {{name: web, protocol: tcp, ports: [{OPEN}]}}
  - {{name: ping, protocol: icmp}}
  - {{name: ping6, protocol: icmpv6}}
"""
PORTS = """\
version: 1
zones:
  - {name: inside, interfaces: [veth-c], bridged: true}
  - {name: outside, interfaces: [veth-s], bridged: true}
""" + SERVICES + """\
classes:
  - {name: web, from: inside, to: outside, services: [web], action: accept}
  - {name: diagnostics, from: inside, to: outside, services: [ping, ping6], action: accept}
"""
# VLAN 10 may reach the server's web port, VLAN 20 only ping it; untagged frames (the
# default VLAN) are in no zone: the default deny's
BY_VLAN = """\
version: 1
zones:
  - {name: inside10, interfaces: [veth-c], bridged: true, vlans: [10]}
  - {name: outside10, interfaces: [veth-s], bridged: true, vlans: [10]}
  - {name: inside20, interfaces: [veth-c], bridged: true, vlans: [20]}
  - {name: outside20, interfaces: [veth-s], bridged: true, vlans: [20]}
""" + SERVICES + """\
classes:
  - {name: web10, from: inside10, to: outside10, services: [web], action: accept}
  - {name: ping20, from: inside20, to: outside20, services: [ping, ping6], action: accept}
"""


def v4(vid, host):
    return f"10.31.{vid}.{host}"


def v6(vid, host):
    return f"fd00:31:{vid}::{host}"


def targets():
    """(name, IPv4 server, IPv6 server) of each way to the server: untagged, each VLAN."""
    return [("untagged", SERVER_V4, None)] + [
        (f"vlan{vid}", v4(vid, 2), v6(vid, 2)) for vid in VLANS]


def vlan_aware(ctx, lab):
    """fw's bridge VLAN-aware with VLANs tagged on both ports (as network/core/
    iproute2.py makes a bridge with vlans); each end a sub-interface per VLAN."""
    ctx.run("ip", "link", "set", BRIDGE, "type", "bridge", "vlan_filtering", "1", ns=lab.fw)
    for port in ("veth-c", "veth-s"):
        for vid in VLANS:
            ctx.run("bridge", "vlan", "add", "dev", port, "vid", str(vid), ns=lab.fw)
    for ns, host in ((lab.client, 3), (lab.server, 2)):
        for vid in VLANS:
            name = f"eth0.{vid}"
            ctx.run("ip", "link", "add", "link", "eth0", "name", name, "type", "vlan", "id",
                    str(vid), ns=ns)
            lab.address(ns, name, f"{v4(vid, host)}/24", f"{v6(vid, host)}/64")
    ctx.run("bridge", "vlan", "show", ns=lab.fw, save="bridge-vlans.txt")


def pings(ctx, lab, address):
    six = ("-6",) if ":" in address else ()
    return ctx.run("ping", *six, "-c", "1", "-W", "2", address, ns=lab.client,
                   check=False).returncode == 0


def connects(lab, address, port):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        connection = seqrand.Connection(lab, port, address, family, timeout=3)
    except OSError:
        return False
    try:
        return connection.exchange() == b"tusk"
    finally:
        connection.close()


def phase(ctx, lab, name, policy):
    seqrand.apply_policy(ctx, lab, policy)
    ctx.run("nft", "list", "table", "bridge", "tusk_bridge", ns=lab.fw,
            save=f"{name}-ruleset.txt")
    found = {}
    for way, server4, server6 in targets():
        found[way] = {"ping": pings(ctx, lab, server4),
                      "ping6": pings(ctx, lab, server6) if server6 else None,
                      "open": connects(lab, server4, OPEN),
                      "open6": connects(lab, server6, OPEN) if server6 else None,
                      "closed": connects(lab, server4, CLOSED)}
    ctx.run("nft", "-j", "list", "counters", "table", "bridge", "tusk_bridge", ns=lab.fw,
            save=f"{name}-nft-counters.json")
    ctx.save_json(f"{name}-conntrack.json", conntrack.entries(lab.fw))
    ctx.run("conntrack", "-F", ns=lab.fw, check=False)
    return found


def run(ctx):
    lab = ctx.lab(bridge=True)
    vlan_aware(ctx, lab)
    results = {}
    for name, policy in (("ports", PORTS), ("by-vlan", BY_VLAN)):
        results[name] = phase(ctx, lab, name, policy)
        ctx.save_text("results.json", json.dumps(results, indent=1) + "\n")
