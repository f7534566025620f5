"""The two agents of a pair talk over the sync link (docs/HA.md): each answers its peer's
questions on the sync address, TCP PEER_PORT, which the host table admits from the peer's
sync address only. HTTP/1.1 with JSON bodies, one request per connection, under the pair
key both boxes were given (ha.toml's revision carries it, root's): protocol version 2.

A request is authenticated from its headers alone, before a byte of its body is read:
X-Tusk-Signature is HMAC-SHA256 over the protocol, the address it was sent to, the
method, the path, Content-Length, X-Tusk-Time, X-Tusk-Nonce and X-Tusk-Body-SHA256 (the
body's digest). A request more than SKEW seconds off this box's clock, sent before this
box's channel started, or with a nonce seen before is refused; only then is the body
read - at most BODY_MAX bytes, within body_seconds - and checked against its digest. A
client with a body asks for "100 Continue" first, so a refusal comes before the body is
sent. The answer is signed too (its status, the request's path, time and nonce, its
body's digest), so a box believes only its peer.

Someone who reaches the port without the key gets nothing but refusals, and cannot hold
what the agent's jobs and periodic tasks need (issue 34): at most MAX_CONNECTIONS
connections at once, each on a thread of its own (the excess reset at once, not queued),
the request line and headers within header_seconds of the connection and HEADER_MAX
bytes, however slowly they come (a deadline for the whole, not a timeout per read), and
no body before the signature holds. The listener's threads and descriptors are so
bounded by MAX_CONNECTIONS + 2, and its memory before authentication by a few KiB a
connection.

Both boxes of a pair may run different releases during an upgrade: every answer says
X-Tusk-Peer (the protocol version), a request without this version is refused with
"another protocol version" (426), and a client whose peer answers without the header
says the peer runs another protocol version - never a silent failure, nor "bad signature".

Plain Python's socketserver, http.server and http.client: the messages are few and small
(a status, a policy's text), both ends are Tusk's, and the sync link is dedicated - a
web framework or a message broker would add a daemon and a dependency for nothing they
need here.

In the lab the agent manages a network namespace: the listening socket is made, and the
connections opened, from a thread that joined that namespace (setns), so both ends live
where the sync link is.
"""
import errno
import hashlib
import http.client
import io
import json
import os
import re
import socket
import socketserver
import struct
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler

from tusklib.names import HA_PEER_PORT as PEER_PORT

# the pair key and the signatures, re-exported: callers know the channel as one module
from .peerauth import (  # noqa: F401
    KEY_MAX,
    KEY_MIN,
    KEY_NAME,
    PROTOCOL,
    VERSION_HEADER,
    PeerError,
    _address,
    _same,
    answer_signature,
    key_problem,
    new_key,
    read_key,
    request_headers,
    request_signature,
    write_key,
)

SKEW = 30                  # seconds a request's time may differ from this box's clock
BODY_MAX = 16 << 20 | 4096   # a policy of at most 16 MiB, JSON-quoted, and its envelope
TIMEOUT = 5
MAX_CONNECTIONS = 16       # the peer asks one thing at a time: its status, a sync step
HEADER_SECONDS = 5         # the request line and headers, from the connection on
HEADER_MAX = 8192          # bytes of the request line and headers (ours: under 600)
BODY_SECONDS = 60          # 16 MiB at 2 Mbit/s and more: the sync link is dedicated
WRITE_SECONDS = 30
BACKLOG = 64
NONCES_MAX = 100000

_STAMP = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")
_NONCE = re.compile(r"[0-9a-f]{32,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_LENGTH = re.compile(r"[0-9]{1,9}")


def in_netns(netns, function):
    """function() run in network namespace netns (None: here), from a thread of its own
    that joined it; its result or exception."""
    if netns is None:
        return function()
    outcome = {}

    def run():
        try:
            with open(f"/run/netns/{netns}", "rb") as handle:
                os.setns(handle.fileno(), os.CLONE_NEWNET)
            outcome["value"] = function()
        except BaseException as error:   # noqa: BLE001 - handed to the caller
            outcome["error"] = error
    thread = threading.Thread(target=run, name=f"netns {netns}")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class Nonces:
    """Nonces seen within the last 2 x SKEW seconds: a replayed request is refused. Only
    requests whose signature holds get here, so only a key holder can fill it."""

    def __init__(self):
        self.seen = OrderedDict()
        self.lock = threading.Lock()

    def fresh(self, nonce, now):
        with self.lock:
            while self.seen and now - next(iter(self.seen.values())) > 2 * SKEW:
                self.seen.popitem(last=False)
            if nonce in self.seen or len(self.seen) >= NONCES_MAX:
                return False
            self.seen[nonce] = now
            return True


# -- reading against a deadline -----------------------------------------------------------

class _Deadline(io.RawIOBase):
    """A socket's reads, each allowed only what is left of `deadline` (time.monotonic()):
    a sender cannot extend it by sending a byte now and then."""

    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline

    def readable(self):
        return True

    def readinto(self, buffer):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _TooLong(Exception):
    """The request line and headers are longer than HEADER_MAX."""


class _Reader:
    """The handler's rfile: lines within a budget of bytes, against a deadline."""

    def __init__(self, sock, seconds, budget):
        self.raw = _Deadline(sock, time.monotonic() + seconds)
        self.buffered = io.BufferedReader(self.raw, HEADER_MAX)
        self.left = budget

    def readline(self, limit=-1):
        if self.left <= 0:
            raise _TooLong
        size = self.left if limit is None or limit < 0 else min(limit, self.left)
        line = self.buffered.readline(size)
        self.left -= len(line)
        if self.left <= 0 and not line.endswith(b"\n"):
            raise _TooLong
        return line

    def body(self, length, seconds):
        """length bytes (fewer: the sender closed), within seconds from now."""
        self.raw.deadline = time.monotonic() + seconds
        return self.buffered.read(length) if length else b""

    def close(self):
        pass


class _Writer:
    """The handler's wfile: straight to the socket (sendall: its timeout is for the
    whole)."""

    def __init__(self, sock):
        self.sock = sock
        self.closed = False

    def write(self, data):
        self.sock.sendall(data)
        return len(data)

    def flush(self):
        pass

    def close(self):
        self.closed = True


class _Handler(BaseHTTPRequestHandler):
    server_version = f"tusk-peer/{PROTOCOL}"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):   # the agent's log is not the place for each request
        pass

    def setup(self):
        self.connection = self.request
        # what an answer needs before the request line is read (a refusal of one too long)
        self.request_version, self.requestline, self.command = "HTTP/1.1", "", None
        self.rfile = _Reader(self.connection, self.server.header_seconds, HEADER_MAX)
        self.wfile = _Writer(self.connection)

    def finish(self):
        pass        # the server closes the connection

    def handle(self):
        """One request, then the connection closes."""
        self.close_connection = True
        try:
            self.handle_one_request()
        except _TooLong:
            self._refuse(431, f"the request line and headers are longer than {HEADER_MAX} "
                              "bytes")
        except (OSError, ValueError, http.client.HTTPException):
            pass     # timed out, reset or unreadable: closed without an answer

    def handle_expect_100(self):
        return True      # "100 Continue" only once the headers authenticate (_handle)

    def send_error(self, code, message=None, explain=None):
        # the parser's own refusals (a malformed request line, too many headers) in the
        # channel's form
        self._refuse(code, message or self.responses.get(code, ("refused",))[0])

    def _send(self, status, out, headers=()):
        self.connection.settimeout(WRITE_SECONDS)
        self.send_response(status)
        self.send_header(VERSION_HEADER, PROTOCOL)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Connection", "close")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(out)

    def _refuse(self, status, why):
        try:
            self._send(status, json.dumps({"error": why}).encode())
        except OSError:
            pass

    def _authenticate(self):
        """Why the headers do not make a request of a key holder (status, reason), or
        (None, (key, length, stamp, nonce, digest)) when they do. Reads no body."""
        server, headers = self.server, self.headers
        version = headers.get(VERSION_HEADER)
        if version != PROTOCOL:
            given = "1" if version is None else repr(version[:10])
            return 426, (f"the request is in another protocol version of the peer channel "
                         f"({given}; this box speaks {PROTOCOL}): run the same Tusk release "
                         "on both boxes of the pair")
        if headers.get("Transfer-Encoding") is not None:
            return 400, "Transfer-Encoding is not taken: send Content-Length"
        lengths = headers.get_all("Content-Length") or ["0"]
        if len(lengths) != 1 or not _LENGTH.fullmatch(lengths[0]):
            return 400, "Content-Length is not one number"
        length = int(lengths[0])
        if length > BODY_MAX:
            return 413, f"at most {BODY_MAX} bytes"
        stamp, nonce, digest = (headers.get(name, "") for name in
                                ("X-Tusk-Time", "X-Tusk-Nonce", "X-Tusk-Body-SHA256"))
        if not _STAMP.fullmatch(stamp):
            return 400, "X-Tusk-Time is not a time"
        if not _NONCE.fullmatch(nonce) or not _DIGEST.fullmatch(digest):
            return 400, "X-Tusk-Nonce or X-Tusk-Body-SHA256 is malformed"
        key = server.key()
        if key is None:
            return 503, "this box has no pair key"
        expected = request_signature(key, server.address, self.command, self.path, length,
                                     stamp, nonce, digest)
        if not _same(headers.get("X-Tusk-Signature", ""), expected):
            return 403, "bad signature: the boxes' pair keys differ"
        now = time.time()
        skew = abs(now - float(stamp))
        if skew > SKEW:
            return 403, f"the clocks differ by {skew:.0f} s (at most {SKEW})"
        if float(stamp) < server.started:
            return 403, ("a request sent before this box's channel started: a replay, or "
                         "the clocks differ")
        if not server.nonces.fresh(nonce, now):
            return 403, "a request seen before"
        return None, (key, length, stamp, nonce, digest)

    def _handle(self):
        status, found = self._authenticate()
        if status is not None:
            return self._refuse(status, found)
        key, length, stamp, nonce, digest = found
        if length and self.headers.get("Expect", "").lower() == "100-continue":
            self.connection.settimeout(WRITE_SECONDS)
            self.send_response_only(100)
            self.end_headers()
        body = self.rfile.body(length, self.server.body_seconds)
        if len(body) != length:
            return None         # the sender closed: nothing to answer
        if hashlib.sha256(body).hexdigest() != digest:
            return self._refuse(400, "bad signature: the body is not the one signed")
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            return self._refuse(400, "the body is not JSON")
        try:
            status, answer = self.server.answer(self.command, self.path, request)
        except Exception as error:   # noqa: BLE001 - the peer gets the reason
            status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
        out = json.dumps(answer).encode()
        signed = answer_signature(key, status, self.path, stamp, nonce,
                                  hashlib.sha256(out).hexdigest())
        return self._send(status, out, [("X-Tusk-Signature", signed)])

    do_GET = do_POST = _handle


class PeerServer(socketserver.TCPServer):
    """Answers the peer: answer(method, path, request) -> (HTTP status, JSON-able);
    key() -> the pair key's bytes or None, read at every request (a new key applies at
    once). At most max_connections at once, each on a thread of its own; a connection
    past them is reset at once."""

    allow_reuse_address = True
    request_queue_size = BACKLOG
    max_connections = MAX_CONNECTIONS
    header_seconds = HEADER_SECONDS
    body_seconds = BODY_SECONDS

    def __init__(self, address, answer, key, netns=None, port=PEER_PORT):
        self.answer = answer
        self.key = key
        self.nonces = Nonces()
        self.where = (address, port, netns)
        self.address = _address(address)
        self.started = time.time()
        self.slots = threading.BoundedSemaphore(self.max_connections)
        self.refused = 0
        if ":" in self.address:
            self.address_family = socket.AF_INET6
        in_netns(netns, lambda: socketserver.TCPServer.__init__(self, (address, port),
                                                                _Handler))
        self.thread = threading.Thread(target=self.serve_forever, name="ha peer server",
                                       daemon=True)
        self.thread.start()

    def get_request(self):
        try:
            return super().get_request()
        except OSError as error:
            if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                time.sleep(0.1)     # out of descriptors or memory: not a busy loop
            raise

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            # reset, not closed: nothing of it is left on this box (no FIN_WAIT, no
            # TIME_WAIT)
            request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.close()
            return
        try:
            threading.Thread(target=self._serve, args=(request, client_address),
                             name="ha peer connection", daemon=True).start()
        except RuntimeError:        # no thread to be had: as one past the limit
            self.slots.release()
            request.close()

    def _serve(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:       # noqa: BLE001 - one connection's failure is its own
            pass
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def stop(self):
        self.shutdown()
        self.server_close()
        self.thread.join(5)


# -- the client -----------------------------------------------------------------------------

class _Again:
    """A reader that gives back a line already read, then reads on (an answer whose status
    line was read to see whether it is "100 Continue")."""

    def __init__(self, first, reader):
        self.first = first
        self.reader = reader

    def readline(self, limit=-1):
        if self.first:
            line, self.first = self.first, b""
            return line
        return self.reader.readline(limit)

    def read(self, size=-1):
        return self.reader.read(size)

    def readinto(self, buffer):
        return self.reader.readinto(buffer)

    def flush(self):
        pass

    def close(self):
        self.reader.close()


class _File:
    """What http.client.HTTPResponse takes for a socket: its makefile() gives reader."""

    def __init__(self, reader):
        self.reader = reader

    def makefile(self, *_):
        return self.reader


def _exchange(address, port, method, path, headers, body, timeout):
    """(status, headers, body) of the answer to one request, all within timeout seconds;
    the body sent only after a "100 Continue"."""
    deadline = time.monotonic() + timeout
    host = f"[{address}]" if ":" in address else address
    head = "".join([f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n",
                    "Content-Type: application/json\r\nConnection: close\r\n",
                    "Expect: 100-continue\r\n" if body else "",
                    *(f"{name}: {value}\r\n" for name, value in headers.items()), "\r\n"])
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(head.encode("latin-1"))
        reader = io.BufferedReader(_Deadline(sock, deadline), 65536)
        if body:
            line = reader.readline(65537)
            if line.split(b" ", 2)[1:2] == [b"100"]:
                while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                sock.sendall(body)
                line = b""
            reader = _Again(line, reader)
        response = http.client.HTTPResponse(_File(reader), method=method)
        response.begin()
        if response.length is not None and response.length > BODY_MAX:
            raise PeerError("the peer's answer is too long")
        out = response.read(BODY_MAX + 1)
        response.close()
        return response.status, response.headers, out


def ask(peer_address, key, method, path, request=None, netns=None, port=PEER_PORT,
        timeout=TIMEOUT):
    """The peer's signed answer to one request -> (status, JSON); PeerError when it cannot
    be reached within timeout seconds (the whole exchange), runs another protocol
    version, or its answer is not signed with the pair key."""
    if key is None:
        raise PeerError("this box has no pair key")
    body = json.dumps(request).encode() if request is not None else b""
    if len(body) > BODY_MAX:
        raise PeerError(f"the request is {len(body)} bytes; the channel carries at most "
                        f"{BODY_MAX}")
    headers = request_headers(key, peer_address, method, path, body)
    try:
        status, answered, out = in_netns(netns, lambda: _exchange(
            peer_address, port, method, path, headers, body, timeout))
    except (OSError, http.client.HTTPException) as error:
        why = (f"no answer within {timeout} s" if isinstance(error, TimeoutError)
               else getattr(error, "strerror", None) or error or type(error).__name__)
        raise PeerError(f"the peer {peer_address} does not answer on TCP {port}: "
                        f"{why}") from None
    if len(out) > BODY_MAX:
        raise PeerError("the peer's answer is too long")
    try:
        why = json.loads(out).get("error", "")
    except (ValueError, AttributeError):
        why = ""
    version = answered.get(VERSION_HEADER)
    if version != PROTOCOL:
        said = f" ({why})" if why else ""
        raise PeerError(f"the peer {peer_address} runs another protocol version of the peer "
                        f"channel ({version or 'an earlier one'}; this box speaks "
                        f"{PROTOCOL}): it answered HTTP {status}{said}. Run the same Tusk "
                        "release on both boxes of the pair")
    signed = answered.get("X-Tusk-Signature")
    if not signed:
        raise PeerError(f"the peer refused (HTTP {status}): {why or 'no reason given'}")
    expected = answer_signature(key, status, path, headers["X-Tusk-Time"],
                                headers["X-Tusk-Nonce"], hashlib.sha256(out).hexdigest())
    if not _same(signed, expected):
        raise PeerError("the peer's answer is not signed with this box's pair key")
    try:
        return status, json.loads(out)
    except ValueError:
        raise PeerError("the peer's answer is not JSON") from None
