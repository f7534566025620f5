"""NAT and logging with real packets through the lab (client - fw - server), policies
applied with the CLI (issue 19).

The lab's client namespace stands for the inside network and also holds the server a
port forward reaches (10.10.1.2); the server namespace stands for the outside, the
hosts that use fw's outside address (10.10.2.1). Captures on both sides of fw show each
packet before and after translation; the named counters of table inet tusk and fw's
conntrack table (the ct mark: class ordinal, TCP profile) show what the ruleset did.
What the host kernel lacks (flowtables, seqrand) is the VM's to test with NAT.
"""
import ipaddress
import json
import socket

import pytest
from kit import wait_until
from pcaps import (
    MSS,
    SACK_PERMITTED,
    TIMESTAMPS,
    WSCALE,
    EchoServer,
    captures,
    nopped,
    ns_socket,
    tcp_exchange,
    with_mss,
)

from lab.namespaces import CLIENT_V4, CLIENT_V6, FW_C_V4, FW_S_V4, FW_S_V6, SERVER_V4, SERVER_V6

INSIDE_PORTS = (5201, 5206)         # the echo servers behind fw, in the client namespace
HAIRPIN_CLIENT_V4 = "10.10.1.3"     # a second inside host, next to the server
CLASS_SHIFT = 17                    # tusklib.names.CT_MARK_CLASS_SHIFT: the contract

FORWARDS = """
address_sets:
  - {name: inside-server, entries: [10.10.1.2, "fd00:10:1::2"]}
services:
  - {name: echo, protocol: tcp, ports: [5201]}
  - {name: echo-range, protocol: tcp, ports: ["5197-5206"]}
classes:
  - {name: inside-out, from: inside, to: outside, action: accept}
  - {name: web-in, from: outside, to: inside, destination: [inside-server], services: [echo],
     action: accept}
  - {name: range-in, from: outside, to: inside, destination: [inside-server],
     services: [echo-range], action: accept}
nat:
  forwards:
    - {name: web, from: outside, address: 10.10.2.1, protocol: tcp, ports: [8080],
       to_address: 10.10.1.2, to_ports: 5201, class: web-in}
    - {name: web6, from: outside, protocol: tcp, ports: [8080], to_address: "fd00:10:1::2",
       to_ports: 5201, class: web-in}
    - {name: range, from: outside, address: 10.10.2.1, protocol: tcp, ports: ["7000-7009"],
       to_address: 10.10.1.2, to_ports: "5197-5206", class: range-in}
"""


# -- fixtures and helpers ------------------------------------------------------------------

@pytest.fixture(scope="module")
def inside_echo(lab):
    """The servers behind fw: echo listeners in the client namespace."""
    server = EchoServer(lab.client, INSIDE_PORTS)
    yield server
    server.close()


@pytest.fixture
def hairpin_client(lab):
    """A second inside host: another address on the client namespace's link."""
    lab.ns(lab.client, "ip", "addr", "add", f"{HAIRPIN_CLIENT_V4}/24", "dev", "eth0")
    yield HAIRPIN_CLIENT_V4
    lab.ns(lab.client, "ip", "addr", "del", f"{HAIRPIN_CLIENT_V4}/24", "dev", "eth0",
           check=False)


def counters(lab):
    out = lab.ns(lab.fw, "nft", "-j", "list", "counters", "table", "inet", "tusk").stdout
    return {item["counter"]["name"]: item["counter"]["packets"]
            for item in json.loads(out)["nftables"] if "counter" in item}


def moved(before, after):
    return {name: after[name] - before.get(name, 0)
            for name in after if after[name] != before.get(name, 0)}


def conntrack(lab, **fields):
    """fw's conntrack entries (their key=value fields in order, addresses as
    ip_address: /proc writes IPv6 in full) whose first occurrences match fields."""
    result = lab.ns(lab.fw, "cat", "/proc/net/nf_conntrack", check=False)
    if result.returncode != 0:
        pytest.fail(f"cannot read fw's /proc/net/nf_conntrack: {result.stderr.strip()}")
    entries = []
    for line in result.stdout.splitlines():
        pairs = [tuple(f.split("=", 1)) for f in line.split() if "=" in f]
        pairs = [(k, ipaddress.ip_address(v) if k in ("src", "dst") else v) for k, v in pairs]
        first_of = dict(reversed(pairs))
        if all(first_of.get(k) == (ipaddress.ip_address(v) if k in ("src", "dst") else str(v))
               for k, v in fields.items()):
            entries.append(pairs)
    return entries


def reply_dst(entry):
    """The destination of the reply direction: the second dst field."""
    return [v for k, v in entry if k == "dst"][1]


def ct_mark(entry):
    return int(dict(entry)["mark"])


def first(capture, what, predicate):
    """The first TCP segment of capture that predicate accepts, waiting for it."""
    segments = capture.wait_for(lambda segs: any(map(predicate, segs)), what=what)
    return next(s for s in segments if predicate(s))


def ok(outcome):
    assert outcome.result == "ok", outcome
    assert outcome.reply == b"tusk", "the echo came back incomplete"
    return outcome


# -- source NAT ---------------------------------------------------------------------------

@pytest.mark.parametrize("family, client, server, fw_outside", [
    ("ipv4", CLIENT_V4, SERVER_V4, FW_S_V4), ("ipv6", CLIENT_V6, SERVER_V6, FW_S_V6)])
def test_masquerade_gives_the_server_fws_outside_address(lab, fw, server_echo, tmp_path,
                                                         family, client, server, fw_outside):
    fw("""
        address_sets:
          - {name: inside-nets, entries: [10.10.1.0/24, "fd00:10:1::/64"]}
        services:
          - {name: echo, protocol: tcp, ports: [5201]}
        classes:
          - {name: out, from: inside, to: outside, services: [echo], action: accept}
        nat:
          source:
            - {name: out, to: outside, source: [inside-nets], translate: masquerade,
               ports: "40000-40009"}
        """)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        done = ok(tcp_exchange(lab.client, server, 5201))
        syn_c = first(inside, "the client's SYN", lambda s: s.syn and s.sport == done.sport)
        syn_s = first(outside, "the translated SYN", lambda s: s.syn and s.dport == 5201)
        synack_c = first(inside, "the SYN/ACK back",
                         lambda s: s.synack and s.dport == done.sport)
    assert (syn_c.src, syn_c.dst) == (client, server)
    assert (syn_s.src, syn_s.dst) == (fw_outside, server), "the server saw the inside address"
    assert (synack_c.src, synack_c.dst) == (server, client), "the reply is translated back"
    assert 40000 <= syn_s.sport <= 40009, "the source port comes from the rule's range"
    entry = conntrack(lab, src=client, sport=done.sport)
    assert entry and reply_dst(entry[0]) == ipaddress.ip_address(fw_outside), entry


# -- port forwards ------------------------------------------------------------------------

def test_port_forwards_reach_the_server_behind_fw(lab, fw, inside_echo, tmp_path):
    fw(FORWARDS)
    before = counters(lab)
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        web = ok(tcp_exchange(lab.server, FW_S_V4, 8080))
        web6 = ok(tcp_exchange(lab.server, FW_S_V6, 8080))      # any address of fw's own
        shifted = ok(tcp_exchange(lab.server, FW_S_V4, 7009))   # 7009 -> 5206
        closed = tcp_exchange(lab.server, FW_S_V4, 7000)        # 7000 -> 5197: no listener
        # outside: the server namespace talks to fw's address and port only
        syn_s = first(outside, "the SYN to 8080", lambda s: s.syn and s.sport == web.sport)
        synack_s = first(outside, "the SYN/ACK from 8080",
                         lambda s: s.synack and s.dport == web.sport)
        # inside: the same connection to the server's own address and port
        syn_c = first(inside, "the forwarded SYN", lambda s: s.syn and s.sport == web.sport)
        syn6_c = first(inside, "the forwarded IPv6 SYN",
                       lambda s: s.syn and s.sport == web6.sport)
        shifted_c = first(inside, "the shifted SYN",
                          lambda s: s.syn and s.sport == shifted.sport)
        first(inside, "the SYN to 5197 (7000 mapped)", lambda s: s.syn and s.dport == 5197)
    assert (syn_s.src, syn_s.dst, syn_s.dport) == (SERVER_V4, FW_S_V4, 8080)
    assert (synack_s.src, synack_s.sport) == (FW_S_V4, 8080), "the reply leaves as fw:8080"
    assert (syn_c.src, syn_c.dst, syn_c.dport) == (SERVER_V4, CLIENT_V4, 5201), \
        "the client's source stays (no SNAT), the destination is the server"
    assert (syn6_c.src, syn6_c.dst, syn6_c.dport) == (SERVER_V6, CLIENT_V6, 5201)
    assert (shifted_c.dst, shifted_c.dport) == (CLIENT_V4, 5206)
    assert closed.result == "refused", closed
    # each connection's first packet, counted by the class that admits the forward
    assert moved(before, counters(lab)) == {"class_web-in": 2, "class_range-in": 2}
    # the ct mark: the accepting class's ordinal in bits 17-31 (web-in is classes[1])
    entry = conntrack(lab, sport=web.sport, dport=8080)
    assert entry and ct_mark(entry[0]) == 2 << CLASS_SHIFT, entry


def test_a_port_without_a_forward_is_not_translated(lab, fw, inside_echo):
    fw(FORWARDS)
    before = counters(lab)
    # 8081 is fw's own port (no listener there: its kernel refuses), never the server's
    assert tcp_exchange(lab.server, FW_S_V4, 8081).result == "refused"
    assert tcp_exchange(lab.server, FW_S_V4, 7010).result == "refused"
    assert moved(before, counters(lab)) == {}


def test_hairpin_lets_an_inside_host_use_the_external_address(lab, fw, inside_echo,
                                                              hairpin_client, tmp_path):
    fw(FORWARDS.replace("  - {name: web-in, from: outside, to: inside,",
                        "  - {name: web-in, to: inside,")
               .replace("to_ports: 5201, class: web-in}\n    - {name: web6",
                        "to_ports: 5201, class: web-in, hairpin: true}\n    - {name: web6"))
    before = counters(lab)
    with captures(lab, tmp_path, "tcp") as (inside, _):
        reflected = ok(tcp_exchange(lab.client, FW_S_V4, 8080, src=hairpin_client))
        syn_in = first(inside, "the host's SYN",
                       lambda s: s.syn and s.sport == reflected.sport)
        syn_out = first(inside, "the reflected SYN",
                        lambda s: s.syn and s.dport == 5201 and s.src == FW_C_V4)
        synack_server = first(inside, "the server's SYN/ACK to fw",
                              lambda s: s.synack and s.dst == FW_C_V4)
        synack_back = first(inside, "the SYN/ACK to the host",
                            lambda s: s.synack and s.dst == hairpin_client)
    assert (syn_in.src, syn_in.dst, syn_in.dport) == (hairpin_client, FW_S_V4, 8080)
    # masqueraded (by the hairpin mark) so that the server answers through fw
    assert (syn_out.src, syn_out.dst) == (FW_C_V4, CLIENT_V4)
    assert (synack_server.src, synack_server.sport) == (CLIENT_V4, 5201)
    assert (synack_back.src, synack_back.sport, synack_back.dst) == \
        (FW_S_V4, 8080, hairpin_client), "the host hears the external address answer"
    assert moved(before, counters(lab)) == {"class_web-in": 1}


def test_without_hairpin_the_inside_host_does_not_reach_the_server(lab, fw, inside_echo,
                                                                   hairpin_client):
    fw(FORWARDS)
    outcome = tcp_exchange(lab.client, FW_S_V4, 8080, src=hairpin_client)
    assert outcome.result == "refused", "fw's own port 8080 answered, not the server"


def test_nat_with_mss_clamp_and_stripped_options(lab, fw, inside_echo, tmp_path):
    fw(FORWARDS.replace("services: [echo],\n     action: accept}",
                        "services: [echo],\n     action: accept, mss: {mode: fixed, value: "
                        "1300}, tcp_options: {sack_permitted: strip, timestamps: strip}}")
               + "  source:\n    - {name: out, to: outside, translate: masquerade}\n")
    with captures(lab, tmp_path, "tcp") as (inside, outside):
        done = ok(tcp_exchange(lab.server, FW_S_V4, 8080))
        syn_s = first(outside, "the SYN", lambda s: s.syn and s.sport == done.sport)
        synack_s = first(outside, "the SYN/ACK", lambda s: s.synack and s.dport == done.sport)
        syn_c = first(inside, "the forwarded SYN", lambda s: s.syn and s.sport == done.sport)
        synack_c = first(inside, "the server's SYN/ACK",
                         lambda s: s.synack and s.dport == done.sport)
        out = ok(tcp_exchange(lab.client, SERVER_V4, 5201))     # and masquerade on the way out
        out_s = first(outside, "the way out", lambda s: s.syn and s.dport == 5201)
    # outside (before DNAT): what the host sent, every option; inside (after): translated,
    # clamped to 1300, SACK-permitted and timestamps turned into NOPs, the rest intact
    assert syn_s.option_kinds() == {MSS, SACK_PERMITTED, TIMESTAMPS, WSCALE}
    assert (syn_c.dst, syn_c.dport) == (CLIENT_V4, 5201)
    assert syn_c.options_raw == with_mss(nopped(syn_s.options_raw,
                                                {SACK_PERMITTED, TIMESTAMPS}), 1300)
    # the reply SYN/ACK gets the class's profile through the ct mark's low bits, then is
    # translated back to fw's address and port
    assert synack_c.mss == 1460 and synack_c.option_kinds() == {MSS, WSCALE}
    assert (synack_s.src, synack_s.sport) == (FW_S_V4, 8080)
    assert synack_s.options_raw == with_mss(synack_c.options_raw, 1300)
    entry = conntrack(lab, sport=done.sport, dport=8080)
    assert entry and ct_mark(entry[0]) == (2 << CLASS_SHIFT) | 1, entry   # classes[1], profile 1
    assert out_s.src == FW_S_V4 and out.result == "ok"


# -- logging ------------------------------------------------------------------------------

def test_the_log_limit_never_decides_a_verdict(lab, fw, server_echo):
    """log_rate 1 (burst 2): far more packets than the limit lets log still get their
    verdict - every connection of a logged class is accepted and counted, every datagram
    the default deny drops is counted - and the live table has the limit and the log
    rules of the contract (NFLOG group 1, prefix tusk:<verdict>:<class>). Whether NFLOG
    delivers them is the Logs page's test (tests/netns/test_logs_ulogd.py, test_logs_policy.py)."""
    fw("""
        settings: {log_rate: 1}
        services:
          - {name: echo, protocol: tcp, ports: [5201]}
        classes:
          - {name: logged, from: inside, to: outside, services: [echo], action: accept,
             log: true}
        """)
    ruleset = json.loads(lab.ns(lab.fw, "nft", "-j", "list", "table", "inet", "tusk").stdout)
    items = ruleset["nftables"]
    limits = [i["limit"] for i in items if "limit" in i]
    assert [(x["name"], x["rate"], x["per"], x["burst"]) for x in limits] == \
        [("log_rate", 1, "second", 2)]
    logs = {(r["rule"]["chain"], json.dumps(r["rule"]["expr"])) for r in items if "rule" in r
            and any("log" in e for e in r["rule"]["expr"])}
    assert {(chain, '"tusk:drop:"' in expr or '"tusk:accept:logged"' in expr,
             '{"limit": "log_rate"}' in expr, '"group": 1' in expr) for chain, expr in logs} \
        == {("default_deny", True, True, True), ("class_logged", True, True, True)}, logs

    before = counters(lab)
    for _ in range(12):
        ok(tcp_exchange(lab.client, SERVER_V4, 5201))
    sock = ns_socket(lab.client, socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        for _ in range(50):
            sock.sendto(b"nobody admits this", (SERVER_V4, 5999))
    wait_until(lambda: counters(lab)["default_deny"] - before["default_deny"] >= 50, 5,
               "the default deny counting 50 datagrams")
    assert moved(before, counters(lab)) == {"class_logged": 12, "default_deny": 50}
