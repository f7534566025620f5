"""seqrand-offloads: the rewrite with checksum offloads in play, class both, 2 MB each
way with SHA-256 checks. fw's egress interfaces compute checksums in software (tx
off), so what their captures show - and what the endpoints verify - is the final
checksum of every segment fw rewrote:

- gso: the endpoints send TSO super-segments (CHECKSUM_PARTIAL) that fw rewrites
  once and segments on the way out;
- gro: the endpoints send MTU-sized segments with their own checksums, fw's ingress
  merges them (GRO) before the rewrite and splits them again on the way out;
- gro-list: the same merged by fraglist GRO (rx-gro-list), which keeps every
  segment's own headers, split by fw's egress in software (tx-gso-list off);
- gso-fast, gro-fast, gro-list-fast: gso, gro and gro-list through class fast,
  rewritten on the flowtable fast path;
- gso-v6, gro-list-v6: gso and gro-list over IPv6 (TCPv6 GSO, fraglist GRO of IPv6,
  where seqadj finds the TCP header past the IPv6 one).

Saved: <case>-fw-inside.pcap / -fw-outside.pcap, transfers.json, <case>- state
(endpoints' TcpInCsumErrors among it).
"""
import socket

import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 360
SIZE = 2 * 1024 * 1024      # 1 450 full segments each way
SNAPLEN = 1600           # whole segments: their checksums are what is checked
GRO_LIST = ("gro", "on", "rx-gro-list", "on", "tx-gso-list", "off")
CASES = {
    "gso": {"endpoints": ("tso", "on", "gso", "on"), "fw_ingress": ("gro", "off"),
            "port": seqrand.PORT_BOTH},
    "gro": {"endpoints": ("tx", "off"), "fw_ingress": ("gro", "on"), "port": seqrand.PORT_BOTH},
    "gro-list": {"endpoints": ("tx", "off"), "fw_ingress": GRO_LIST, "port": seqrand.PORT_BOTH},
}
for _name in ("gso", "gro", "gro-list"):
    CASES[f"{_name}-fast"] = dict(CASES[_name], port=seqrand.PORT_FAST)
CASES["gso-v6"] = dict(CASES["gso"], family=socket.AF_INET6)
CASES["gro-list-v6"] = dict(CASES["gro-list"], family=socket.AF_INET6)


def run(ctx):
    results = []
    for name, case in CASES.items():
        lab = ctx.lab()
        seqrand.apply_policy(ctx, lab)
        for ns in (lab.client, lab.server):
            ctx.run("ethtool", "-K", "eth0", *case["endpoints"], ns=ns)
        for interface in ("veth-c", "veth-s"):
            ctx.run("ethtool", "-K", interface, "tx", "off", *case["fw_ingress"], ns=lab.fw)
        seqrand.save_state(ctx, lab, f"{name}-before")
        with ctx.capture(lab.fw, "veth-c", f"{name}-fw-inside", "tcp", snaplen=SNAPLEN), \
                ctx.capture(lab.fw, "veth-s", f"{name}-fw-outside", "tcp", snaplen=SNAPLEN):
            family = case.get("family", socket.AF_INET)
            connection = seqrand.Connection(
                lab, case["port"], family=family,
                server=SERVER_V6 if family == socket.AF_INET6 else SERVER_V4)
            up = seqrand.transfer(connection.client, connection.server, SIZE)
            down = seqrand.transfer(connection.server, connection.client, SIZE)
            results.append({"case": name, "client_port": connection.client_port,
                            "upload": up, "download": down})
            connection.close()
        ctx.run("ethtool", "-k", "veth-c", ns=lab.fw, save=f"{name}-fw-features.txt")
        seqrand.save_state(ctx, lab, f"{name}-after")
        lab.down()
    ctx.save_json("transfers.json", results)
