"""The agents' channel over the sync link (ha/core/peer.py), between two namespaces: a
signed request gets a signed answer; a wrong key, a replayed or stale request, a
tampered body, a request signed for the other box and an answer from something without
the key are each refused with the reason.

And the channel holds without the key (issue 34): a request is refused from its headers,
before its body is read or even sent; idle connections past the cap are reset at once,
the others cut at the header deadline however slowly their bytes come; a signed body has
a deadline of its own; headers have a bound. A box of the previous release and one of
this release name the protocol mismatch instead of failing in silence."""
import json
import os
import secrets
import socket
import threading
import time

import peer_release1
import peerwire
import pytest
from kit import wait_until

from ha.core import peer
from lab.namespaces import Topology

PREFIX = f"tt{os.getpid() % 100000}-pc"
A, B = "192.168.254.1", "192.168.254.2"
PORT = 3791
KEY = b"a pair key of enough length"


@pytest.fixture
def link():
    topology = Topology()
    names = (topology.namespace(f"{PREFIX}-a"), topology.namespace(f"{PREFIX}-b"))
    topology.wire(names[0], "sync0", names[1], "sync0")
    topology.address(names[0], "sync0", f"{A}/30")
    topology.address(names[1], "sync0", f"{B}/30")
    try:
        yield names
    finally:
        topology.down()


@pytest.fixture
def server(link):
    asked = []

    def answer(method, path, request):
        asked.append((method, path, request))
        return 200, {"role": "MASTER", "echo": request}
    found = peer.PeerServer(A, answer, lambda: KEY, netns=link[0], port=PORT)
    found.asked = asked
    try:
        yield found
    finally:
        found.stop()


def test_a_signed_request_gets_a_signed_answer(link, server):
    status, answer = peer.ask(A, KEY, "POST", "/v1/status", {"x": 1}, netns=link[1], port=PORT)
    assert (status, answer) == (200, {"role": "MASTER", "echo": {"x": 1}})
    assert server.asked == [("POST", "/v1/status", {"x": 1})]


def test_a_wrong_key_is_refused_and_nothing_is_answered(link, server):
    with pytest.raises(peer.PeerError, match="pair keys differ"):
        peer.ask(A, b"another key of enough length", "GET", "/v1/status", netns=link[1],
                 port=PORT)
    assert server.asked == []


def raw(netns, stamp, nonce, body, key=KEY, path="/v1/status", signed=None, to=A):
    """One request written by hand to A; signed: the body the signature is made for (the
    body sent, unless given); to: the address it is signed for."""
    headers = peer.request_headers(key, to, "POST", path, signed or body, stamp=stamp,
                                   nonce=nonce)

    def send():
        with socket.create_connection((A, PORT), timeout=5) as sock:
            head = "".join([f"POST {path} HTTP/1.1\r\nHost: x\r\n",
                            *(f"{name}: {value}\r\n" for name, value in headers.items()),
                            "Connection: close\r\n\r\n"])
            sock.sendall(head.encode() + body)
            return b"".join(iter(lambda: sock.recv(65536), b"")).decode()
    return peer.in_netns(netns, send)


def test_a_replayed_a_stale_and_a_tampered_request_are_refused(link, server):
    nonce, stamp = secrets.token_hex(16), f"{time.time():.3f}"
    assert " 200 " in raw(link[1], stamp, nonce, b"{}").splitlines()[0]
    assert "a request seen before" in raw(link[1], stamp, nonce, b"{}")
    stale = raw(link[1], f"{time.time() - 120:.3f}", secrets.token_hex(16), b"{}")
    assert "the clocks differ by 120 s" in stale
    # a body changed on the way: its signature no longer matches
    tampered = raw(link[1], stamp, secrets.token_hex(16), b'{"a": 2}', signed=b'{"a": 1}')
    assert "bad signature" in tampered
    # a request the peer signed for the other box (this box's own, sent back to it)
    reflected = raw(link[1], f"{time.time():.3f}", secrets.token_hex(16), b"{}", to=B)
    assert "bad signature" in reflected
    assert server.asked == [("POST", "/v1/status", {})]


def test_an_answer_not_signed_with_the_key_is_not_believed(link):
    """Something else listening on the peer's port (or a peer with another key), that
    speaks the protocol's version."""
    def impostor():
        listener = socket.create_server((A, PORT))
        return listener
    listener = peer.in_netns(link[0], impostor)

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        body = json.dumps({"role": "MASTER"}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Tusk-Peer: %s\r\n"
                     b"X-Tusk-Signature: %s\r\n\r\n"
                     % (len(body), peer.PROTOCOL.encode(), b"0" * 64) + body)
        conn.close()
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with pytest.raises(peer.PeerError, match="not signed with this box's pair key"):
            peer.ask(A, KEY, "GET", "/v1/status", netns=link[1], port=PORT)
    finally:
        thread.join(5)
        listener.close()


def test_a_peer_that_is_down_is_named(link):
    with pytest.raises(peer.PeerError, match=f"the peer {A} does not answer on TCP {PORT}"):
        peer.ask(A, KEY, "GET", "/v1/status", netns=link[1], port=PORT, timeout=1)


def test_pair_keys_are_checked():
    assert peer.key_problem("short") == "must be 16 to 256 characters"
    assert peer.key_problem(" a key with a space ") is not None
    assert peer.key_problem(peer.new_key()) is None


# -- the channel holds without the key (issue 34) -----------------------------------------
# The policy the tests hold the channel to: at most CAP connections at once, the excess
# closed at once; the request line and headers within HEADER_SECONDS of the connection,
# however slowly they come; a body only from a key holder, within the server's
# body_seconds.
CAP = 16
HEADER_SECONDS = 5
MIB = 1 << 20


def caught(link, path="/v1/status", request=None):
    """(headers, body) of a signed request as peer.ask writes it to A, asking the server
    to close the connection after its answer (that header is not signed)."""
    head, body = peerwire.captured(A, link[0], link[1], KEY, "POST", path,
                                   {"x": 1} if request is None else request)
    return peerwire.header(head, "Connection", "close"), body


def test_a_request_without_the_key_is_refused_from_its_headers_before_its_body(link, server):
    """15 MiB announced, nothing sent: the refusal comes at once, the body is not awaited."""
    head, _ = caught(link)
    head = peerwire.header(peerwire.unsigned(head), "Content-Length", str(15 * MIB))
    sock = peerwire.connect(link[1], A, PORT)
    with sock:
        sock.sendall(head)
        answer = peerwire.answer_of(sock, 2)
    assert " 403 " in answer.splitlines()[0] and "bad signature" in answer, answer
    assert server.asked == []


def test_a_replayed_request_is_refused_from_its_headers_before_its_body(link, server):
    head, body = caught(link, request={"x": "y" * 1000})
    with peerwire.connect(link[1], A, PORT) as sock:
        sock.sendall(head + body)
        assert " 200 " in peerwire.final(peerwire.answer_of(sock, 5)).splitlines()[0]
    with peerwire.connect(link[1], A, PORT) as sock:       # the headers again, no body
        sock.sendall(head)
        answer = peerwire.answer_of(sock, 2)
    assert " 403 " in answer.splitlines()[0] and "a request seen before" in answer, answer
    with peerwire.connect(link[1], A, PORT) as sock:       # and the whole of it
        sock.sendall(head + body)
        assert "a request seen before" in peerwire.answer_of(sock, 5)
    assert len(server.asked) == 1


def test_idle_connections_past_the_cap_are_closed_at_once_and_the_rest_at_the_deadline(
        link, server):
    threads = threading.active_count()
    socks, reset = [], 0
    for _ in range(CAP + 24):
        try:
            socks.append(peerwire.connect(link[1], A, PORT))
        except ConnectionResetError:     # reset before connect() even returned
            reset += 1
    try:
        time.sleep(1)
        assert reset + sum(map(peerwire.closed_now, socks)) >= 24, \
            "the excess is closed at once"
        assert threading.active_count() <= threads + CAP
        started = time.monotonic()
        wait_until(lambda: all(map(peerwire.closed_now, socks)), HEADER_SECONDS + 2,
                   "every idle connection closed at the header deadline")
        assert time.monotonic() - started >= HEADER_SECONDS - 2
    finally:
        for sock in socks:
            sock.close()
    # and the peer is answered again
    assert peer.ask(A, KEY, "GET", "/v1/status", netns=link[1], port=PORT)[0] == 200


def trickled(link, head, data, pause):
    """Sends head at once, then data a byte every pause seconds until the channel closes
    the connection (at most 20 s) -> how long it was held open."""
    sock = peerwire.connect(link[1], A, PORT)
    started = time.monotonic()
    with sock:
        sock.sendall(head)
        for byte in data:
            if peerwire.closed_now(sock) or time.monotonic() - started > 20:
                break
            try:
                sock.send(bytes([byte]))
            except OSError:
                break
            time.sleep(pause)
        held = time.monotonic() - started
        assert peerwire.closed_now(sock), f"still open after {held:.0f} s"
    return held


def test_headers_sent_a_byte_at_a_time_are_cut_at_the_header_deadline(link, server):
    """Each byte in time for a per-read timeout: the deadline is for the whole."""
    held = trickled(link, b"", b"POST /v1/status HTTP/1.1\r\nX-Slow: " + b"a" * 200, 0.5)
    assert held <= HEADER_SECONDS + 2, held
    assert server.asked == []


def test_a_signed_body_sent_slowly_is_cut_at_the_body_deadline(link, server):
    server.body_seconds = 2
    head, body = caught(link, request={"x": "y" * 200})
    held = trickled(link, head, body, 0.3)
    assert held <= 2 + 2, held
    assert server.asked == []


def test_headers_past_their_bound_are_refused(link, server):
    head, body = caught(link)
    padded = head[:-2] + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000)
                                  for i in range(60)) + b"\r\n"
    with peerwire.connect(link[1], A, PORT) as sock:
        sock.sendall(padded + body)
        answer = peerwire.final(peerwire.answer_of(sock, 5))
    assert " 431 " in answer.splitlines()[0], answer
    assert server.asked == []


def test_a_box_of_the_previous_release_and_this_one_name_the_protocol_mismatch(link, server):
    """During an upgrade the two boxes run different releases: each side says so."""
    # the previous release's client, asking this one
    with pytest.raises(peer_release1.PeerError, match="another protocol version"):
        peer_release1.ask(A, KEY, "GET", "/v1/status", netns=link[1], port=PORT)
    # this release's client, asking the previous release's server
    old = peer_release1.PeerServer(B, lambda *_: (200, {}), lambda: KEY, netns=link[1],
                                   port=PORT)
    try:
        with pytest.raises(peer.PeerError, match="another protocol version"):
            peer.ask(B, KEY, "GET", "/v1/status", netns=link[0], port=PORT)
    finally:
        old.stop()
    assert server.asked == []
