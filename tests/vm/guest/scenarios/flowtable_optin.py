"""flowtable-optin: which connections with sequence adjustment the flowtable takes
(kernel-patches/0016). Only a helper that says so (NF_CT_HELPER_F_HANDSHAKE: seqrand)
brings its connections' offsets to the fast path; every other seqadj user keeps the
slow path it had in Linux 6.12. One ruleset on fw, `flow add` for every established
TCP connection, and four connections:

- plain: no helper, no offsets - offloaded (the rig can tell);
- seqrand: the seqrand-bi helper's offsets - offloaded, translated there;
- synproxy: synproxy without timestamps (its offsets, an empty timestamp shift) -
  stays on the slow path (0015 as first written took it);
- restored: a plain connection whose entry is created again over ctnetlink with
  offsets (zero) and no helper, as a tool or a conntrackd peer may - stays on the
  slow path.

Each connection exchanges data before and after; the entry is read after 3 s of
traffic. Saved: results.json, ruleset.txt, after- state.
"""
import os
import time

import conntrack
import seqrand

from lab.namespaces import SERVER_V4

TIME_LIMIT = 90
PORT_PLAIN, PORT_SEQRAND, PORT_SYNPROXY, PORT_RESTORED = 5301, 5302, 5303, 5304
TCP_ESTABLISHED = 3
RULESET = f"""table inet lab {{
  flowtable ft {{
    hook ingress priority filter
    devices = {{ veth-c, veth-s }}
  }}
  ct helper randomise {{
    type "seqrand-bi" protocol tcp
    l3proto inet
  }}
  chain raw_prerouting {{
    type filter hook prerouting priority raw; policy accept;
    iifname "veth-c" tcp dport {PORT_SYNPROXY} tcp flags syn notrack
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
    iifname "veth-c" tcp dport {PORT_SYNPROXY} ct state invalid,untracked \
synproxy mss 1460 wscale 7 sack-perm
    meta l4proto tcp ct state established flow add @ft
    ct state established,related accept
    iifname "veth-c" tcp dport {PORT_SEQRAND} ct state new ct helper set "randomise" accept
    iifname "veth-c" tcp dport {{ {PORT_PLAIN}, {PORT_RESTORED} }} ct state new accept
    ct state invalid counter drop
  }}
}}
"""


def run(ctx):
    lab = ctx.lab()
    ctx.run("sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0", ns=lab.fw)
    ctx.run("nft", "-f", "-", ns=lab.fw, input=RULESET)
    seqrand.save_state(ctx, lab, "before")
    results = {}
    for name, port in (("plain", PORT_PLAIN), ("seqrand", PORT_SEQRAND),
                       ("synproxy", PORT_SYNPROXY)):
        connection = seqrand.Connection(lab, port, SERVER_V4)
        results[name] = after_traffic(lab, connection, port)
        connection.close()
    results["restored"] = restored(lab)
    ctx.save_json("results.json", results)
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    seqrand.save_state(ctx, lab, "after")


def after_traffic(lab, connection, port, seconds=3):
    """The connection's entry after seconds of small exchanges (the refresh path and
    the garbage collector run every second), and whether its data came back whole."""
    payload = os.urandom(20000)
    intact = connection.exchange(payload) == payload
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        intact = intact and connection.exchange(b"still here") == b"still here"
        time.sleep(0.1)
    entry = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
    return {"client_port": connection.client_port, "intact": intact,
            "status": entry["status"], "helper": entry["helper"],
            "seqadj_orig": entry["seqadj_orig"]}


def restored(lab):
    events = conntrack.EventLog(lab.fw)
    try:
        connection = seqrand.Connection(lab, PORT_RESTORED, SERVER_V4)
        connection.exchange(b"before")
        deadline = time.monotonic() + 5
        while not any(e["orig"]["sport"] == connection.client_port
                      and e["tcp_state"] == TCP_ESTABLISHED for e in events.events):
            if time.monotonic() > deadline:
                raise AssertionError("no event said the connection was established")
            time.sleep(0.1)
        entry = conntrack.as_synchronised(
            conntrack.find(conntrack.entries(lab.fw), connection.client_port,
                           PORT_RESTORED), events.events)
    finally:
        events.close()
    zero = {"correction_pos": 0, "offset_before": 0, "offset_after": 0}
    conntrack.delete(lab.fw, entry)
    conntrack.restore(lab.fw, dict(entry, helper=None, seqadj_orig=zero, seqadj_reply=zero))
    # the old entry's flow leaves the flowtable at the next garbage collection; the
    # traffic after it meets the restored entry
    result = after_traffic(lab, connection, PORT_RESTORED, seconds=5)
    connection.close()
    return result
