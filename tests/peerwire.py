"""The HA channel's wire, as an attacker or a peer's capture sees it (ha/core/peer.py),
for the netns tier's channel tests and the web tier's attacks on the real agent's
listener: a request as peer.ask writes it, caught on the way; sockets that are or are not
closed yet; a flood of idle connections held open and opened again.

Requests are caught rather than written here, so that the tests say what holds of the
channel whatever its protocol's version: a replay sends back what the client sent, an
unsigned request is the client's with its signature spoiled."""
import re
import socket
import threading
import time

import pytest

from ha.core import peer

CAPTURE_PORT = 3799


def captured(address, netns_server, netns_client, key, method, path, request):
    """(headers, body): the bytes peer.ask sends for one request to address, caught by a
    listener on address (in namespace netns_server, port CAPTURE_PORT) that reads them
    and hangs up without an answer."""
    listener = peer.in_netns(netns_server,
                             lambda: socket.create_server((address, CAPTURE_PORT)))
    got = {}

    def catch():
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
            if length and re.search(rb"(?im)^expect: *100-continue", head):
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            got["request"] = (head + b"\r\n\r\n", body)
    thread = threading.Thread(target=catch)
    thread.start()
    try:
        with pytest.raises(peer.PeerError):
            peer.ask(address, key, method, path, request, netns=netns_client,
                     port=CAPTURE_PORT, timeout=3)
    finally:
        thread.join(10)
        listener.close()
    return got["request"]


def header(head, name, value):
    """head with header name's value replaced (added when absent)."""
    pattern = re.compile(rb"(?im)^" + re.escape(name.encode()) + rb":[^\r\n]*\r\n")
    line = f"{name}: {value}\r\n".encode()
    if pattern.search(head):
        return pattern.sub(lambda _: line, head, count=1)
    return head[:-2] + line + b"\r\n"


def unsigned(head):
    """head with its signature spoiled: what someone without the key can send."""
    found = re.search(rb"(?im)^x-tusk-signature: *([0-9a-f]+)", head)
    return header(head, "X-Tusk-Signature", "0" * len(found.group(1)))


def connect(netns, address, port, timeout=5):
    """A connection to address:port opened from namespace netns."""
    return peer.in_netns(netns, lambda: socket.create_connection((address, port),
                                                                 timeout=timeout))


def closed_now(sock):
    """True when the other end has closed (or reset) sock, False while it is open; reads
    and drops what was sent."""
    try:
        sock.setblocking(False)
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def answer_of(sock, seconds):
    """What the other end wrote on sock before closing it, within seconds; an
    AssertionError when it neither answers nor closes in time."""
    sock.setblocking(True)
    deadline = time.monotonic() + seconds
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        raise AssertionError(f"no answer and no close within {seconds} s "
                             f"(so far: {data[:200]!r})") from None
    except ConnectionResetError:
        pass
    return data.decode(errors="replace")


def _connected(sock):
    try:
        sock.getpeername()
        return True
    except OSError:
        return False


def final(answer):
    """answer without the interim "100 Continue" a client with a body is sent first."""
    return re.sub(r"\AHTTP/1.1 100 [^\r\n]*\r\n\r\n", "", answer)


class Flood:
    """count connections to address:port from namespace netns, opened without waiting,
    sending nothing, held open and opened again as soon as the other end closes them,
    until stop(). opened, closed and failed count them; connected is how many are open
    and connected now (the other end's kernel took them)."""

    def __init__(self, netns, address, port, count, per_round=5):
        self.where = (netns, address, port)
        self.count, self.per_round = count, per_round
        self.opened = self.closed = self.failed = self.connected = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=peer.in_netns, args=(netns, self._loop),
                                       name="flood", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _loop(self):
        """per_round connections every 20 ms - no more than a listen backlog takes at
        once, so that they reach the program rather than overflow its kernel's queue -
        and a look at which were closed every half second."""
        _, address, port = self.where
        open_ = set()
        looked = 0.0
        try:
            while not self.stopping.is_set():
                if time.monotonic() - looked > 0.5:
                    for sock in list(open_):
                        if closed_now(sock):
                            open_.discard(sock)
                            sock.close()
                            self.closed += 1
                    self.connected = sum(map(_connected, open_))
                    looked = time.monotonic()
                for _ in range(min(self.per_round, self.count - len(open_))):
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    sock.setblocking(False)
                    if sock.connect_ex((address, port)) not in (0, 115):   # EINPROGRESS
                        sock.close()
                        self.failed += 1
                        continue
                    open_.add(sock)
                    self.opened += 1
                self.stopping.wait(0.02)
        finally:
            for sock in open_:
                sock.close()

    def stop(self):
        self.stopping.set()
        self.thread.join(30)
