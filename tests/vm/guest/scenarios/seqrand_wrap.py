"""seqrand-wrap: one long transfer through a class with both directions randomised:
4.4 GB client -> server, more than 2^32, so the sequence numbers of the data cross
2^32 in the client's space, in the server's view of it, and in the window tracking of
conntrack in between. Offloads stay on (GSO) for speed; headers are captured on both
fw interfaces. conntrack is sampled while it runs, and a ctnetlink listener records
the events an event-driven conntrackd would receive.

Saved: fw-inside.pcap, fw-outside.pcap, bulk-*.json (iperf3), states.json (the
connection's conntrack state at each sample), events.jsonl, after- state.
"""
import subprocess
import time

import conntrack
import seqrand
from scenario import listening

from lab.namespaces import SERVER_V4

TIME_LIMIT = 420
BYTES = "4400M"
SNAPLEN = 96


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    events = conntrack.EventLog(lab.fw)
    states = []
    try:
        with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp", snaplen=SNAPLEN), \
                ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp", snaplen=SNAPLEN):
            with open(ctx.dir / "bulk-server.json", "w") as report:
                server = lab.popen(lab.server, "iperf3", "--server", "--one-off", "--json",
                                   "--port", str(seqrand.PORT_BOTH), stdout=report,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                ctx.wait_until(lambda: listening(lab, seqrand.PORT_BOTH), 30,
                               "iperf3 -s")
                with open(ctx.dir / "bulk-client.json", "w") as out:
                    client = lab.popen(lab.client, "iperf3", "--client", SERVER_V4,
                                       "--port", str(seqrand.PORT_BOTH), "--bytes", BYTES,
                                       "--json", stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
                    while client.poll() is None:
                        states.append(sample(lab))
                        time.sleep(1)
                server.wait(30)
    finally:
        ctx.save_json("states.json", states)
        seqrand.save_json_lines(ctx, "events.jsonl", events.close())
    if client.returncode != 0:
        raise AssertionError(f"iperf3 exited {client.returncode}")
    seqrand.save_state(ctx, lab, "after")


def sample(lab):
    """The TCP entries towards the iperf3 port: (client port, state) at this moment."""
    return [[e["orig"]["sport"], e["tcp_state"]] for e in conntrack.entries(lab.fw)
            if e["orig"]["proto"] == 6 and e["orig"]["dport"] == seqrand.PORT_BOTH]


