#!/usr/bin/env python3
"""Tusk self-test responder: the far end of a middlebox measurement after Allman,
"On the Performance of Middleboxes" (IMC 2003), and the client that measures.

One self-contained file, Python 3.8+ standard library only, so that it runs on any
Linux host as it is (the Self-test page offers it for download):

    python3 responder.py --port 8009 [--bind ADDR] [--allow ADDR ...]

Protocol (TCP, one port). Every connection starts with one ASCII header line of at
most 256 bytes; anything else gets "ERR <reason>\\n" and the connection is closed.

  TXN <27 hex>\\n        a transaction (Allman's finger): a 32-byte request, a 32-byte
                        answer "ACK <the same 27 hex>\\n", then the responder closes.
  PING\\n                feedback time: then 16-byte messages, each echoed at once,
                        until the client closes (or 30 s pass without one).
  BULK <bytes>\\n        bulk transfer: then that many bytes (at most 64 MiB); the
                        responder answers with the last 4 of them and closes.
  CTRL <bytes>\\n        control, only from addresses given with --allow (none: refused):
                        then a JSON document {"paths": [{"name", "host", "port"}...],
                        "params": {...}}; this host measures those paths with the
                        Measurer below and answers "PROGRESS <percent> <text>\\n" lines,
                        then "OK <bytes>\\n" and the raw samples as JSON (or "ERR ...").

Bounds: 64 connections at a time (more get "ERR busy"), one control run at a time,
30 s idle timeout on every read, 100 000 pings per connection, 64 KiB of control JSON.
"""
import argparse
import errno
import ipaddress
import json
import os
import socket
import socketserver
import sys
import threading
import time

VERSION = 1
DEFAULT_PORT = 8009
HEADER_MAX = 256
HOST_MAX = 253             # characters of a host name (RFC 1035)
REQUEST_SIZE = 32          # a transaction's request and answer
TOKEN_SIZE = REQUEST_SIZE - 5
PING_SIZE = 16
BULK_MAX = 64 << 20
CONTROL_MAX = 64 << 10
MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 30.0
PINGS_PER_CONNECTION = 100_000
BULK_TIMEOUT_FACTOR = 10   # a bulk transfer may take this many times `timeout`

METRICS = ("transaction", "feedback", "bulk")
# field: (lowest, highest, default) - shared by the CLI, the control request and the web form
LIMITS = {
    "transactions": (0, 10_000, 500),
    "pings": (0, 100_000, 500),
    "bulk": (0, 1_000, 50),
    "bulk_bytes": (1024, BULK_MAX, 1 << 20),
    "timeout": (0.1, 60.0, 5.0),          # seconds for a connect or an answer
    "max_seconds": (1, 3600, 900),        # the whole run; what is left is not measured
}
FAILURE_KINDS = ("refused", "connect-timeout", "unreachable", "reset", "short",
                 "wrong-echo", "timeout", "refused-by-responder", "error")


class ParamError(ValueError):
    """Bad parameters: errors is [(field, message)], every message naming its field."""

    def __init__(self, errors):
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors))
        self.errors = errors


def check_params(raw):
    """The measurement parameters, defaults filled in and every bound checked."""
    if not isinstance(raw, dict):
        raise ParamError([("params", "must be an object")])
    errors = []
    unknown = sorted(set(raw) - set(LIMITS))
    if unknown:
        errors.append((unknown[0], f"unknown parameter (known: {', '.join(sorted(LIMITS))})"))
    params = {}
    for field, (low, high, default) in LIMITS.items():
        value = raw.get(field, default)
        kind = float if isinstance(default, float) else int
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or (kind is int and not float(value).is_integer()):
            what = "a number" if kind is float else "an integer"
            errors.append((field, f"{value!r} is not {what}"))
            continue
        if not low <= value <= high:
            errors.append((field, f"{value} is outside {low}..{high}"))
            continue
        params[field] = kind(value)
    if errors:
        raise ParamError(errors)
    return params


def check_paths(raw):
    """[(name, host, port)] from [{"name", "host", "port"}], at most two, names unique."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= 2:
        raise ParamError([("paths", "must be a list of one or two paths")])
    paths, errors = [], []
    for index, path in enumerate(raw):
        where = f"paths[{index}]"
        if not isinstance(path, dict):
            errors.append((where, "must be an object"))
            continue
        name, host, port = path.get("name"), path.get("host"), path.get("port")
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 32:
            errors.append((f"{where}.name", f"{name!r} is not a short name"))
        if not isinstance(host, str) or not 0 < len(host) <= HOST_MAX \
                or any(c.isspace() for c in host):
            errors.append((f"{where}.host", f"{host!r} is not a host"))
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            errors.append((f"{where}.port", f"{port!r} is not a TCP port"))
        paths.append((name, host, port))
    if not errors and len({p[0] for p in paths}) != len(paths):
        errors.append(("paths", "path names must differ"))
    if errors:
        raise ParamError(errors)
    return paths


# -- the responder -------------------------------------------------------------------

class Refused(Exception):
    """Bad input from a peer: answered with ERR and the connection closed."""


class Reader:
    """Buffered reads from a socket: header lines and exact byte counts."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def line(self, limit=HEADER_MAX):
        while b"\n" not in self.buffer:
            if len(self.buffer) >= limit:
                raise Refused(f"header longer than {limit} bytes")
            chunk = self.sock.recv(4096)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        if len(line) >= limit:
            raise Refused(f"header longer than {limit} bytes")
        try:
            return line.decode("ascii")
        except UnicodeDecodeError:
            raise Refused("header is not ASCII") from None

    def exactly(self, size, keep_last=None):
        """size bytes (keep_last: only their last keep_last are kept, so 64 MiB are
        never held in memory); EOFError if the peer closes first."""
        kept = b""
        wanted = size
        while wanted:
            if not self.buffer:
                self.buffer = self.sock.recv(min(1 << 16, wanted) if keep_last else wanted)
                if not self.buffer:
                    raise EOFError
            chunk, self.buffer = self.buffer[:wanted], self.buffer[wanted:]
            wanted -= len(chunk)
            kept = (kept + chunk)[-keep_last:] if keep_last else kept + chunk
        return kept


def _number(text, what, high):
    # ASCII digits only: "²".isdigit() is true too, and int() refuses it
    if not (text.isascii() and text.isdigit() and len(text) <= 18) or not 0 < int(text) <= high:
        raise Refused(f"{what} must be 1..{high}, not {text[:20]!r}")
    return int(text)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.settimeout(IDLE_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = Reader(sock)
        try:
            header = reader.line()
            command, _, argument = header.partition(" ")
            if command == "TXN" and len(header) == REQUEST_SIZE - 1 and len(argument) == TOKEN_SIZE:
                sock.sendall(f"ACK {argument}\n".encode())
            elif command == "PING" and not argument:
                self.pings(sock, reader)
            elif command == "BULK":
                size = _number(argument, "BULK size", BULK_MAX)
                sock.sendall(reader.exactly(size, keep_last=4))
            elif command == "CTRL":
                self.control(sock, reader, _number(argument, "CTRL size", CONTROL_MAX))
            else:
                raise Refused(f"unknown request {header[:40]!r}")
        except Refused as exc:
            self.server.log(f"{self.client_address[0]}: refused: {exc}")
            try:
                sock.sendall(f"ERR {exc}\n".encode())
            except OSError:
                pass
        except (EOFError, OSError):
            pass

    def pings(self, sock, reader):
        for _ in range(PINGS_PER_CONNECTION):
            try:
                sock.sendall(reader.exactly(PING_SIZE))
            except EOFError:
                return
        raise Refused(f"more than {PINGS_PER_CONNECTION} pings on one connection")

    def control(self, sock, reader, size):
        peer = ipaddress.ip_address(self.client_address[0].split("%")[0])
        if not any(peer in allowed for allowed in self.server.allow):
            raise Refused(f"control requests are not accepted from {peer} (see --allow)")
        try:
            request = json.loads(reader.exactly(size))
            paths = check_paths(request.get("paths") if isinstance(request, dict) else None)
            params = check_params(request.get("params", {}))
        except ValueError as exc:
            raise Refused(f"bad control request: {exc}") from None
        if not self.server.control_lock.acquire(blocking=False):
            raise Refused("busy: another control request is running")
        try:
            self.server.log(f"{peer}: measuring {paths} {params}")

            def progress(percent, text):
                sock.sendall(f"PROGRESS {percent} {text}\n".encode())
            raw = Measurer(paths, params, progress=progress).run()
        finally:
            self.server.control_lock.release()
        body = json.dumps(raw).encode()
        sock.sendall(f"OK {len(body)}\n".encode() + body)


class Responder(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, allow=(), verbose=False):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.allow = [ipaddress.ip_network(a, strict=False) for a in allow]
        self.verbose = verbose
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.control_lock = threading.Lock()
        super().__init__(address, Handler)

    def log(self, message):
        if self.verbose:
            print(f"responder: {message}", file=sys.stderr, flush=True)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(b"ERR busy: too many connections\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


# -- the measuring client ------------------------------------------------------------

class Failure(Exception):
    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


def _failure_kind(exc, connecting):
    if isinstance(exc, Failure):
        return exc.kind
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, socket.timeout):
        return "connect-timeout" if connecting else "timeout"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset"
    if isinstance(exc, EOFError):
        return "short"
    if isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH,
                                                  errno.EADDRNOTAVAIL):
        return "unreachable"
    return "error"


def _receive(sock, size):
    """Exactly size bytes; an "ERR" answer is the responder refusing, fewer is short."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            if data.startswith(b"ERR "):
                raise Failure("refused-by-responder")
            raise Failure("short")
        data += chunk
    return data


class Measurer:
    """Transactions, feedback pings and bulk transfers over each path, interleaved
    (one of each path in turn, so that both see the same moment's conditions). Every
    sample is kept (ms) and every failure counted by kind. run() returns the raw
    result; stats.summarise turns it into medians and percentiles."""

    def __init__(self, paths, params, progress=None, should_stop=None):
        self.paths = paths
        self.params = params
        self.progress = progress or (lambda percent, text: None)
        self.should_stop = should_stop or (lambda: False)
        self.samples = {m: {p[0]: [] for p in paths} for m in METRICS}
        self.failures = {m: {p[0]: {} for p in paths} for m in METRICS}
        self.incomplete = ""

    def run(self):
        params = self.params
        deadline = time.monotonic() + params["max_seconds"]
        total = params["transactions"] + params["pings"] + params["bulk"]
        done = 0
        plan = (("transaction", params["transactions"], self.transaction),
                ("feedback", params["pings"], self.ping),
                ("bulk", params["bulk"], self.bulk))
        connections = {}
        try:
            for metric, count, measure in plan:
                for index in range(count):
                    if time.monotonic() > deadline:
                        self.incomplete = f"stopped after max_seconds ({params['max_seconds']} s)"
                    elif self.should_stop():
                        self.incomplete = "stopped on request"
                    if self.incomplete:
                        return self.raw()
                    for path in self.paths:
                        try:
                            self.samples[metric][path[0]].append(measure(path, connections))
                        except (Failure, OSError, EOFError) as exc:
                            kind = _failure_kind(exc, getattr(exc, "connecting", False))
                            counts = self.failures[metric][path[0]]
                            counts[kind] = counts.get(kind, 0) + 1
                    done += 1
                    if index % 10 == 9 or index == count - 1:
                        self.progress(int(100 * done / max(total, 1)),
                                      f"{metric} {index + 1} of {count}")
        finally:
            for sock in connections.values():
                sock.close()
        return self.raw()

    def raw(self):
        return {"version": VERSION, "paths": [{"name": n, "host": h, "port": p}
                                              for n, h, p in self.paths],
                "params": self.params, "samples": self.samples, "failures": self.failures,
                "incomplete": self.incomplete}

    def _connect(self, path, timeout):
        _, host, port = path
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            exc.connecting = True
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def transaction(self, path, _connections):
        token = os.urandom(TOKEN_SIZE).hex()[:TOKEN_SIZE]
        started = time.perf_counter()
        sock = self._connect(path, self.params["timeout"])
        with sock:
            sock.sendall(f"TXN {token}\n".encode())
            answer = _receive(sock, REQUEST_SIZE)
            if answer != f"ACK {token}\n".encode() or sock.recv(1):
                raise Failure("wrong-echo")     # a different answer, or more than one
            return (time.perf_counter() - started) * 1000

    def ping(self, path, connections):
        """One ping on the path's open connection; a failed one closes it, and the next
        ping opens a new one (Allman: start over on a new connection)."""
        name = path[0]
        if name not in connections:
            sock = self._connect(path, self.params["timeout"])
            try:
                sock.sendall(b"PING\n")
            except OSError:
                sock.close()
                raise
            connections[name] = sock
        sock = connections[name]
        message = f"P{os.urandom(8).hex()[:PING_SIZE - 2]}\n".encode()
        try:
            started = time.perf_counter()
            sock.sendall(message)
            if _receive(sock, PING_SIZE) != message:
                raise Failure("wrong-echo")
            return (time.perf_counter() - started) * 1000
        except BaseException:
            connections.pop(name).close()
            raise

    def bulk(self, path, _connections):
        """Allman's bulk transfer: the last 4 bytes are random and come back; the time
        runs from the connect until they arrive."""
        size = self.params["bulk_bytes"]
        tail = os.urandom(4)
        payload = bytearray(size)
        payload[-4:] = tail
        started = time.perf_counter()
        sock = self._connect(path, self.params["timeout"])
        with sock:
            sock.settimeout(self.params["timeout"] * BULK_TIMEOUT_FACTOR)
            sock.sendall(f"BULK {size}\n".encode() + payload)
            if _receive(sock, 4) != tail:
                raise Failure("wrong-echo")
            return (time.perf_counter() - started) * 1000


def main(argv=None):
    parser = argparse.ArgumentParser(description="Tusk self-test responder (Allman, IMC 2003)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--bind", default="0.0.0.0", help="address to listen on (default: all)")
    parser.add_argument("--allow", action="append", default=[], metavar="ADDR",
                        help="address or network that may send control requests (repeatable)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port: {args.port} is not a TCP port")
    try:
        for allowed in args.allow:
            ipaddress.ip_network(allowed, strict=False)
        bind = str(ipaddress.ip_address(args.bind))
    except ValueError as exc:
        parser.error(str(exc))
    try:
        server = Responder((bind, args.port), allow=args.allow, verbose=not args.quiet)
    except OSError as exc:
        parser.exit(1, f"responder: cannot listen on {bind} port {args.port}: {exc.strerror}\n")
    print(f"listening on {bind} port {args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
