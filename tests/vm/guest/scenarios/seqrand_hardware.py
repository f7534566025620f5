"""seqrand-hardware: a flowtable with hardware offload ("flags offload") never gives a
connection with sequence adjustment to the NIC, which could not rewrite its SACK
blocks (kernel-patches/0015). The lab's links are netdevsim ports (Tusk's test kernel
lets them take flowtable offload and counts the rules they hold: tests/vm/kernel/);
the policy is Tusk's, with its fast-path flowtable then given "flags offload", as an
operator would on a NIC that can. Cases, in order:

- plain: a fast-path class without seqrand; its connection must reach the hardware
  (IPS_HW_OFFLOAD, rules on both of fw's ports): the rig can tell;
- seqrand: a fast-path class randomising both sides; 1 MB each way (SHA-256 checked)
  and no rule ever given to the NIC, the entry neither offloaded nor in hardware;
- gains-seqadj: a plain fast-path connection whose entry is re-created over
  ctnetlink (as conntrackd commits one: it then has a seqadj extension without
  offsets), which goes to hardware; then offsets are set over ctnetlink (zero: the
  stream would stay valid either way). ctnetlink must refuse them (EBUSY,
  kernel-patches/0022: no NIC translates, and before it the NIC forwarded the flow
  untranslated until the garbage collector took it back), the entry keep no
  offsets and stay in hardware, and the connection go on.

Captured on both fw interfaces. Saved: results.json, ruleset.nft (as loaded),
fw-inside.pcap, fw-outside.pcap, before- and after- state.
"""
import re
import time
from pathlib import Path

import conntrack
import seqrand
from pyroute2.netlink.exceptions import NetlinkError

TIME_LIMIT = 150
PORT_FAST_PLAIN = 5206
SIZE = 1024 * 1024
IPS_SEQ_ADJUST, IPS_OFFLOAD, IPS_HW_OFFLOAD = 1 << 6, 1 << 14, 1 << 15
TCP_ESTABLISHED = 3
POLICY = seqrand.POLICY.replace(
    "  - {name: ping, protocol: icmp}",
    f"  - {{name: fast-plain, protocol: tcp, ports: [{PORT_FAST_PLAIN}]}}\n"
    "  - {name: ping, protocol: icmp}").replace(
    "  - {name: diagnostics,",
    "  - {name: fast-plain, from: inside, to: outside, services: [fast-plain], "
    "action: accept,\n     fastpath: true}\n"
    "  - {name: diagnostics,")
DEBUGFS = Path("/sys/kernel/debug")


def run(ctx):
    if not (DEBUGFS / "netdevsim").exists():
        ctx.run("mount", "-t", "debugfs", "debugfs", str(DEBUGFS))
    lab = ctx.lab(links="netdevsim")
    seqrand.apply_policy(ctx, lab, POLICY)
    hardware_flowtable(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    ports = [lab.netdevsim[(lab.fw, name)] for name in ("veth-c", "veth-s")]
    results = {}
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        results["plain"] = plain(lab, ports)
        results["seqrand"] = randomised(lab, ports)
        results["gains-seqadj"] = gains_seqadj(lab, ports)
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def hardware_flowtable(ctx, lab):
    """Tusk's ruleset again, its flowtable with hardware offload (a flowtable's flags
    cannot change in place: the table is replaced in one transaction)."""
    listed = ctx.run("nft", "list", "table", "inet", "tusk", ns=lab.fw).stdout
    ruleset, count = re.subn(r"(flowtable \S+ \{\n(?:\t\t[^\n]*\n)*?\t\tdevices = [^\n]*\n)",
                             r"\1\t\tflags offload\n", listed)
    assert count == 1, listed
    ruleset = "delete table inet tusk\n" + ruleset
    ctx.save_text("ruleset.nft", ruleset)
    ctx.run("nft", "-f", "-", ns=lab.fw, input=ruleset)


def rules(ports, name="ft_rules"):
    """Flowtable rules fw's two netdevsim ports hold now (ft_rules) or were ever given
    (ft_rules_added), summed."""
    return sum(int((port / name).read_text()) for port in ports)


def entry_of(lab, connection, port):
    return conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)


def eventually(predicate, seconds, step=None):
    """Whether predicate() turned true within seconds; step() runs between tries."""
    deadline = time.monotonic() + seconds
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        if step:
            step()
        time.sleep(0.1)


def plain(lab, ports):
    added = rules(ports, "ft_rules_added")
    connection = seqrand.Connection(lab, PORT_FAST_PLAIN)
    connection.exchange(b"plain")
    in_hardware = eventually(
        lambda: entry_of(lab, connection, PORT_FAST_PLAIN)["status"] & IPS_HW_OFFLOAD, 5,
        lambda: connection.exchange(b"plain"))
    result = {"client_port": connection.client_port, "in_hardware": bool(in_hardware),
              "rules_held": rules(ports),
              "rules_added": rules(ports, "ft_rules_added") - added,
              "status": entry_of(lab, connection, PORT_FAST_PLAIN)["status"]}
    connection.close()
    # its rules go with it (FIN tears the flow down): the next cases start from none
    result["rules_released"] = eventually(lambda: rules(ports) == 0, 5)
    return result


def randomised(lab, ports):
    added = rules(ports, "ft_rules_added")
    connection = seqrand.Connection(lab, seqrand.PORT_FAST)
    up = seqrand.transfer(connection.client, connection.server, SIZE)
    down = seqrand.transfer(connection.server, connection.client, SIZE)
    # the garbage collector and the refresh path run every second: give them time
    for _ in range(15):
        connection.exchange(b"still here")
        time.sleep(0.1)
    entry = entry_of(lab, connection, seqrand.PORT_FAST)
    connection.close()
    return {"client_port": connection.client_port,
            "transfer": up[0] == up[1] and down[0] == down[1], "status": entry["status"],
            "helper": entry["helper"], "seqadj_orig": entry["seqadj_orig"],
            "rules_added": rules(ports, "ft_rules_added") - added}


def gains_seqadj(lab, ports):
    events = conntrack.EventLog(lab.fw)
    try:
        connection = seqrand.Connection(lab, PORT_FAST_PLAIN)
        connection.exchange(b"before")
        # offloaded: the TCP state that a re-creation needs comes from the events
        eventually(lambda: any(e["orig"]["sport"] == connection.client_port
                               and e["tcp_state"] == TCP_ESTABLISHED for e in events.events), 5)
        entry = conntrack.as_synchronised(entry_of(lab, connection, PORT_FAST_PLAIN),
                                          events.events)
    finally:
        events.close()
    conntrack.delete(lab.fw, entry)
    conntrack.restore(lab.fw, entry)

    def status():
        return entry_of(lab, connection, PORT_FAST_PLAIN)["status"]

    def exchange():
        connection.exchange(b"traffic")

    # the old entry's flow leaves the flowtable at the next garbage collection; then
    # the restored one is offloaded
    restored_in_hardware = bool(eventually(lambda: status() & IPS_HW_OFFLOAD, 8, exchange))
    zero = {"correction_pos": 0, "offset_before": 0, "offset_after": 0}
    added = rules(ports, "ft_rules_added")
    try:
        conntrack.update_seqadj(lab.fw, entry, zero)
        refused = 0
    except NetlinkError as error:
        refused = error.code
    after = entry_of(lab, connection, PORT_FAST_PLAIN)
    # whatever the kernel did with them, the garbage collector and the refresh path
    # run every second: give them time
    for _ in range(20):
        exchange()
        time.sleep(0.1)
    result = {"client_port": connection.client_port,
              "restored_in_hardware": restored_in_hardware, "refused": refused,
              "updated_status": after["status"], "seqadj_orig": after["seqadj_orig"],
              "status_after": status(), "rules_held": rules(ports),
              "rules_added_after": rules(ports, "ft_rules_added") - added,
              "continued": connection.exchange(b"after") == b"after"}
    connection.close()
    return result
