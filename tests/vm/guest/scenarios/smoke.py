"""smoke: the shipped example policy live in fw - applied and confirmed with the tusk
CLI, nft 1.1.3 on Tusk's kernel - and real traffic through it: ping both families,
then one iperf3 TCP flow client -> server, captured on both fw interfaces.

Saved for tests/vm/test_vm_smoke.py: fw-veth-c.pcap and fw-veth-s.pcap,
iperf3-client.json and iperf3-server.json, the ruleset and counters after the flow,
conntrack -S and /proc/net/stat/nf_conntrack.
"""
from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 240
EXAMPLE_POLICY = "/tusk/webui/policy/examples/tusk.yaml"
IPERF_PORT = 5201             # the example's "replication" service: class bulk-copy
IPERF_SECONDS = 3


def run(ctx):
    lab = ctx.lab()
    ctx.tusk(lab, "apply", EXAMPLE_POLICY)
    ctx.tusk(lab, "confirm")

    with ctx.capture(lab.fw, "veth-c", "fw-veth-c"), ctx.capture(lab.fw, "veth-s", "fw-veth-s"):
        for family, server in (("v4", SERVER_V4), ("v6", SERVER_V6)):
            ctx.run("ping", "-c", "3", "-i", "0.2", "-W", "2", server, ns=lab.client,
                    save=f"ping-{family}.txt")
        ctx.iperf3(lab, "iperf3", IPERF_PORT, "--time", str(IPERF_SECONDS))

    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="nft-ruleset.txt")
    ctx.run("nft", "-j", "list", "counters", "table", "inet", "tusk", ns=lab.fw,
            save="nft-counters.json")
    ctx.run("conntrack", "-S", ns=lab.fw, save="conntrack-S.txt")
    ctx.run("cat", "/proc/net/stat/nf_conntrack", ns=lab.fw, save="nf_conntrack-stat.txt")
