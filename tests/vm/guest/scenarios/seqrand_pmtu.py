"""seqrand-pmtu: path-MTU discovery through a randomised connection (class both).
The client uploads 2 MB to a server that advertises MSS 1460 (its own MTU is 1500)
over a path whose last hop is narrower:

- router: a router behind fw whose link to the server has MTU 1200 (IPv4) or 1280
  (IPv6) sends the "too big" errors; they quote the client's segment as fw rewrote
  it, so fw must translate the quote back or the client drops them as out of window
  and the connection black-holes;
- fw: fw's own interface towards the server has MTU 1200, so fw raises the error
  itself, about the segment before it was rewritten: it must not translate it;
- tunnel: fw reaches the server through an IPIP tunnel whose MTU (1500) its path
  cannot carry once encapsulated; the tunnel's egress raises the error on fw after
  the segment was rewritten, so fw must translate it - told apart from the case
  above by the connection's window, not by who raised it. The same path without
  randomisation (class plain) is the control: Linux finds some errors of a burst
  about one flight out of window on its own, so the test judges the errors the
  client accepted, not the ones it ignored;
- router-fast, fw-fast: the router and fw cases through class fast, whose segments
  fw rewrites on the flowtable fast path - except the one too big to forward, which
  takes the slow path. conntrack keeps no window for an offloaded connection, so the
  error is told apart by who raised it;
- tunnel-fast, xfrm-fast: class fast into the IPIP tunnel, and into an IPsec (ESP)
  tunnel to the server. An egress that raises errors of its own would raise them
  after the fast path's rewrite, with no window to tell (kernel-patches/0025): such
  connections keep the slow path, and every error is translated as in tunnel.

Saved: results.json (per case: completed or why not), route-<case>.txt (the client's
route to the server afterwards), fw-<case>-*.pcap (ICMP on both fw interfaces),
<case>- state (client nstat: OutOfWindowIcmps; seqadj counters).
"""
import socket

import seqrand

from lab.namespaces import FW_S_V4, SERVER_V4, SERVER_V6

TIME_LIMIT = 480
SIZE = 2 * 1024 * 1024
TUNNELLED = "10.10.9.2"         # the server's address at the tunnel's far end
XFRMED = "10.10.8.2"            # the server's address at the IPsec tunnel's far end
ESP_KEY = "0x" + "42" * 20      # AES-128-GCM key and salt: the lab's, not a secret
BOTH, PLAIN, FAST = seqrand.PORT_BOTH, seqrand.PORT_PLAIN, seqrand.PORT_FAST
CASES = (("router-v4", socket.AF_INET, SERVER_V4, BOTH, {"router_mtu": 1200}, None),
         ("router-v6", socket.AF_INET6, SERVER_V6, BOTH, {"router_mtu": 1280}, None),
         ("fw-v4", socket.AF_INET, SERVER_V4, BOTH, {}, 1200),
         ("router-fast-v4", socket.AF_INET, SERVER_V4, FAST, {"router_mtu": 1200}, None),
         ("router-fast-v6", socket.AF_INET6, SERVER_V6, FAST, {"router_mtu": 1280}, None),
         ("fw-fast-v4", socket.AF_INET, SERVER_V4, FAST, {}, 1200),
         ("tunnel-v4", socket.AF_INET, TUNNELLED, BOTH, {}, None),
         ("tunnel-plain-v4", socket.AF_INET, TUNNELLED, PLAIN, {}, None),
         ("tunnel-fast-v4", socket.AF_INET, TUNNELLED, FAST, {}, None),
         ("xfrm-fast-v4", socket.AF_INET, XFRMED, FAST, {}, None))


def run(ctx):
    results = {}
    for name, family, server, port, lab_options, fw_mtu in CASES:
        lab = ctx.lab(**lab_options)
        if server == TUNNELLED:
            tunnel(ctx, lab)
            seqrand.real_checksums(ctx, lab)       # no TSO: segments the tunnel sees
            seqrand.apply_policy(ctx, lab, seqrand.POLICY.replace(
                "interfaces: [veth-s]", "interfaces: [veth-s, tun-s]"))
        elif server == XFRMED:
            ipsec(ctx, lab)
            seqrand.real_checksums(ctx, lab)
            seqrand.apply_policy(ctx, lab)
        else:
            seqrand.apply_policy(ctx, lab)
        if fw_mtu:
            lab.mtu(lab.fw, "veth-s", fw_mtu)
        with ctx.capture(lab.fw, "veth-c", f"fw-{name}-inside", "icmp or icmp6"), \
                ctx.capture(lab.fw, "veth-s", f"fw-{name}-outside", "icmp or icmp6"):
            results[name] = upload(lab, family, server, port)
        flag = "-6" if family == socket.AF_INET6 else "-4"
        ctx.run("ip", flag, "route", "get", server, ns=lab.client, save=f"route-{name}.txt")
        seqrand.save_state(ctx, lab, name)
        lab.down()
    ctx.save_json("results.json", results)


def upload(lab, family, server, port):
    try:
        connection = seqrand.Connection(lab, port, server, family, timeout=15)
    except OSError as exc:
        return {"completed": False, "error": f"connect: {exc!r}"}
    try:
        sent, received = seqrand.transfer(connection.client, connection.server, SIZE)
        return {"completed": sent == received, "client_port": connection.client_port,
                "error": "" if sent == received else "data differs"}
    except OSError as exc:
        return {"completed": False, "client_port": connection.client_port,
                "error": repr(exc)}
    finally:
        connection.close()


def tunnel(ctx, lab):
    """An IPIP tunnel between fw and the server over their link, MTU 1500 at both ends
    (the server then offers MSS 1460): a full segment no longer fits the link once
    encapsulated, and fw's tunnel egress says so with "fragmentation needed"."""
    ends = ((lab.fw, "tun-s", FW_S_V4, SERVER_V4), (lab.server, "tun-c", SERVER_V4, FW_S_V4))
    for ns, name, local, remote in ends:
        ctx.run("ip", "link", "add", name, "type", "ipip", "local", local, "remote", remote,
                "ttl", "64", ns=ns)
        ctx.run("ip", "link", "set", name, "mtu", "1500", "up", ns=ns)
    ctx.run("ip", "route", "add", f"{TUNNELLED}/32", "dev", "tun-s", ns=lab.fw)
    ctx.run("ip", "address", "add", f"{TUNNELLED}/32", "dev", "tun-c", ns=lab.server)
    ctx.run("ip", "route", "add", "10.10.1.0/24", "dev", "tun-c", "src", TUNNELLED,
            ns=lab.server)


def ipsec(ctx, lab):
    """An ESP tunnel (AES-GCM) between fw and the server over their link for the
    client's network and XFRMED: fw's egress into it is an xfrm bundle, whose MTU
    (the link's less ESP's overhead) is the path's."""
    ends = ((lab.fw, FW_S_V4, SERVER_V4, "10.10.1.0/24", XFRMED, "fwd"),
            (lab.server, SERVER_V4, FW_S_V4, XFRMED, "10.10.1.0/24", "in"))
    for ns, local, remote, near, far, inbound in ends:
        for src, dst in ((local, remote), (remote, local)):
            spi = 0x101 if src == FW_S_V4 else 0x102       # one per direction
            ctx.run("ip", "xfrm", "state", "add", "src", src, "dst", dst, "proto", "esp",
                    "spi", hex(spi), "mode", "tunnel", "aead", "rfc4106(gcm(aes))", ESP_KEY,
                    "128", ns=ns)
        ctx.run("ip", "xfrm", "policy", "add", "src", near, "dst", far, "dir", "out",
                "tmpl", "src", local, "dst", remote, "proto", "esp", "mode", "tunnel", ns=ns)
        ctx.run("ip", "xfrm", "policy", "add", "src", far, "dst", near, "dir", inbound,
                "tmpl", "src", remote, "dst", local, "proto", "esp", "mode", "tunnel", ns=ns)
    ctx.run("ip", "route", "add", f"{XFRMED}/32", "via", SERVER_V4, ns=lab.fw)
    ctx.run("ip", "address", "add", f"{XFRMED}/32", "dev", "lo", ns=lab.server)
    ctx.run("ip", "route", "replace", "10.10.1.0/24", "via", FW_S_V4, "src", XFRMED,
            ns=lab.server)
