"""What the seqrand scenarios share: the Tusk policy with one class per randomisation
mode and one randomising on the flowtable fast path (fast), applied with the tusk
CLI; endpoints that put real checksums on the wire; the kernel's seqadj counters,
endpoint TCP statistics and conntrack entries saved as JSON for the host-side tests
(tests/vm/test_seqrand.py).
"""
import hashlib
import json
import os
import socket
import struct
import threading

import conntrack
from pcaps import ns_socket

from lab.namespaces import SERVER_V4

PORT_BOTH, PORT_PLAIN, PORT_INITIATOR, PORT_FAST = 5201, 5202, 5203, 5204

# The slow path's classes say never: these scenarios judge its translation packet by
# packet, and auto would hand a connection to the flowtable after its first megabyte
# (policy-auto-fastpath tests that).
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: rand-both, protocol: tcp, ports: [{PORT_BOTH}]}}
  - {{name: plain, protocol: tcp, ports: [{PORT_PLAIN}]}}
  - {{name: rand-initiator, protocol: tcp, ports: [{PORT_INITIATOR}]}}
  - {{name: rand-fast, protocol: tcp, ports: [{PORT_FAST}]}}
  - {{name: ping, protocol: icmp}}
  - {{name: ping6, protocol: icmpv6}}
classes:
  - {{name: both, from: inside, to: outside, services: [rand-both], action: accept, seqrand: both,
     fastpath: never}}
  - {{name: plain, from: inside, to: outside, services: [plain], action: accept,
     fastpath: never}}
  - {{name: initiator, from: inside, to: outside, services: [rand-initiator], action: accept,
     seqrand: initiator, fastpath: never}}
  - {{name: fast, from: inside, to: outside, services: [rand-fast], action: accept, seqrand: both,
     fastpath: true}}
  - {{name: diagnostics, from: inside, services: [ping, ping6], action: accept}}
"""


def apply_policy(ctx, lab, policy=POLICY):
    """The policy live in fw, applied and confirmed as an operator does it."""
    path = ctx.dir / "policy.yaml"
    path.write_text(policy)
    ctx.tusk(lab, "apply", path)
    ctx.tusk(lab, "confirm")


def real_checksums(ctx, lab):
    """Checksums computed by the endpoints' stacks rather than left to an offload that
    veth never performs, so the captures on fw can be verified segment by segment
    (TSO goes with it: segments are MTU-sized on the wire)."""
    for ns in (lab.client, lab.server):
        ctx.run("ethtool", "-K", "eth0", "tx", "off", ns=ns)


def seqadj_counters(lab):
    """/proc/net/nf_conntrack_seqadj of fw as {name: value}."""
    text = lab.ns(lab.fw, "cat", "/proc/net/nf_conntrack_seqadj").stdout
    return {name: int(value) for name, value in (line.split() for line in text.splitlines())}


def save_state(ctx, lab, name):
    """Counters, conntrack entries and both endpoints' TCP statistics under name-*.json."""
    ctx.save_json(f"{name}-seqadj.json", seqadj_counters(lab))
    ctx.save_json(f"{name}-conntrack.json", conntrack.entries(lab.fw))
    for ns, who in ((lab.client, "client"), (lab.server, "server")):
        ctx.run("nstat", "--ignore", "--zeros", "--noupdate", "--json", ns=ns,
                save=f"{name}-nstat-{who}.json")
    ctx.run("nft", "-j", "list", "counters", "table", "inet", "tusk", ns=lab.fw,
            save=f"{name}-nft-counters.json", check=False)
    ctx.run("conntrack", "-S", ns=lab.fw, save=f"{name}-conntrack-S.txt")


class Connection:
    """One TCP connection between the client and the server namespaces, both ends held
    by this process: the test decides when each side sends, reads or closes."""

    def __init__(self, lab, port, server=SERVER_V4, family=socket.AF_INET, timeout=5,
                 client_port=0):
        bind = "::" if family == socket.AF_INET6 else "0.0.0.0"
        listener = ns_socket(lab.server, family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((bind, port))
        listener.listen(1)
        self.client = ns_socket(lab.client, family, socket.SOCK_STREAM)
        self.client.settimeout(timeout)
        if client_port:                 # a given source port (reused on purpose)
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.client.bind((bind, client_port))
        listener.settimeout(timeout)
        try:
            self.client.connect((server, port))
            self.server, _ = listener.accept()
        finally:
            listener.close()
        self.server.settimeout(timeout)
        self.client_port = self.client.getsockname()[1]

    def exchange(self, payload=b"tusk"):
        """client -> server, then the same back; raises on a timeout or a reset."""
        self.client.sendall(payload)
        self.server.sendall(read_exactly(self.server, len(payload)))
        return read_exactly(self.client, len(payload))

    def close(self):
        for sock in (self.client, self.server):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def save_json_lines(ctx, name, records):
    ctx.save_text(name, "".join(json.dumps(record) + "\n" for record in records))



def transfer(sender, receiver, size, chunk=65536, cpus=None):
    """Sends size random bytes from one socket to the other (a thread reads), and
    returns (sha256 of what was sent, sha256 of what arrived). cpus: (sending CPU,
    reading CPU) to pin the calling thread and the reader to."""
    sent, received = hashlib.sha256(), hashlib.sha256()
    got = [0]
    failure = []

    def read():
        if cpus:
            os.sched_setaffinity(0, {cpus[1]})      # this thread only
        try:
            while got[0] < size:
                data = receiver.recv(chunk)
                if not data:
                    break
                received.update(data)
                got[0] += len(data)
        except OSError as exc:
            failure.append(exc)

    if cpus:
        os.sched_setaffinity(0, {cpus[0]})
    reader = threading.Thread(target=read)
    reader.start()
    remaining = size
    while remaining:
        data = os.urandom(min(chunk, remaining))
        sender.sendall(data)
        sent.update(data)
        remaining -= len(data)
    reader.join(60)
    if failure or got[0] != size:
        raise ConnectionError(f"{got[0]} of {size} bytes arrived ({failure})")
    return sent.hexdigest(), received.hexdigest()
