"""The pair key and the signatures of the peer channel (peer.py, docs/HA.md): the key's
rules and its root-only file, the HMAC-SHA256 over a request's and an answer's fields,
the headers that sign a request. Protocol version 2."""
import hashlib
import hmac
import ipaddress
import os
import secrets
import time

from tusklib.files import write_atomically

PROTOCOL = "2"
VERSION_HEADER = "X-Tusk-Peer"
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


def read_key(state_dir, name=KEY_NAME):
    """The pair key's bytes in state_dir/name, or None when there is none."""
    try:
        with open(os.path.join(state_dir, name), "rb") as handle:
            key = handle.read(KEY_MAX + 1).strip()
    except OSError:
        return None
    return key or None


def write_key(state_dir, key, name=KEY_NAME):
    """key (text) into state_dir/name: root's (the writer's), 0600."""
    write_atomically(os.path.join(state_dir, name), key + "\n", 0o600)


def _address(address):
    """address as both ends write it: the compressed form of an IP address."""
    try:
        return ipaddress.ip_address(address).compressed
    except ValueError:
        return str(address)


def _mac(key, *fields):
    # no field holds a newline: each is a header's value, a request line's word, a number
    return hmac.new(key, "\n".join(fields).encode(), hashlib.sha256).hexdigest()


def request_signature(key, address, method, path, length, stamp, nonce, digest):
    """A request's signature: what it asks (method, path, length, body's digest), of whom
    (the address it is sent to), when and once (time, nonce)."""
    return _mac(key, f"tusk-peer/{PROTOCOL} request", _address(address), method, path,
                str(length), stamp, nonce, digest)


def answer_signature(key, status, path, stamp, nonce, digest):
    """An answer's signature: its status and body's digest, bound to the request's path,
    time and nonce."""
    return _mac(key, f"tusk-peer/{PROTOCOL} answer", str(status), path, stamp, nonce, digest)


def request_headers(key, address, method, path, body, stamp=None, nonce=None):
    """The headers that sign a request of body (bytes) to address."""
    stamp = stamp or f"{time.time():.3f}"
    nonce = nonce or secrets.token_hex(16)
    digest = hashlib.sha256(body).hexdigest()
    return {VERSION_HEADER: PROTOCOL, "Content-Length": str(len(body)), "X-Tusk-Time": stamp,
            "X-Tusk-Nonce": nonce, "X-Tusk-Body-SHA256": digest,
            "X-Tusk-Signature": request_signature(key, address, method, path, len(body),
                                                  stamp, nonce, digest)}


def _same(given, expected):
    """given (a header's text, maybe not ASCII) is expected, compared in constant time."""
    return hmac.compare_digest(given.encode("latin-1", "replace"), expected.encode())
