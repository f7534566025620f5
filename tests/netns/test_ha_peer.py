"""The agents' channel over the sync link (ha/core/peer.py), between two namespaces: a
signed request gets a signed answer; a wrong key, a replayed or stale request, a
tampered body and an answer from something without the key are each refused with the
reason."""
import json
import os
import secrets
import socket
import threading
import time

import pytest

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


def raw(netns, stamp, nonce, body, key=KEY, path="/v1/status", signed=None):
    """One request written by hand; signed: the body the signature is made for (the body
    sent, unless given)."""
    def send():
        with socket.create_connection((A, PORT), timeout=5) as sock:
            headers = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                       f"X-Tusk-Time: {stamp}\r\nX-Tusk-Nonce: {nonce}\r\n"
                       f"X-Tusk-Signature: "
                       f"{peer.signature(key, 'POST', path, stamp, nonce, signed or body)}\r\n"
                       "Connection: close\r\n\r\n")
            sock.sendall(headers.encode() + body)
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
    assert server.asked == [("POST", "/v1/status", {})]


def test_an_answer_not_signed_with_the_key_is_not_believed(link):
    """Something else listening on the peer's port (or a peer with another key)."""
    def impostor():
        listener = socket.create_server((A, PORT))
        return listener
    listener = peer.in_netns(link[0], impostor)

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        body = json.dumps({"role": "MASTER"}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Tusk-Signature: %s\r\n\r\n"
                     % (len(body), b"0" * 64) + body)
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
