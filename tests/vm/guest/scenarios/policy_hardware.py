"""policy-hardware: classes that let hardware carry their connections (hardware: true,
issue 35 part 2), on fw's netdevsim ports (Tusk's test kernel lets them take flowtable
offload and counts the rules they hold: tests/vm/kernel/). The policy is applied and
confirmed with Tusk's CLI; its hardware classes' connections go to the flowtable of
table tusk_offload ("flags offload"), the other fast-path classes' to table tusk's
software flowtable over the same ports. Cases, in order:

- hw-always: fastpath: always, hardware: true - in the NIC (IPS_HW_OFFLOAD, one rule
  per direction on each port), its bytes still counted by conntrack (the flowtable's
  counter; the class's totals are read through the ct mark from there);
- soft: fastpath: always without hardware - on the fast path, never in the NIC;
- hw-auto: fastpath: auto (after 1 MB), hardware: true - on the slow path for its first
  megabyte, in the NIC after it;
- seqrand: the fast class of seqrand's policy (both sides randomised) - in software,
  translated, never in the NIC.

Then the capability check on an interface whose driver cannot offload (a veth pair
in fw): the policy is refused naming classes[i].hardware and nothing changes.
Saved: results.json, ruleset.txt (as loaded), before- and after- state.
"""
import time
from pathlib import Path

import conntrack
import seqrand

TIME_LIMIT = 180
PORT_HW, PORT_SOFT, PORT_HW_AUTO = 5211, 5212, 5213
SIZE = 2 * 1024 * 1024
IPS_SEQ_ADJUST, IPS_OFFLOAD, IPS_HW_OFFLOAD = 1 << 6, 1 << 14, 1 << 15
POLICY = seqrand.POLICY.replace(
    "  - {name: ping, protocol: icmp}",
    f"  - {{name: hw, protocol: tcp, ports: [{PORT_HW}]}}\n"
    f"  - {{name: soft, protocol: tcp, ports: [{PORT_SOFT}]}}\n"
    f"  - {{name: hw-auto, protocol: tcp, ports: [{PORT_HW_AUTO}]}}\n"
    "  - {name: ping, protocol: icmp}").replace(
    "  - {name: diagnostics,",
    "  - {name: hw-always, from: inside, to: outside, services: [hw], action: accept,\n"
    "     fastpath: always, hardware: true}\n"
    "  - {name: soft, from: inside, to: outside, services: [soft], action: accept,\n"
    "     fastpath: always}\n"
    "  - {name: hw-auto, from: inside, to: outside, services: [hw-auto], action: accept,\n"
    "     hardware: true}\n"
    "  - {name: diagnostics,")


DEBUGFS = Path("/sys/kernel/debug")     # netdevsim's rule counters


def run(ctx):
    if not (DEBUGFS / "netdevsim").exists():
        ctx.run("mount", "-t", "debugfs", "debugfs", str(DEBUGFS))
    lab = ctx.lab(links="netdevsim")
    seqrand.apply_policy(ctx, lab, POLICY)
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    seqrand.save_state(ctx, lab, "before")
    ports = [lab.netdevsim[(lab.fw, name)] for name in ("veth-c", "veth-s")]
    results = {"hw-always": one(lab, ports, PORT_HW),
               "soft": one(lab, ports, PORT_SOFT),
               "hw-auto": one(lab, ports, PORT_HW_AUTO, watch_first_megabyte=True),
               "seqrand": one(lab, ports, seqrand.PORT_FAST)}
    results["refused"] = refused_on_veth(ctx, lab)
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def rules(ports, name="ft_rules"):
    return sum(int((port / name).read_text()) for port in ports)


def entry_of(lab, connection, port):
    return conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)


def one(lab, ports, port, watch_first_megabyte=False):
    """A connection of the class on port: 2 MB each way (SHA-256 checked), then small
    exchanges for 2 s (the refresh path and the garbage collector run every second);
    its entry, and the rules the NIC was given meanwhile. With watch_first_megabyte, the
    entry after 256 kB too (an auto class's connection is still on the slow path)."""
    added = rules(ports, "ft_rules_added")
    connection = seqrand.Connection(lab, port)
    early = None
    if watch_first_megabyte:
        part = seqrand.transfer(connection.client, connection.server, 256 * 1024)
        early = {"intact": part[0] == part[1],
                 "status": entry_of(lab, connection, port)["status"]}
    up = seqrand.transfer(connection.client, connection.server, SIZE)
    down = seqrand.transfer(connection.server, connection.client, SIZE)
    for _ in range(20):
        connection.exchange(b"still here")
        time.sleep(0.1)
    entry = entry_of(lab, connection, port)
    result = {"client_port": connection.client_port, "early": early,
              "transfer": up[0] == up[1] and down[0] == down[1], "status": entry["status"],
              "helper": entry["helper"], "bytes": entry.get("bytes"),
              "rules_held": rules(ports),
              "rules_added": rules(ports, "ft_rules_added") - added}
    connection.close()
    return result


def refused_on_veth(ctx, lab):
    """The policy with its zones on a veth pair in fw, whose driver cannot offload: the
    apply is refused, naming the hardware classes, and the live ruleset stays."""
    lab.ns(lab.fw, "ip", "link", "add", "vx-in", "type", "veth", "peer", "name", "vx-out")
    before = lab.ns(lab.fw, "nft", "list", "ruleset").stdout
    path = ctx.dir / "policy-veth.yaml"
    path.write_text(POLICY.replace("[veth-c]", "[vx-in]").replace("[veth-s]", "[vx-out]"))
    refused = ctx.tusk(lab, "apply", path, check=False)
    return {"returncode": refused.returncode, "output": refused.stdout + refused.stderr,
            "unchanged": lab.ns(lab.fw, "nft", "list", "ruleset").stdout == before}
