"""seqrand-sack: SACK through a randomised class (both) under loss. netem behind fw,
10 ms delay, drops 1 % of what fw forwards: first towards the server while the client
uploads, then towards the client while it downloads (iperf3 -R), so SACK blocks flow
both ways and are translated with each direction's offset. A third run duplicates
2 % instead of dropping: receivers report the duplicates with D-SACK blocks. Then
the loss runs over IPv6 (upload-v6, download-v6). All again through class fast,
which randomises on the flowtable's fast path (fast-upload, ...). Captured on both fw
interfaces with real checksums; the host pairs every segment (IPv6 segments by the
first bytes of their payload, having no IP ID).

Saved: fw-inside.pcap, fw-outside.pcap, <run>-client.json / -server.json (iperf3),
state before and after each run (seqadj counters, conntrack, both endpoints' nstat):
before, upload, download, duplicates, upload-v6, download-v6, then fast-upload, ...
"""
import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 420
SECONDS = 4
RUNS = (("upload", "veth-s", ("loss", "1%"), (), SERVER_V4),
        ("download", "veth-c", ("loss", "1%"), ("--reverse",), SERVER_V4),
        ("duplicates", "veth-s", ("duplicate", "2%"), (), SERVER_V4),
        ("upload-v6", "veth-s", ("loss", "1%"), (), SERVER_V6),
        ("download-v6", "veth-c", ("loss", "1%"), ("--reverse",), SERVER_V6))


def impair(ctx, lab, interface, how):
    for name in ("veth-c", "veth-s"):
        ctx.run("tc", "qdisc", "del", "dev", name, "root", ns=lab.fw, check=False)
    ctx.run("tc", "qdisc", "add", "dev", interface, "root", "netem", "delay", "10ms", *how,
            ns=lab.fw)


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for prefix, port in (("", seqrand.PORT_BOTH), ("fast-", seqrand.PORT_FAST)):
            for name, interface, how, args, server in RUNS:
                impair(ctx, lab, interface, how)
                ctx.iperf3(lab, prefix + name, port, "--time", str(SECONDS), *args,
                           server=server)
                seqrand.save_state(ctx, lab, prefix + name)
