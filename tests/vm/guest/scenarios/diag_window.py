"""diag-window: a window-limited flow for the health report. The server's kernel
does not scale windows (net.ipv4.tcp_window_scaling=0: at most 64 KiB) and netem on
both fw interfaces delays each way by 20 ms (40 ms RTT), so one iperf3 upload is
capped near 64 KiB / 40 ms = 13 Mbit/s whatever the link could carry. No policy: fw
only forwards. Captured on both fw interfaces.

Saved for tests/vm/test_vm_diag.py: fw-inside.pcap (veth-c), fw-outside.pcap
(veth-s), window-client.json / window-server.json (iperf3).
"""
TIME_LIMIT = 120
PORT = 5201
SECONDS = 4


def run(ctx):
    lab = ctx.lab()
    ctx.run("sysctl", "-qw", "net.ipv4.tcp_window_scaling=0", ns=lab.server)
    for name in ("veth-c", "veth-s"):
        ctx.run("tc", "qdisc", "add", "dev", name, "root", "netem", "delay", "20ms", ns=lab.fw)
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        ctx.iperf3(lab, "window", PORT, "--time", str(SECONDS))
