"""Packets for the namespace tests: captures with tcpdump read back with dpkt, and
TCP/UDP endpoints opened directly inside the lab's namespaces.

Sockets are created in a namespace by switching this thread into it (setns) just
for the socket() call: a socket stays in the namespace it was created in, so the
test process can be client and server at once, without a helper process per
connection and without fixed sleeps (connect() itself says when it is done).
"""
import io
import os
import re
import select
import signal
import socket
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import dpkt

ETH_P_IP = 0x0800

# TCP option kinds (RFC 9293, 7323, 2018)
EOL, NOP, MSS, WSCALE, SACK_PERMITTED, TIMESTAMPS = 0, 1, 2, 3, 4, 8
OPTION_NAMES = {EOL: "eol", NOP: "nop", MSS: "mss", WSCALE: "wscale",
                SACK_PERMITTED: "sack_permitted", TIMESTAMPS: "timestamps"}


# -- namespaces ---------------------------------------------------------------------------

@contextmanager
def netns(name):
    """Runs the block with this thread in network namespace `name`."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        os.setns(target, os.CLONE_NEWNET)
        try:
            yield
        finally:
            os.setns(own, os.CLONE_NEWNET)
    finally:
        os.close(target)
        os.close(own)


def ns_socket(name, family, kind, proto=0):
    with netns(name):
        return socket.socket(family, kind, proto)


def family_of(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


# -- TCP and UDP endpoints ----------------------------------------------------------------

class EchoServer:
    """Dual-stack TCP echo server on several ports of one namespace, in threads.
    Each connection: read until EOF, send everything back, close."""

    def __init__(self, ns, ports, address="::"):
        self.sockets = []
        for port in ports:
            sock = ns_socket(ns, socket.AF_INET6, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((address, port))
            sock.listen(16)
            self.sockets.append(sock)
            threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            conn.settimeout(10)
            data = b""
            try:
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(data)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self):
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@dataclass
class Outcome:
    result: str          # "ok", "refused", "timeout" or "error: ..."
    seconds: float
    reply: bytes = b""
    sport: int = 0


def _failed(exc, start):
    """The Outcome of a connection attempt that raised: refused, timed out, or other."""
    if isinstance(exc, ConnectionRefusedError):
        kind = "refused"
    elif isinstance(exc, (TimeoutError, socket.timeout)):
        kind = "timeout"
    else:
        kind = f"error: {exc}"
    return Outcome(kind, time.monotonic() - start)


def tcp_exchange(ns, dst, port, payload=b"tusk", src=None, timeout=5.0, mss=None):
    """Connects from namespace ns to dst:port, sends payload, half-closes and reads the
    echo. Returns an Outcome; never raises for network results."""
    sock = ns_socket(ns, family_of(dst), socket.SOCK_STREAM)
    with sock:
        if mss is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
        sock.settimeout(timeout)
        if src is not None:
            sock.bind((src, 0))
        start = time.monotonic()
        try:
            sock.connect((dst, port))
            sport = sock.getsockname()[1]
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        except OSError as exc:
            return _failed(exc, start)
        return Outcome("ok", time.monotonic() - start, reply, sport)


def tcp_connect(ns, dst, port, timeout=3.0):
    """Only the handshake: connects from ns to dst:port and aborts the connection with a
    RST at once (SO_LINGER 0). Returns an Outcome with the local port."""
    sock = ns_socket(ns, family_of(dst), socket.SOCK_STREAM)
    with sock:
        sock.settimeout(timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        start = time.monotonic()
        try:
            sock.connect((dst, port))
        except OSError as exc:
            return _failed(exc, start)
        return Outcome("ok", time.monotonic() - start, b"", sock.getsockname()[1])


class SynAckResponder:
    """A hand-made IPv4 server for one port of namespace ns: its kernel never sees the
    port (an input drop rule), an AF_PACKET socket sees the SYN, and a raw socket
    answers with a SYN/ACK carrying exactly `options` (raw option bytes). Lets a test
    put options into the SYN/ACK that the server's kernel would leave out."""

    def __init__(self, ns, interface, port, options, seq=0x10000000):
        self.ns, self.port, self.options, self.seq = ns, port, options, seq
        self.table = f"tusk_lab_synack_{port}"
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], check=True, text=True,
                       capture_output=True,
                       input=f"table inet {self.table} {{\n chain input {{\n"
                             f"  type filter hook input priority filter; policy accept;\n"
                             f"  tcp dport {port} drop\n }}\n}}\n")
        self.sniffer = ns_socket(ns, socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
        self.sniffer.bind((interface, ETH_P_IP))
        self.sniffer.settimeout(0.2)
        self.sender = ns_socket(ns, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.answered = []          # the SYN/ACKs sent, as dpkt IP packets
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                try:
                    ip = dpkt.ip.IP(self.sniffer.recv(65535))
                except (TimeoutError, socket.timeout):
                    continue
                tcp = ip.data
                if not (isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == self.port
                        and tcp.flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK) == dpkt.tcp.TH_SYN):
                    continue
                reply = dpkt.tcp.TCP(sport=self.port, dport=tcp.sport, seq=self.seq,
                                     ack=(tcp.seq + 1) & 0xFFFFFFFF, win=64240,
                                     flags=dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, opts=self.options)
                reply.off = (20 + len(self.options)) // 4
                packet = dpkt.ip.IP(src=ip.dst, dst=ip.src, p=dpkt.ip.IP_PROTO_TCP, ttl=64,
                                    data=reply)
                packet.len = 20 + len(bytes(reply))
                self.sender.sendto(bytes(packet), (socket.inet_ntoa(ip.src), 0))
                self.answered.append(packet)
        except Exception as exc:    # reported by close()
            self.error = exc

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sniffer.close()
        self.sender.close()
        subprocess.run(["ip", "netns", "exec", self.ns, "nft", "delete", "table", "inet",
                        self.table], check=False, capture_output=True)
        if self.error is not None:
            raise AssertionError(f"SYN/ACK responder failed: {self.error!r}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def udp_exchange(ns, dst, port, payload=b"tusk", timeout=3.0):
    """Sends one datagram from a connected UDP socket and waits for an answer:
    'ok' (a datagram), 'refused' (ICMP port unreachable came back) or 'timeout'."""
    sock = ns_socket(ns, family_of(dst), socket.SOCK_DGRAM)
    with sock:
        sock.settimeout(timeout)
        start = time.monotonic()
        try:
            sock.connect((dst, port))
            sock.send(payload)
            reply = sock.recv(65536)
        except ConnectionRefusedError:
            return Outcome("refused", time.monotonic() - start)
        except (TimeoutError, socket.timeout):
            return Outcome("timeout", time.monotonic() - start)
        return Outcome("ok", time.monotonic() - start, reply)


# -- captures -----------------------------------------------------------------------------

class Capture:
    """tcpdump on one interface of one namespace, writing every packet at once (-U,
    --immediate-mode) to a pcap file that can be read while it runs."""

    def __init__(self, ns, interface, path, bpf="", snaplen=256):
        self.path = str(path)
        self.dropped = None     # packets the kernel dropped for this capture, after stop()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "tcpdump", "-i", interface, "-n", "-U",
             "--immediate-mode", "-Z", "root", "-s", str(snaplen), "-w", self.path]
            + ([bpf] if bpf else []),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_listening(ns, interface)

    def _wait_listening(self, ns, interface, seconds=10):
        """tcpdump prints 'listening on' after the socket is open and the filter is set:
        from then on every matching packet lands in the file."""
        deadline = time.monotonic() + seconds
        seen = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stderr], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
                if b"listening on" in seen:
                    return
            elif self.proc.poll() is not None:
                break
        self.stop()
        raise AssertionError(f"tcpdump on {ns}/{interface} did not start: {seen.decode()!r}")

    def packets(self):
        """(timestamp, IP or IP6 packet) of every frame written so far."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return []
        if len(data) < 24:
            return []
        result = []
        records = iter(dpkt.pcap.Reader(io.BytesIO(data)))
        while True:
            try:
                ts, frame = next(records)
            except StopIteration:
                break
            except (dpkt.NeedData, dpkt.UnpackError, ValueError):
                break       # the last record is still being written
            try:
                eth = dpkt.ethernet.Ethernet(frame)
            except (dpkt.NeedData, dpkt.UnpackError):
                continue
            if isinstance(eth.data, (dpkt.ip.IP, dpkt.ip6.IP6)):
                result.append((ts, eth.data))
        return result

    def segments(self):
        return [s for s in map(Segment.of, (p for _, p in self.packets())) if s is not None]

    def wait_for(self, predicate, seconds=5, what="packets"):
        """Polls the file until predicate(segments) is true; returns the segments."""
        deadline = time.monotonic() + seconds
        while True:
            segments = self.segments()
            if predicate(segments):
                return segments
            if time.monotonic() >= deadline:
                raise AssertionError(f"capture {self.path}: timed out waiting for {what}; "
                                     f"saw {[str(s) for s in segments]}")
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr.closed:
            return
        # tcpdump's last words on SIGINT: "N packets dropped by kernel"
        found = re.search(rb"(\d+) packets? dropped by kernel", self.proc.stderr.read())
        self.dropped = int(found.group(1)) if found else None
        self.proc.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@contextmanager
def captures(lab, tmp_path, bpf, name="cap"):
    """Two captures in the fw namespace: client side (veth-c) and server side (veth-s)."""
    with Capture(lab.fw, "veth-c", tmp_path / f"{name}-c.pcap", bpf) as inside, \
            Capture(lab.fw, "veth-s", tmp_path / f"{name}-s.pcap", bpf) as outside:
        yield inside, outside


# -- TCP segments ------------------------------------------------------------------------

def parse_options(raw):
    """Raw TCP option bytes -> [(kind, data)], NOPs and EOL included, in order."""
    options, i = [], 0
    while i < len(raw):
        kind = raw[i]
        if kind in (EOL, NOP):
            options.append((kind, b""))
            i += 1
            continue
        if i + 1 >= len(raw) or raw[i + 1] < 2:
            raise ValueError(f"malformed TCP options {raw.hex()}")
        length = raw[i + 1]
        options.append((kind, bytes(raw[i + 2:i + length])))
        i += length
    return options


@dataclass
class Segment:
    src: str
    dst: str
    sport: int
    dport: int
    flags: int
    seq: int
    ack: int
    options_raw: bytes
    payload: bytes          # as captured (cut at the snap length)
    size: int               # payload bytes on the wire

    @classmethod
    def of(cls, packet):
        tcp = packet.data
        if not isinstance(tcp, dpkt.tcp.TCP):
            return None
        if isinstance(packet, dpkt.ip6.IP6):
            family, l4_length = socket.AF_INET6, packet.plen
        else:
            family, l4_length = socket.AF_INET, packet.len - packet.hl * 4
        return cls(socket.inet_ntop(family, packet.src), socket.inet_ntop(family, packet.dst),
                   tcp.sport, tcp.dport, tcp.flags, tcp.seq, tcp.ack, bytes(tcp.opts),
                   bytes(tcp.data), l4_length - tcp.off * 4)

    @property
    def syn(self):
        return self.flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK | dpkt.tcp.TH_RST) == dpkt.tcp.TH_SYN

    @property
    def synack(self):
        return (self.flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK | dpkt.tcp.TH_RST)
                == dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)

    @property
    def rst(self):
        return bool(self.flags & dpkt.tcp.TH_RST)

    @property
    def options(self):
        return parse_options(self.options_raw)

    def option_kinds(self):
        """The set of option kinds other than NOP and EOL."""
        return {kind for kind, _ in self.options if kind not in (NOP, EOL)}

    def option(self, kind):
        found = [data for k, data in self.options if k == kind]
        return found[0] if found else None

    @property
    def mss(self):
        data = self.option(MSS)
        return int.from_bytes(data, "big") if data is not None else None

    @property
    def wscale(self):
        data = self.option(WSCALE)
        return data[0] if data is not None else None

    def __str__(self):
        names = ",".join(OPTION_NAMES.get(k, str(k)) for k, _ in self.options)
        return (f"{self.src}.{self.sport} > {self.dst}.{self.dport} flags=0x{self.flags:02x} "
                f"opts=[{names}] len={self.size}")


def option_spans(raw):
    """[(kind, start, end)] byte ranges of each option in raw option bytes."""
    spans, i = [], 0
    while i < len(raw):
        kind = raw[i]
        length = 1 if kind in (EOL, NOP) else raw[i + 1]
        spans.append((kind, i, i + length))
        i += length
    return spans


def nopped(raw, kinds):
    """raw option bytes with every option of `kinds` overwritten by NOPs: what
    `reset tcp option` leaves behind."""
    out = bytearray(raw)
    for kind, start, end in option_spans(raw):
        if kind in kinds:
            out[start:end] = bytes([NOP]) * (end - start)
    return bytes(out)


def with_mss(raw, value):
    """raw option bytes with the MSS value replaced."""
    out = bytearray(raw)
    for kind, start, _ in option_spans(raw):
        if kind == MSS:
            out[start + 2:start + 4] = value.to_bytes(2, "big")
    return bytes(out)
