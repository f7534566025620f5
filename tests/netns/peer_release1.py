"""The agents' channel as the release before protocol 2 spoke it (ha/core/peer.py up to
issue 34: the body read before the signature, no version header), frozen here so that
tests/netns/test_ha_peer.py can put it beside this release's, as the two boxes of a pair
are during an upgrade. Not used by the product."""
import hashlib
import hmac
import http.client
import json
import os
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tusklib.names import HA_PEER_PORT as PEER_PORT

SKEW = 30                  # seconds a request's time may differ from this box's clock
BODY_MAX = 16 << 20 | 4096   # a policy of at most 16 MiB, JSON-quoted, and its envelope
TIMEOUT = 5
KEY_NAME = "ha.key"
KEY_MIN = 16               # characters of a pair key
KEY_MAX = 256


class PeerError(Exception):
    """The peer could not be asked, or its answer cannot be trusted; says why."""


def key_problem(key):
    """Why key cannot be a pair key, or None."""
    if not isinstance(key, str) or not KEY_MIN <= len(key) <= KEY_MAX:
        return f"must be {KEY_MIN} to {KEY_MAX} characters"
    if not key.isprintable() or key != key.strip():
        return "printable characters only, no space at either end"
    return None


def new_key():
    return secrets.token_urlsafe(24)


def read_key(state_dir):
    """The pair key's bytes, or None when this box has none."""
    try:
        with open(os.path.join(state_dir, KEY_NAME), "rb") as handle:
            key = handle.read(KEY_MAX + 1).strip()
    except OSError:
        return None
    return key or None


def write_key(state_dir, key):
    from tusklib.files import write_atomically
    write_atomically(os.path.join(state_dir, KEY_NAME), key + "\n", 0o600)


def signature(key, method, path, stamp, nonce, body):
    message = b"\n".join([method.encode(), path.encode(), stamp.encode(), nonce.encode(), body])
    return hmac.new(key, message, hashlib.sha256).hexdigest()


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
    """Nonces seen within the last 2 x SKEW seconds: a replayed request is refused."""

    def __init__(self):
        self.seen = {}
        self.lock = threading.Lock()

    def fresh(self, nonce, now):
        with self.lock:
            for old in [n for n, at in self.seen.items() if now - at > 2 * SKEW]:
                del self.seen[old]
            if nonce in self.seen or len(self.seen) > 100000:
                return False
            self.seen[nonce] = now
            return True


class _Handler(BaseHTTPRequestHandler):
    server_version = "tusk-peer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):   # the agent's log is not the place for each request
        pass

    def _refuse(self, status, why):
        body = json.dumps({"error": why}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        server = self.server
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return self._refuse(400, "Content-Length is not a number")
        if not 0 <= length <= BODY_MAX:
            return self._refuse(413, f"at most {BODY_MAX} bytes")
        body = self.rfile.read(length)
        stamp = self.headers.get("X-Tusk-Time", "")
        nonce = self.headers.get("X-Tusk-Nonce", "")
        given = self.headers.get("X-Tusk-Signature", "")
        key = server.key()
        if key is None:
            return self._refuse(503, "this box has no pair key")
        expected = signature(key, self.command, self.path, stamp, nonce, body)
        if not hmac.compare_digest(given, expected):
            return self._refuse(403, "bad signature: the boxes' pair keys differ")
        try:
            skew = abs(time.time() - float(stamp))
        except ValueError:
            return self._refuse(400, "X-Tusk-Time is not a time")
        if skew > SKEW:
            return self._refuse(403, f"the clocks differ by {skew:.0f} s (at most {SKEW})")
        if not 16 <= len(nonce) <= 64 or not server.nonces.fresh(nonce, time.time()):
            return self._refuse(403, "a request seen before")
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            return self._refuse(400, "the body is not JSON")
        try:
            status, answer = server.answer(self.command, self.path, request)
        except Exception as error:   # noqa: BLE001 - the peer gets the reason
            status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
        out = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Tusk-Signature",
                         signature(key, "ANSWER", self.path, stamp, nonce, out))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _handle


class PeerServer(ThreadingHTTPServer):
    """Answers the peer: answer(method, path, request) -> (HTTP status, JSON-able);
    key() -> the pair key's bytes or None, read at every request (a new key applies at
    once)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, answer, key, netns=None, port=PEER_PORT):
        self.answer = answer
        self.key = key
        self.nonces = Nonces()
        self.where = (address, port, netns)
        in_netns(netns, lambda: ThreadingHTTPServer.__init__(self, (address, port), _Handler))
        self.thread = threading.Thread(target=self.serve_forever, name="ha peer server",
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()
        self.thread.join(5)


def ask(peer_address, key, method, path, request=None, netns=None, port=PEER_PORT,
        timeout=TIMEOUT):
    """The peer's signed answer to one request -> (status, JSON); PeerError when it cannot
    be reached or its answer is not signed with the pair key."""
    if key is None:
        raise PeerError("this box has no pair key")
    body = json.dumps(request).encode() if request is not None else b""
    stamp, nonce = f"{time.time():.3f}", secrets.token_hex(16)
    headers = {"Content-Type": "application/json", "X-Tusk-Time": stamp,
               "X-Tusk-Nonce": nonce,
               "X-Tusk-Signature": signature(key, method, path, stamp, nonce, body)}

    def exchange():
        connection = http.client.HTTPConnection(peer_address, port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheader("X-Tusk-Signature", ""), \
                response.read(BODY_MAX + 1)
        finally:
            connection.close()
    try:
        status, signed, out = in_netns(netns, exchange)
    except (OSError, http.client.HTTPException) as error:
        raise PeerError(f"the peer {peer_address} does not answer on TCP {port}: "
                        f"{getattr(error, 'strerror', None) or error}") from None
    if len(out) > BODY_MAX:
        raise PeerError("the peer's answer is too long")
    if not signed:
        try:
            why = json.loads(out).get("error", "")
        except (ValueError, AttributeError):
            why = ""
        raise PeerError(f"the peer refused (HTTP {status}): {why or 'no reason given'}")
    if not hmac.compare_digest(signed, signature(key, "ANSWER", path, stamp, nonce, out)):
        raise PeerError("the peer's answer is not signed with this box's pair key")
    try:
        return status, json.loads(out)
    except ValueError:
        raise PeerError("the peer's answer is not JSON") from None
