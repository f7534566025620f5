"""Real packets through the lab (client - fw - server) under rulesets applied with the CLI.

Every test applies its own policy to fw with `tusk policy apply` + `confirm`, sends TCP,
UDP and ICMP between the lab namespaces only, captures with tcpdump on both sides of
fw (veth-c: what the client side sees, veth-s: what the server side sees) and reads the
captures back with dpkt. Assertions are on exact values: MSS numbers, the option bytes
of SYN and SYN/ACK, and how much each named counter of table inet tusk moved.
"""
import json
import socket

import dpkt
import pytest
from pcaps import (
    MSS,
    SACK_PERMITTED,
    TIMESTAMPS,
    WSCALE,
    EchoServer,
    SynAckResponder,
    captures,
    nopped,
    tcp_connect,
    tcp_exchange,
    udp_exchange,
    with_mss,
)

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6

# family -> client address, server address, the MSS a 1500-byte link offers
FAMILIES = {"ipv4": (CLIENT_V4, SERVER_V4, 1460), "ipv6": (CLIENT_V6, SERVER_V6, 1440)}
HEADERS = {"ipv4": 40, "ipv6": 60}         # IP + TCP header: MSS = MTU - this
NARROW_MTU = 1280
ALT_CLIENT_V4 = "10.10.1.3"
CLIENT_PORTS = (5201, 5206)
ALL_FOUR = {MSS, SACK_PERMITTED, TIMESTAMPS, WSCALE}
# Well below the first SYN retransmission (1 s): a dropped attempt sends exactly one SYN.
DROP_TIMEOUT = 0.5


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client_echo(lab):
    """Listeners on the client, for connections the server side tries to open."""
    server = EchoServer(lab.client, CLIENT_PORTS)
    yield server
    server.close()


@pytest.fixture
def narrow_path(lab):
    """narrow(kind): MTU 1280 between fw and the server, either as the link MTU of fw's
    veth-s and the server's eth0 ('link') or as the MTU of fw's routes to the server's
    subnets with every link left at 1500 ('route'). Undone afterwards, caches flushed."""
    def narrow(kind):
        if kind == "link":
            lab.ns(lab.fw, "ip", "link", "set", "veth-s", "mtu", str(NARROW_MTU))
            lab.ns(lab.server, "ip", "link", "set", "eth0", "mtu", str(NARROW_MTU))
        else:
            lab.ns(lab.fw, "ip", "route", "replace", "10.10.2.0/24", "dev", "veth-s",
                   "proto", "kernel", "scope", "link", "src", "10.10.2.1",
                   "mtu", str(NARROW_MTU))
            lab.ns(lab.fw, "ip", "-6", "route", "replace", "fd00:10:2::/64", "dev", "veth-s",
                   "proto", "kernel", "metric", "256", "mtu", str(NARROW_MTU))
    yield narrow
    lab.ns(lab.fw, "ip", "link", "set", "veth-s", "mtu", "1500")
    lab.ns(lab.server, "ip", "link", "set", "eth0", "mtu", "1500")
    lab.ns(lab.fw, "ip", "route", "replace", "10.10.2.0/24", "dev", "veth-s",
           "proto", "kernel", "scope", "link", "src", "10.10.2.1")
    lab.ns(lab.fw, "ip", "-6", "route", "replace", "fd00:10:2::/64", "dev", "veth-s",
           "proto", "kernel", "metric", "256")
    for ns in (lab.client, lab.fw, lab.server):
        lab.ns(ns, "ip", "route", "flush", "cache", check=False)
        lab.ns(ns, "ip", "-6", "route", "flush", "cache", check=False)


@pytest.fixture
def alt_client(lab):
    """A second client address, in the same subnet, outside the class's address set."""
    lab.ns(lab.client, "ip", "addr", "add", f"{ALT_CLIENT_V4}/24", "dev", "eth0")
    yield ALT_CLIENT_V4
    lab.ns(lab.client, "ip", "addr", "del", f"{ALT_CLIENT_V4}/24", "dev", "eth0", check=False)


# -- helpers -------------------------------------------------------------------------------

def counters(lab):
    """Named counters of table inet tusk in fw -> packets."""
    out = lab.ns(lab.fw, "nft", "-j", "list", "counters", "table", "inet", "tusk").stdout
    return {item["counter"]["name"]: item["counter"]["packets"]
            for item in json.loads(out)["nftables"] if "counter" in item}


def moved(before, after):
    """The counters that changed, with by how many packets."""
    return {name: after[name] - before.get(name, 0)
            for name in after if after[name] != before.get(name, 0)}


def conntrack(lab):
    """fw's connection tracking table, one line per connection."""
    result = lab.ns(lab.fw, "cat", "/proc/net/nf_conntrack", check=False)
    if result.returncode != 0:
        pytest.fail("cannot read fw's /proc/net/nf_conntrack (a kernel without "
                    f"CONFIG_NF_CONNTRACK_PROCFS?): {result.stderr.strip()}")
    return result.stdout.splitlines()


def tracked(lab, sport, dport):
    return [line for line in conntrack(lab) if f" sport={sport} dport={dport} " in line]


def handshake(capture, sport, dport):
    """The first SYN from the client's port sport and the first SYN/ACK back, waiting
    until the capture holds both."""
    def pair(segments):
        syn = [s for s in segments if s.syn and (s.sport, s.dport) == (sport, dport)]
        synack = [s for s in segments if s.synack and (s.sport, s.dport) == (dport, sport)]
        return syn, synack
    segments = capture.wait_for(lambda segs: all(pair(segs)),
                                what=f"SYN and SYN/ACK of port {sport} -> {dport}")
    syn, synack = pair(segments)
    return syn[0], synack[0]


def ip_bytes(address):
    return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)


def ok(outcome, payload=b"tusk"):
    assert outcome.result == "ok", outcome
    assert outcome.reply == payload, "the echo came back incomplete"
    return outcome


# -- 1. fixed MSS clamp -------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_fixed_mss_clamp_lowers_syn_and_synack_only_downwards(lab, fw, server_echo, tmp_path,
                                                               family):
    _, server, offered = FAMILIES[family]
    fw("""
        services:
          - {name: clamped, protocol: tcp, ports: [5201]}
          - {name: above, protocol: tcp, ports: [5202]}
        classes:
          - {name: clamp, from: inside, to: outside, services: [clamped], action: accept,
             mss: {mode: fixed, value: 1300}}
          - {name: clamp-above, from: inside, to: outside, services: [above], action: accept,
             mss: {mode: fixed, value: 1500}}
        """)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        clamped = ok(tcp_exchange(lab.client, server, 5201))
        small = ok(tcp_exchange(lab.client, server, 5201, mss=1000))
        above = ok(tcp_exchange(lab.client, server, 5202))
        seen = {(o.sport, port): (handshake(inside, o.sport, port),
                                  handshake(outside, o.sport, port))
                for o, port in ((clamped, 5201), (small, 5201), (above, 5202))}

    # 1300 < what both ends offer: the SYN and, by the ct mark, the reply SYN/ACK are lowered
    (syn_c, synack_c), (syn_s, synack_s) = seen[clamped.sport, 5201]
    assert (syn_c.mss, syn_s.mss) == (offered, 1300)
    assert (synack_s.mss, synack_c.mss) == (offered, 1300)
    # ... and nothing else in the options changed
    assert syn_s.options_raw == with_mss(syn_c.options_raw, 1300)
    assert synack_c.options_raw == with_mss(synack_s.options_raw, 1300)

    # a client offering less than the clamp keeps its own value; the server's reply is clamped
    (syn_c, synack_c), (syn_s, synack_s) = seen[small.sport, 5201]
    assert (syn_c.mss, syn_s.mss) == (1000, 1000)
    assert (synack_s.mss, synack_c.mss) == (offered, 1300)

    # a clamp above what the ends offer never raises the MSS: every option byte-identical
    (syn_c, synack_c), (syn_s, synack_s) = seen[above.sport, 5202]
    assert (syn_c.mss, syn_s.mss, synack_s.mss, synack_c.mss) == (offered,) * 4
    assert syn_s.options_raw == syn_c.options_raw
    assert synack_c.options_raw == synack_s.options_raw


# -- 2. path-MTU clamp --------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["link", "route"])
@pytest.mark.parametrize("family", FAMILIES)
def test_pmtu_clamp_follows_the_narrow_path(lab, fw, server_echo, narrow_path, tmp_path,
                                            family, kind):
    _, server, offered = FAMILIES[family]
    path_mss = NARROW_MTU - HEADERS[family]             # 1240 for IPv4, 1220 for IPv6
    fw("""
        services:
          - {name: clamped, protocol: tcp, ports: [5201]}
          - {name: untouched, protocol: tcp, ports: [5202]}
        classes:
          - {name: pmtu, from: inside, to: outside, services: [clamped], action: accept,
             mss: {mode: pmtu}}
          - {name: plain, from: inside, to: outside, services: [untouched], action: accept}
        """)
    narrow_path(kind)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        clamped = ok(tcp_exchange(lab.client, server, 5201))
        plain = ok(tcp_exchange(lab.client, server, 5202))
        (syn_c, synack_c) = handshake(inside, clamped.sport, 5201)
        (syn_s, synack_s) = handshake(outside, clamped.sport, 5201)
        (plain_c, _) = handshake(inside, plain.sport, 5202)
        (plain_s, _) = handshake(outside, plain.sport, 5202)

    assert (syn_c.mss, syn_s.mss) == (offered, path_mss)
    # the server offers its own link's MSS; fw lowers the SYN/ACK to the path's as well
    # (the kernel takes the smaller MTU of the routes to both ends)
    server_offer = path_mss if kind == "link" else offered
    assert (synack_s.mss, synack_c.mss) == (server_offer, path_mss)
    assert syn_s.options_raw == with_mss(syn_c.options_raw, path_mss)
    # a class without mss leaves the option alone even on the narrow path (the FWSM lesson)
    assert plain_c.mss == plain_s.mss == offered
    assert plain_s.options_raw == plain_c.options_raw


# -- 3. TCP options -----------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_stripped_options_become_nops_and_the_rest_crosses_intact(lab, fw, server_echo,
                                                                   tmp_path, family):
    _, server, offered = FAMILIES[family]
    fw("""
        services:
          - {name: kept, protocol: tcp, ports: [5201]}
          - {name: stripped, protocol: tcp, ports: [5202]}
        classes:
          - {name: keep-all, from: inside, to: outside, services: [kept], action: accept}
          - name: strip
            from: inside
            to: outside
            services: [stripped]
            action: accept
            tcp_options: {window_scale: keep, sack_permitted: strip, timestamps: strip}
        """)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        keep = ok(tcp_exchange(lab.client, server, 5201))
        strip = ok(tcp_exchange(lab.client, server, 5202))
        keep_c, keep_s = handshake(inside, keep.sport, 5201), handshake(outside, keep.sport, 5201)
        strip_c, strip_s = (handshake(inside, strip.sport, 5202),
                            handshake(outside, strip.sport, 5202))

    # strip: the client's SYN has all four; the server gets NOPs where SACK-permitted and
    # timestamps were, MSS and window scale byte for byte as sent
    syn_c, syn_s = strip_c[0], strip_s[0]
    assert syn_c.option_kinds() == ALL_FOUR
    assert syn_s.option_kinds() == {MSS, WSCALE}
    assert syn_s.options_raw == nopped(syn_c.options_raw, {SACK_PERMITTED, TIMESTAMPS})
    assert len(syn_s.options_raw) == len(syn_c.options_raw)
    assert syn_s.wscale == syn_c.wscale is not None
    assert syn_s.mss == syn_c.mss == offered
    # the server answers only what it saw; its SYN/ACK crosses unchanged
    synack_c, synack_s = strip_c[1], strip_s[1]
    assert synack_s.option_kinds() == {MSS, WSCALE}
    assert synack_c.options_raw == synack_s.options_raw

    # keep-all (the default, no tcp profile): every option byte-identical in both directions
    for client_side, server_side in zip(keep_c, keep_s):
        assert client_side.option_kinds() == ALL_FOUR
        assert server_side.options_raw == client_side.options_raw
        assert (server_side.seq, server_side.ack, server_side.flags) == \
               (client_side.seq, client_side.ack, client_side.flags)


def test_stripping_applies_to_the_reply_synack(lab, fw, tmp_path):
    """The server's kernel would not put options in its SYN/ACK that the (stripped) SYN
    lacked, so a hand-made server answers with all four: fw must strip the reply too,
    through the profile number in the connection's ct mark (mangle_forward)."""
    fw("""
        services:
          - {name: stripped, protocol: tcp, ports: [5210]}
        classes:
          - name: strip
            from: inside
            to: outside
            services: [stripped]
            action: accept
            tcp_options: {sack_permitted: strip, timestamps: strip}
        """)
    # MSS 1460, SACK-permitted, timestamps (TSval 0x01020304), NOP, window scale 7
    offered = bytes.fromhex("020405b4" "0402" "080a0102030400000000" "01" "030307")
    with SynAckResponder(lab.server, "eth0", 5210, offered) as responder, \
            captures(lab, tmp_path, "tcp port 5210") as (inside, outside):
        outcome = tcp_connect(lab.client, SERVER_V4, 5210)
        assert outcome.result == "ok", outcome
        syn_c, synack_c = handshake(inside, outcome.sport, 5210)
        syn_s, synack_s = handshake(outside, outcome.sport, 5210)
    assert responder.answered, "the hand-made server never saw the SYN"

    assert syn_s.options_raw == nopped(syn_c.options_raw, {SACK_PERMITTED, TIMESTAMPS})
    assert synack_s.options_raw == offered
    assert synack_c.options_raw == nopped(offered, {SACK_PERMITTED, TIMESTAMPS})
    assert synack_c.option_kinds() == {MSS, WSCALE}
    assert (synack_c.mss, synack_c.wscale) == (1460, 7)


# -- 4. classes match only their traffic --------------------------------------------------

def test_classes_match_only_their_traffic(lab, fw, server_echo, alt_client, tmp_path):
    fw("""
        address_sets:
          - {name: main-client, entries: [10.10.1.2]}
        services:
          - {name: web, protocol: tcp, ports: [5201]}
          - {name: restricted, protocol: tcp, ports: [5203]}
          - {name: refused, protocol: tcp, ports: [5204]}
        classes:
          - {name: www, from: inside, to: outside, services: [web], action: accept}
          - {name: only-main, from: inside, to: outside, source: [main-client],
             services: [restricted], action: accept}
          - {name: refuse, from: inside, to: outside, services: [refused], action: reject}
        """)
    # (what, connect arguments, expected result, counters expected to move and by how much)
    cases = [
        ("dual-stack class, IPv4", dict(dst=SERVER_V4, port=5201), "ok", {"class_www": 1}),
        ("dual-stack class, IPv6", dict(dst=SERVER_V6, port=5201), "ok", {"class_www": 1}),
        ("address-set class, its source", dict(dst=SERVER_V4, port=5203), "ok",
         {"class_only-main": 1}),
        ("address-set class, another source", dict(dst=SERVER_V4, port=5203, src=alt_client),
         "timeout", {"default_deny": 1}),
        ("address-set class (IPv4 only), IPv6", dict(dst=SERVER_V6, port=5203), "timeout",
         {"default_deny": 1}),
        ("no class", dict(dst=SERVER_V4, port=5202), "timeout", {"default_deny": 1}),
        ("no class, IPv6", dict(dst=SERVER_V6, port=5202), "timeout", {"default_deny": 1}),
        ("reject class, IPv4", dict(dst=SERVER_V4, port=5204), "refused", {"class_refuse": 1}),
        ("reject class, IPv6", dict(dst=SERVER_V6, port=5204), "refused", {"class_refuse": 1}),
    ]
    results = {}
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        for what, args, expected, expected_moves in cases:
            before = counters(lab)
            outcome = tcp_exchange(lab.client, timeout=DROP_TIMEOUT, **args)
            after = counters(lab)
            assert outcome.result == expected, f"{what}: {outcome}"
            # "refused" is a RST within DROP_TIMEOUT: a reject answers, a drop times out
            # (how fast it answers is a benchmark's to measure, not a test's to bound)
            assert moved(before, after) == expected_moves, what
            results[what] = outcome
        # the denied SYNs reached fw; the rejected ones got a RST from the server's address
        inside.wait_for(lambda segs: sum(s.syn and s.dport == 5202 for s in segs) == 2
                        and sum(s.rst and s.sport == 5204 for s in segs) == 2,
                        what="two SYNs to 5202 and two RSTs from 5204")
        outside_segments = outside.segments()

    rsts = [s for s in inside.segments() if s.rst and s.sport == 5204]
    assert sorted(s.src for s in rsts) == sorted([SERVER_V4, SERVER_V6])
    # nothing fw refused reached the server side
    leaked = [str(s) for s in outside_segments
              if s.dport in (5202, 5204) or s.src == alt_client
              or (s.dport == 5203 and s.src == CLIENT_V6)]
    assert leaked == []
    for what in ("dual-stack class, IPv4", "dual-stack class, IPv6",
                 "address-set class, its source"):
        assert any(s.syn and s.sport == results[what].sport for s in outside_segments), what


# -- 5. state ------------------------------------------------------------------------------

def test_replies_pass_by_state_not_by_a_class(lab, fw, server_echo, client_echo, tmp_path):
    fw("""
        services:
          - {name: web, protocol: tcp, ports: [5201]}
          - {name: probe, protocol: udp, ports: [5300]}
        classes:
          - {name: out, from: inside, to: outside, services: [web], action: accept}
          - {name: probe-out, from: inside, to: outside, services: [probe], action: accept}
        """)
    payload = bytes(range(256)) * 800                    # 200 KiB each way
    with captures(lab, tmp_path, "tcp or icmp or icmp6") as (inside, outside):
        before = counters(lab)
        bulk = ok(tcp_exchange(lab.client, SERVER_V4, 5201, payload=payload), payload)
        # only the SYN met the class; everything after it, both ways, passed as established
        assert moved(before, counters(lab)) == {"class_out": 1}
        # and the whole answer crossed fw to the client
        inside.wait_for(
            lambda segs: sum(s.size for s in segs
                             if (s.sport, s.dport) == (5201, bulk.sport)) >= len(payload),
            what="the server's 200 KiB on the client side")

        # no class admits the other direction: the same port, opened from the server side
        before = counters(lab)
        back = tcp_exchange(lab.server, CLIENT_V4, 5201, timeout=DROP_TIMEOUT)
        assert back.result == "timeout", back
        assert moved(before, counters(lab)) == {"default_deny": 1}

        # related: the ICMP port unreachable for a UDP datagram comes back through fw
        for server in (SERVER_V4, SERVER_V6):
            before = counters(lab)
            probe = udp_exchange(lab.client, server, 5300)
            assert probe.result == "refused", (server, probe)
            assert moved(before, counters(lab)) == {"class_probe-out": 1}
        packets = [p for _, p in inside.packets()]

    unreachable = {(p.src, p.data.type, p.data.code) for p in packets
                   if isinstance(p.data, (dpkt.icmp.ICMP, dpkt.icmp6.ICMP6))}
    assert (ip_bytes(SERVER_V4), 3, 3) in unreachable, "no ICMP port unreachable came back"
    assert (ip_bytes(SERVER_V6), 1, 4) in unreachable, "no ICMPv6 port unreachable came back"


# -- 6. notrack ----------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_notrack_class_passes_both_ways_without_conntrack(lab, fw, server_echo, tmp_path,
                                                          family):
    _, server, offered = FAMILIES[family]
    fw("""
        services:
          - {name: web, protocol: tcp, ports: [5201]}
          - {name: bulk, protocol: tcp, ports: [5205]}
        classes:
          - {name: tracked, from: inside, to: outside, services: [web], action: accept}
          - {name: stateless, from: inside, to: outside, services: [bulk], action: accept,
             notrack: true, mss: {mode: fixed, value: 1200}}
        """)
    payload = bytes(range(256)) * 200                    # 50 KiB each way
    before = counters(lab)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        control = ok(tcp_exchange(lab.client, server, 5201))
        stateless = ok(tcp_exchange(lab.client, server, 5205, payload=payload), payload)
        syn_c, synack_c = handshake(inside, stateless.sport, 5205)
        syn_s, synack_s = handshake(outside, stateless.sport, 5205)

        # every packet of the stateless connection, both directions, went through its class:
        # as many as entered fw (the client's on veth-c, the server's on veth-s)
        def entered():
            return (sum((s.sport, s.dport) == (stateless.sport, 5205) for s in inside.segments()),
                    sum((s.sport, s.dport) == (5205, stateless.sport) for s in outside.segments()))
        delta = {}

        def settled(_):
            delta.clear()
            delta.update(moved(before, counters(lab)))
            delta["entered"] = entered()
            return delta.get("class_stateless") == sum(delta["entered"])
        inside.wait_for(settled, what="class_stateless to count every packet that entered fw")
    from_client, from_server = delta.pop("entered")
    assert from_client >= 4 and from_server >= 4         # SYN / SYN-ACK, data, ACKs, FIN
    assert delta == {"class_tracked": 1, "class_stateless": from_client + from_server}

    # conntrack knows the tracked connection and not the stateless one
    assert tracked(lab, control.sport, 5201), conntrack(lab)
    assert tracked(lab, stateless.sport, 5205) == []
    assert [line for line in conntrack(lab) if "dport=5205 " in line] == []

    # the class's MSS clamp still reaches the SYN/ACK: without a ct mark, the reply is
    # dispatched to the class itself
    assert (syn_c.mss, syn_s.mss) == (offered, 1200)
    assert (synack_s.mss, synack_c.mss) == (offered, 1200)


def test_replies_of_an_earlier_tracked_class_stay_tracked(lab, fw, server_echo, client_echo,
                                                          tmp_path):
    """A later notrack class from outside to inside matches the replies of an earlier
    tracked class too; raw_prerouting must keep them tracked (first match wins), or the
    tracked connection's SYN/ACK goes untracked, its ACK is invalid and it stalls."""
    fw("""
        services:
          - {name: web, protocol: tcp, ports: [5201]}
        classes:
          - {name: admin, from: inside, to: outside, services: [web], action: accept,
             mss: {mode: fixed, value: 1300}}
          - {name: storage, from: outside, to: inside, action: accept, notrack: true}
        """)
    payload = bytes(range(256)) * 400                    # 100 KiB each way
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        before = counters(lab)
        admin = ok(tcp_exchange(lab.client, SERVER_V4, 5201, payload=payload), payload)
        assert moved(before, counters(lab)) == {"class_admin": 1}
        _, synack_c = handshake(inside, admin.sport, 5201)
        _, synack_s = handshake(outside, admin.sport, 5201)
        # the later class still serves its own traffic, statelessly
        before = counters(lab)
        storage = ok(tcp_exchange(lab.server, CLIENT_V4, 5206))
        storage_moves = moved(before, counters(lab))
    assert set(storage_moves) == {"class_storage"} and storage_moves["class_storage"] >= 5

    entry = tracked(lab, admin.sport, 5201)
    assert len(entry) == 1 and "[ASSURED]" in entry[0], conntrack(lab)
    assert tracked(lab, storage.sport, 5206) == []
    # the reply SYN/ACK got the class's profile through the ct mark: only a tracked reply can
    assert (synack_s.mss, synack_c.mss) == (1460, 1300)
