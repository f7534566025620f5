"""New connections per second and the cost of dropped SYNs, for bench_policy.py: three
small tools, each run in a lab namespace with `ip netns exec NS python3 connrate.py ...`
(standard library only). Each prints one JSON object on stdout.

  server PORT                    accept and close, forever, IPv4 and IPv6 (one socket)
  client HOST PORT SECONDS [RATE]
                                 connect and close back to back for SECONDS (or RATE a second)
  keep PORTS                     accept on each port (comma-separated) and keep every
                                 connection open, forever
  hold HOST PORTS COUNT          open COUNT connections over PORTS and keep them until
                                 stdin closes (prints when they are up)
  syn IFACE DST_MAC SRC DST PORT SECONDS
                                 raw TCP SYNs out of IFACE as fast as one CPU sends them

The client and the SYN sender pin themselves to the first CPU they may use, the server
to the last. veth runs the receiving side's softirq work on the sending CPU, so the
client's CPU does all the work of a connection's SYN (the client's stack, fw's
conntrack and forward chain, the server's listener answering) and of the SYN/ACK on
its way back; the server process only accepts and closes. With the two apart the
rate is the client CPU's cost per connection, which holds the ruleset's whole cost;
together, or left to the scheduler, the server's accept and close come on top (on
this 2-CPU host about 7 700/s against 12 000/s at 10 classes).

The client closes with SO_LINGER 0, which sends a RST instead of a FIN: no end keeps
the connection in TIME_WAIT (the server's FIN, if its close comes first, is answered
by that RST), so the client's ephemeral ports never run out, and fw's conntrack entry
goes to CLOSE at once instead of living through the FIN handshake. The server closes
normally, on purpose: when a port comes round again while fw still holds the old
entry, conntrack re-opens it as a new connection (which meets the classes again) only
if the old one ended with a FIN from either side or a RST in the new SYN's direction;
after a RST from the server it would take the SYN as part of the old connection.

The SYN sender writes whole Ethernet frames on a packet socket, addressed to fw's
MAC: no route or neighbour lookup in the client, so as little as possible of the
measured CPU is the sender's own. veth delivers a frame by queueing it on the CPU's
backlog and running the receive softirq when the send returns from its
bottom-half-disabled section, so fw's whole prerouting / forward / drop path runs
inside the sender's send() on the sender's CPU.

Both the client and the SYN sender report, besides the elapsed time, the CPU time
spent on their behalf on the CPU they are pinned to: their own CPU time
(CLOCK_PROCESS_CPUTIME_ID; without CONFIG_IRQ_TIME_ACCOUNTING a task's runtime
includes the softirq work done in its context), plus what that CPU's ksoftirqd ran
(softirq work the kernel deferred: a 10 000-rule walk outlasts the softirq's 2 ms
budget), plus, on a kernel with IRQ time accounting, that CPU's irq and softirq time
from /proc/stat (then no longer part of the task's). Unlike the elapsed time it leaves
out what other processes took of the CPU meanwhile.
"""
import errno
import gzip
import json
import os
import random
import resource
import selectors
import socket
import struct
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "vm", "guest"))
from inet import checksum  # noqa: E402 - the Internet checksum the guest scenarios use

LINGER_RST = struct.pack("ii", 1, 0)
FRAMES = 4096          # distinct source ports the SYN sender cycles through
USER_HZ = os.sysconf("SC_CLK_TCK")


def pin(which):
    cpus = os.sched_getaffinity(0)
    cpu = which(cpus)
    os.sched_setaffinity(0, {cpu})
    return cpu


def server(port):
    pin(max)
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("::", port))
    listener.listen(4096)
    print(json.dumps({"listening": port}), flush=True)
    while True:
        conn, _ = listener.accept()
        conn.close()


def _most_files():
    """As many open files as the hard limit allows (a process holds that many
    connections: make bench-flowexport runs several)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def keep(ports):
    """Accepts on each of ports and keeps every connection open (make bench-flowexport's
    table of established connections), forever."""
    _most_files()
    chooser = selectors.DefaultSelector()
    for port in ports:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(4096)
        listener.setblocking(False)
        chooser.register(listener, selectors.EVENT_READ)
    print(json.dumps({"listening": ports}), flush=True)
    kept = []
    while True:
        for key, _ in chooser.select():
            try:
                while True:
                    kept.append(key.fileobj.accept()[0])
            except BlockingIOError:
                pass


def hold(host, ports, count):
    """Opens count connections to host over ports (each port's share of the ephemeral
    range) and keeps them open until stdin closes; prints when they are up."""
    _most_files()
    held, failed = [], 0
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.connect((host, ports[i % len(ports)]))
            held.append(sock)
        except OSError:
            failed += 1
            sock.close()
    print(json.dumps({"held": len(held), "failed": failed}), flush=True)
    sys.stdin.read()


def client(host, port, seconds, rate=0.0):
    """connect and close back to back for seconds, or at rate connections a second."""
    meter = CpuMeter(pin(min))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = (host, port)
    done = failed = slow = 0
    errors = {}
    clock = time.perf_counter
    start = clock()
    end = start + seconds
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
        before = clock()
        try:
            sock.connect(address)
            done += 1
        except OSError as error:
            failed += 1
            name = errno.errorcode.get(error.errno, str(error))
            errors[name] = errors.get(name, 0) + 1
        sock.close()
        now = clock()
        if now - before > 0.2:     # a SYN lost and sent again after 1 s, or preempted
            slow += 1
        if now >= end:
            break
        if rate:
            wait = start + (done + failed) / rate - now
            if wait > 0:
                time.sleep(wait)
    print(json.dumps({"connections": done, "failed": failed, "slow": slow, "errors": errors,
                      "elapsed": now - start,
                      **meter.used()}))


def syn_frame(dst_mac, src_mac, src, dst, sport, dport, rng):
    """An Ethernet frame holding a TCP SYN (MSS option) with valid checksums: a bad one
    would make fw's conntrack call it invalid, and it would never meet the classes."""
    v6 = ":" in src
    family = socket.AF_INET6 if v6 else socket.AF_INET
    saddr, daddr = socket.inet_pton(family, src), socket.inet_pton(family, dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, rng.getrandbits(32), 0, 6 << 4, 0x02,
                      64240, 0, 0) + struct.pack("!BBH", 2, 4, 1460)
    if v6:
        pseudo = saddr + daddr + struct.pack("!IxxxB", len(tcp), socket.IPPROTO_TCP)
    else:
        pseudo = saddr + daddr + struct.pack("!xBH", socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    if v6:
        ip = struct.pack("!IHBB", 6 << 28, len(tcp), socket.IPPROTO_TCP, 64) + saddr + daddr
        ethertype = 0x86DD
    else:
        header = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp), rng.getrandbits(16), 0x4000,
                             64, socket.IPPROTO_TCP, 0) + saddr + daddr
        ip = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
        ethertype = 0x0800
    return dst_mac + src_mac + struct.pack("!H", ethertype) + ip + tcp


def irq_time_accounting():
    """Whether this kernel keeps softirq time apart from the task it interrupted."""
    for path, opener in (("/proc/config.gz", gzip.open),
                         (f"/boot/config-{os.uname().release}", open)):
        try:
            with opener(path, "rt") as config:
                return "CONFIG_IRQ_TIME_ACCOUNTING=y" in config.read()
        except OSError:
            continue
    return False


def ksoftirqd(cpu):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() == f"ksoftirqd/{cpu}":
                    return pid
        except OSError:
            continue
    return None


def runtime(pid):
    """A thread's CPU time in seconds (the scheduler's ns-precise sum_exec_runtime)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/schedstat") as schedstat:
        return int(schedstat.read().split()[0]) / 1e9


def softirq_time(cpu):
    with open("/proc/stat") as stat:
        for line in stat:
            if line.startswith(f"cpu{cpu} "):
                fields = line.split()
                return (int(fields[6]) + int(fields[7])) / USER_HZ   # irq + softirq
    return 0.0


class CpuMeter:
    """CPU time spent for this process on its CPU since the meter was made: its own, its
    CPU's ksoftirqd's, and (with IRQ time accounting) its CPU's irq and softirq time."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.irqtime = irq_time_accounting()
        self.ksoftirqd = ksoftirqd(cpu)
        self.start = self.read()

    def read(self):
        return (time.process_time(), runtime(self.ksoftirqd),
                softirq_time(self.cpu) if self.irqtime else 0.0)

    def used(self):
        own, deferred, softirq = (b - a for a, b in zip(self.start, self.read()))
        return {"cpu": own + deferred + softirq, "cpu_own": own, "cpu_ksoftirqd": deferred,
                "cpu_softirq": softirq, "irq_time_accounting": self.irqtime,
                "pinned_cpu": self.cpu}


def syn(iface, dst_mac, src, dst, port, seconds):
    cpu = pin(min)
    with open(f"/sys/class/net/{iface}/address") as address:
        src_mac = bytes.fromhex(address.read().strip().replace(":", ""))
    rng = random.Random(port)
    frames = [syn_frame(bytes.fromhex(dst_mac.replace(":", "")), src_mac, src, dst,
                        1024 + i, port, rng) for i in range(FRAMES)]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    send = sock.send
    clock = time.perf_counter
    sent = 0
    meter = CpuMeter(cpu)
    start = clock()
    end = start + seconds
    while True:
        send(frames[sent % FRAMES])
        sent += 1
        if not sent & 15 and clock() >= end:
            break
    print(json.dumps({"sent": sent, "elapsed": clock() - start, **meter.used()}))


def main(argv):
    usage = __doc__.split("\n\n")[1]
    if argv[:1] == ["server"] and len(argv) == 2:
        server(int(argv[1]))
    elif argv[:1] == ["client"] and len(argv) in (4, 5):
        client(argv[1], int(argv[2]), float(argv[3]), float(argv[4]) if len(argv) == 5 else 0)
    elif argv[:1] == ["keep"] and len(argv) == 2:
        keep([int(p) for p in argv[1].split(",")])
    elif argv[:1] == ["hold"] and len(argv) == 4:
        hold(argv[1], [int(p) for p in argv[2].split(",")], int(argv[3]))
    elif argv[:1] == ["syn"] and len(argv) == 7:
        syn(argv[1], argv[2], argv[3], argv[4], int(argv[5]), float(argv[6]))
    else:
        sys.exit(f"usage:\n{usage}")


if __name__ == "__main__":
    main(sys.argv[1:])
