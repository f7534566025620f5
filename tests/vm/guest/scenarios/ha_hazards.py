"""ha-hazards: the configurations docs/HA.md warns against, each run on Tusk's kernel
with a randomised flow (class both) through the pair (tests/netns/hapair.py), so that
tests/vm/test_vm_ha.py can show what each costs and what protects it.

  filter  conntrackd on both firewalls with a state filter (`State Accept { ESTABLISHED
          CLOSED TIME_WAIT CLOSE_WAIT for TCP }`): the SYN-time events that carried the
          offsets before kernel-patches/0018 are not synced; fwA dies, fwB takes over.
  loose   fwB with nf_conntrack_tcp_loose=1 and its conntrackd stopped: fwA loses its
          segments (its conntrackd and the sync link stay), fwB takes over and, before
          any sync, sees the flow's packets - a midstream pickup seqrand cannot
          translate; then fwB's conntrackd starts and asks fwA for its table (the late
          sync), whose update of that entry 0018 refuses, so conntrackd makes it again.
  strict  the same with nf_conntrack_tcp_loose=0: no pickup; the flow waits for the sync.

Saved per run: <run>-flow.json (chunks echoed before the failover, during the gap, at the
end, error), <run>-b-entries.json (fwB's table once it learnt the connection: filter,
before the failover; loose and strict, after the late sync), <run>-b-seqadj-gap.json and
<run>-b-entries-gap.json (fwB's counters and table after the failover, before any sync),
<run>-b-seqadj.json (at the end), <run>-client.pcap and <run>-server.pcap.
"""
import time

import conntrack
from hapair import Flow, Pair
from kit import time_scale
from scenario import pair_firewall

from scenarios.ha_seqrand import ADVERT_MS, POLICY, PORT

TIME_LIMIT = 480
STATE_FILTER = ("\t\tState Accept {\n\t\t\tESTABLISHED CLOSED TIME_WAIT CLOSE_WAIT for TCP\n"
                "\t\t}\n\t\tAddress Ignore {")
GAP_SECONDS = 4          # fwB forwards (or drops) the flow's packets this long unsynced
GAP_MAX = 30             # loose: until the client's retransmission (backing off) reached fwB


def run(ctx):
    policy = ctx.dir / "policy.yaml"
    policy.write_text(POLICY)
    for name in ("filter", "loose", "strict"):
        one_run(ctx, name, policy)


def counters(pair, side):
    text = pair.run(side, "cat", "/proc/net/nf_conntrack_seqadj").stdout
    return {key: int(value) for key, value in (line.split() for line in text.splitlines())}


def gap(pair, name):
    """fwB master and unsynced: GAP_SECONDS, and with loose tracking until it has seen
    the flow (its pick-up counted; the client's retransmissions back off, so on a slow
    machine the first to reach fwB may come well after it took over)."""
    time.sleep(GAP_SECONDS)
    deadline = time.monotonic() + GAP_MAX * time_scale()    # the guest's slowness
    while name == "loose" and time.monotonic() < deadline and \
            counters(pair, "b").get("seqrand_skipped_midstream", 0) < 1:
        time.sleep(0.5)


def one_run(ctx, name, policy):
    pair = Pair("hz", ctx.dir / f"{name}-pair", advert_ms=ADVERT_MS,
                firewall=pair_firewall(ctx, policy, name))
    if name == "filter":
        pair.conntrackd_edit = lambda text: text.replace("\t\tAddress Ignore {", STATE_FILTER)
    said = {"run": name}
    try:
        pair.up()
        for who in ("client", "server"):
            pair.run(who, "ethtool", "-K", "eth0", "tx", "off")
        if name != "filter":
            pair.run("b", "sysctl", "-qw",
                     f"net.netfilter.nf_conntrack_tcp_loose={1 if name == 'loose' else 0}")
            pair.stop_conntrackd("b")
        pair.settled(seconds=4)
        with ctx.capture(pair.names["client"], "eth0", f"{name}-client", f"tcp port {PORT}"), \
                ctx.capture(pair.names["server"], "eth0", f"{name}-server",
                            f"tcp port {PORT}"):
            flow = Flow(pair, PORT, chunk_bytes=4096, pause=0.02, timeout=60)
            said["client_port"] = flow.client_port
            try:
                flow.progress(30, seconds=60)
                if name == "filter":
                    pair.wait_entries("b", PORT, seconds=60)
                    ctx.save_json(f"{name}-b-entries.json", conntrack.entries(pair.names["b"]))
                    pair.fail("a")
                else:
                    pair.fail_traffic("a")
                pair.wait_state("b", "MASTER", seconds=30)
                said["before_failover"] = flow.echoed
                if name != "filter":
                    gap(pair, name)
                    ctx.save_json(f"{name}-b-seqadj-gap.json", counters(pair, "b"))
                    ctx.save_json(f"{name}-b-entries-gap.json",
                                  conntrack.entries(pair.names["b"]))
                    said["during_gap"] = flow.echoed - said["before_failover"]
                    pair.start_conntrackd("b")
                try:
                    flow.progress(30, seconds=90)
                except AssertionError as error:
                    said["stalled"] = str(error)
                if name != "filter":     # what the sync left in fwB's table
                    ctx.save_json(f"{name}-b-entries.json", conntrack.entries(pair.names["b"]))
            finally:
                flow.finish()
                said.update(echoed=flow.echoed, longest_wait=round(flow.longest_wait, 3),
                            error=repr(flow.error) if flow.error else "")
        ctx.save_json(f"{name}-b-seqadj.json", counters(pair, "b"))
    finally:
        ctx.save_json(f"{name}-flow.json", said)
        pair.down()
