"""seqrand-synproxy: synproxy and seqrand on the same connections. synproxy answers
the client's SYN itself and opens the connection to the server with a SYN of its
own, through fw's output path: the seqrand helper, assigned there as well, must leave
such connections to synproxy (which owns their reply offset) and count them, and the
connections must work.

Saved: results.json, conntrack.json, after- state (seqrand_skipped_synproxy).
"""
import os

import conntrack
import seqrand

from lab.namespaces import SERVER_V4

TIME_LIMIT = 120
PORT = seqrand.PORT_BOTH
CONNECTIONS = 3
RULESET = f"""table inet lab {{
  ct helper randomise {{
    type "seqrand-bi" protocol tcp
    l3proto inet
  }}
  chain raw_prerouting {{
    type filter hook prerouting priority raw; policy accept;
    iifname "veth-c" tcp dport {PORT} tcp flags syn notrack
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
    iifname "veth-c" tcp dport {PORT} ct state invalid,untracked synproxy mss 1460 wscale 7 \
timestamp sack-perm
    ct state established,related accept
    ct state invalid counter drop
  }}
  chain output {{
    type filter hook output priority filter; policy accept;
    tcp dport {PORT} ct state new ct helper set "randomise"
  }}
}}
"""


def run(ctx):
    lab = ctx.lab()
    ctx.run("sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0", ns=lab.fw)
    ctx.run("nft", "-f", "-", ns=lab.fw, input=RULESET)
    results = []
    for _ in range(CONNECTIONS):
        connection = seqrand.Connection(lab, PORT, SERVER_V4)
        payload = os.urandom(20000)
        results.append({"client_port": connection.client_port,
                        "echo_ok": connection.exchange(payload) == payload})
        connection.close()
    ctx.save_json("results.json", results)
    ctx.save_json("conntrack.json", conntrack.entries(lab.fw))
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    seqrand.save_state(ctx, lab, "after")
