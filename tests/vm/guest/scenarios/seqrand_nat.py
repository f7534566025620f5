"""seqrand-nat: randomised classes behind NAT. For each of masquerade, SNAT (to
10.10.2.100), DNAT (the client connects to 10.10.1.100, fw sends it to the
server) and masquerade over IPv6 (masquerade-v6), and for each randomised class
(both, initiator, and fast - both on the flowtable's fast path, which NATs and
translates): 4 MB each way over one connection, the SHA-256 of what arrived
compared with what was sent.

Saved: fw-inside-<nat>.pcap, fw-outside-<nat>.pcap, transfers.json, conntrack
entries of each variant (<nat>-conntrack.json, with their NAT tuples), after- state.
"""
import socket

import conntrack
import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 400
SIZE = 4 * 1024 * 1024
SNAT_ADDRESS, DNAT_ADDRESS = "10.10.2.100", "10.10.1.100"
VARIANTS = {  # name: (table family, prerouting rule, postrouting rule)
    "masquerade": ("ip", "", 'oifname "veth-s" masquerade'),
    "snat": ("ip", "", f'oifname "veth-s" snat to {SNAT_ADDRESS}'),
    "dnat": ("ip", f"ip daddr {DNAT_ADDRESS} dnat to {SERVER_V4}", ""),
    "masquerade-v6": ("ip6", "", 'oifname "veth-s" masquerade'),
}
NAT_TABLE = """table {family} lab_nat {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    {pre}
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    {post}
  }}
}}
"""


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab)
    # the NAT addresses are fw's own: it answers ARP for them
    ctx.run("ip", "addr", "add", f"{SNAT_ADDRESS}/32", "dev", "veth-s", ns=lab.fw)
    ctx.run("ip", "addr", "add", f"{DNAT_ADDRESS}/32", "dev", "veth-c", ns=lab.fw)
    results = []
    for variant, (family, pre, post) in VARIANTS.items():
        ctx.run("nft", "-f", "-", ns=lab.fw,
                input=NAT_TABLE.format(family=family, pre=pre, post=post))
        target = {"dnat": DNAT_ADDRESS, "masquerade-v6": SERVER_V6}.get(variant, SERVER_V4)
        address_family = socket.AF_INET6 if family == "ip6" else socket.AF_INET
        with ctx.capture(lab.fw, "veth-c", f"fw-inside-{variant}", "tcp"), \
                ctx.capture(lab.fw, "veth-s", f"fw-outside-{variant}", "tcp"):
            for name, port in (("both", seqrand.PORT_BOTH),
                               ("initiator", seqrand.PORT_INITIATOR),
                               ("fast", seqrand.PORT_FAST)):
                connection = seqrand.Connection(lab, port, target, family=address_family)
                up = seqrand.transfer(connection.client, connection.server, SIZE)
                down = seqrand.transfer(connection.server, connection.client, SIZE)
                results.append({"nat": variant, "class": name,
                                "client_port": connection.client_port,
                                "upload": up, "download": down})
                connection.close()
        ctx.save_json(f"{variant}-conntrack.json", conntrack.entries(lab.fw))
        ctx.run("nft", "delete", "table", family, "lab_nat", ns=lab.fw)
        ctx.run("conntrack", "-F", ns=lab.fw)
    ctx.save_json("transfers.json", results)
    seqrand.save_state(ctx, lab, "after")
