"""Bounded packet captures with dumpcap (plain Python: the agent's job and the web
form's validation both use it).

One dumpcap process captures every chosen interface into one pcapng file, whose
interface blocks carry the interface names (pcap holds one interface: refused for
several). The limits are dumpcap's own stop conditions - packets (-c), duration
(-a duration), file size (-a filesize) - plus this module watching the bytes
written and a stop request, either of which ends dumpcap with SIGINT so it closes
the file cleanly. With a ring buffer dumpcap keeps the last `ring_files` files of
max_bytes / ring_files each: the capture runs until its packet or time limit (or
Stop) and keeps the most recent max_bytes.

A filter is compiled before the start by `tcpdump -d` against an empty pcap file,
which needs neither privileges nor an interface (the web process checks it too).
"""
import os
import re
import signal
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum

from tusklib.children import end_with_parent
from tusklib.problems import Problem, Problems

DUMPCAP = "dumpcap"
TCPDUMP = "tcpdump"
IFNAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")    # what Linux allows, minus '/' and spaces

# field: (lowest, highest, default)
LIMITS = {
    "max_packets": (1, 100_000_000, 100_000),
    "max_mb": (1, 1_000_000, 100),
    "max_seconds": (1, 86_400, 60),
    "snaplen": (64, 262_144, 256),
    "ring_files": (0, 100, 0),
}
FORMATS = ("pcapng", "pcap")
FILTER_MAX = 1000   # characters of a capture filter
POLL = 0.5          # seconds between progress reports
STOP_GRACE = 10     # seconds dumpcap gets to close its file after SIGINT, then SIGTERM


class Code(IntEnum):
    """What is wrong with capture settings. No CLI takes them, so the numbers only keep
    these codes apart from the other domains' (tusklib.problems)."""

    INTERFACE = 60    # none chosen, not an interface name, or not on the firewall
    RANGE = 61        # a limit outside its bounds, or above the storage quota
    FORMAT = 62       # an unknown file format, or pcap for several interfaces
    FILTER = 63       # libpcap does not compile the filter


class SpecError(Problems):
    """Bad capture settings: every problem's path is the field."""

    codes = Code


@dataclass(frozen=True)
class Spec:
    interfaces: tuple
    filter: str = ""
    max_packets: int = LIMITS["max_packets"][2]
    max_mb: int = LIMITS["max_mb"][2]
    max_seconds: int = LIMITS["max_seconds"][2]
    snaplen: int = LIMITS["snaplen"][2]
    ring_files: int = 0
    format: str = "pcapng"

    @property
    def max_bytes(self):
        return self.max_mb * 1_000_000

    def as_dict(self):
        return {"interfaces": list(self.interfaces), "filter": self.filter,
                "max_packets": self.max_packets, "max_mb": self.max_mb,
                "max_seconds": self.max_seconds, "snaplen": self.snaplen,
                "ring_files": self.ring_files, "format": self.format}

    @classmethod
    def from_dict(cls, data):
        return cls(**{**data, "interfaces": tuple(data["interfaces"])})


def check_filter(text):
    """None if libpcap compiles the filter for Ethernet, else its reason."""
    if not text.strip():
        return None
    if len(text) > FILTER_MAX:
        return f"longer than {FILTER_MAX} characters"
    with tempfile.NamedTemporaryFile(suffix=".pcap") as empty:
        # a pcap file header and no packets: link type 1 (Ethernet), snap length 262144
        empty.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        empty.flush()
        try:
            done = subprocess.run([TCPDUMP, "-d", "-r", empty.name, "--", text],
                                  capture_output=True, text=True, timeout=10)
        except FileNotFoundError:
            return "tcpdump is not installed, so the filter cannot be checked"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if not line.startswith("reading from")]
    reason = lines[-1] if lines else f"tcpdump exited with status {done.returncode}"
    return reason.removeprefix("tcpdump: ")


def validate(spec, known_interfaces=None, quota_mb=None):
    """Raises SpecError naming every bad field; returns the spec otherwise."""
    problems = []

    def fail(code, name, message):
        problems.append(Problem(code, name, message))

    if not spec.interfaces:
        fail(Code.INTERFACE, "interfaces", "choose at least one interface")
    for name in spec.interfaces:
        if not isinstance(name, str) or not IFNAME.fullmatch(name):
            fail(Code.INTERFACE, "interfaces", f"{name!r} is not an interface name")
        elif known_interfaces is not None and name not in known_interfaces:
            fail(Code.INTERFACE, "interfaces", f"no interface {name} on the firewall (it has "
                                               f"{', '.join(sorted(known_interfaces)) or 'none'})")
    if len(set(spec.interfaces)) != len(spec.interfaces):
        fail(Code.INTERFACE, "interfaces", "an interface is named twice")
    bad = set()
    for name, (low, high, _) in LIMITS.items():
        value = getattr(spec, name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            fail(Code.RANGE, name, f"must be a whole number from {low} to {high}")
            bad.add(name)
    if spec.format not in FORMATS:
        fail(Code.FORMAT, "format", f"must be one of {', '.join(FORMATS)}")
    elif spec.format == "pcap" and len(spec.interfaces) > 1:
        fail(Code.FORMAT, "format", "a pcap file holds one interface: choose pcapng to capture "
                                    "several at once")
    if quota_mb is not None and "max_mb" not in bad and spec.max_mb > quota_mb:
        fail(Code.RANGE, "max_mb", f"more than the capture storage quota ({quota_mb} MB)")
    if not bad & {"max_mb", "ring_files"} and spec.max_mb < 2 * spec.ring_files:
        fail(Code.RANGE, "ring_files", f"{spec.ring_files} files of {spec.max_mb} MB in all "
                                       "would be under 2 MB each")
    problem = check_filter(spec.filter) if isinstance(spec.filter, str) else "must be text"
    if problem:
        fail(Code.FILTER, "filter", problem)
    if problems:
        raise SpecError(problems)
    return spec


def argv(spec, path, netns=None):
    """The dumpcap command line writing to path (with a ring buffer, dumpcap adds
    _NNNNN_<time> to the name of each file)."""
    call = ["ip", "netns", "exec", netns] if netns else []
    # dumpcap applies -s and -f to the -i before them (before any -i: to all of them)
    call += [DUMPCAP, "-s", str(spec.snaplen)]
    for name in spec.interfaces:
        call += ["-i", name] + (["-f", spec.filter] if spec.filter.strip() else [])
    call += ["-c", str(spec.max_packets),
             "-a", f"duration:{spec.max_seconds}", "-P" if spec.format == "pcap" else "-n"]
    kilobytes = spec.max_bytes // 1000
    if spec.ring_files:
        call += ["-b", f"files:{spec.ring_files}",
                 "-b", f"filesize:{max(1, kilobytes // spec.ring_files)}"]
    else:
        call += ["-a", f"filesize:{kilobytes}"]
    call += ["-w", str(path)]
    return call


@dataclass
class Result:
    files: list = field(default_factory=list)   # paths, oldest first
    packets: int = 0
    bytes: int = 0
    reason: str = ""       # packets, bytes, duration, request, error
    error: str = ""


def files_of(path):
    """The files a capture to path wrote: path itself, or its ring files in order."""
    directory, name = os.path.split(str(path))
    stem, ext = os.path.splitext(name)
    if os.path.exists(path):
        return [str(path)]
    try:
        found = [f for f in os.listdir(directory) if f.startswith(stem + "_") and f.endswith(ext)]
    except FileNotFoundError:
        return []
    return [os.path.join(directory, f) for f in sorted(found)]


def size_of(files):
    """Bytes in these files; a file gone meanwhile counts nothing."""
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f)
        except OSError:
            pass
    return total


# dumpcap's stderr: "\rPackets: 19 " while it runs, "Packets captured: 20\n" at the end
_PACKETS = re.compile(r"Packets(?: captured)?: (\d+)[ \r\n]")


class _Stderr(threading.Thread):
    """Reads dumpcap's stderr as it comes: the packet count, and the last 8 KiB of
    text for an error message (a day's progress lines are not kept)."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.packets, self.text = stream, 0, ""

    def run(self):
        for chunk in iter(lambda: os.read(self.stream.fileno(), 4096), b""):
            self.text = (self.text + chunk.decode("utf-8", "replace"))[-8192:]
            counts = _PACKETS.findall(self.text)
            if counts:
                self.packets = int(counts[-1])

    def error(self, status):
        lines = [line.strip() for line in self.text.replace("\r", "\n").splitlines()
                 if line.strip() and not line.startswith(("Capturing on", "File:", "Packets"))]
        return " ".join(lines) or f"dumpcap exited with status {status}"


def run(spec, path, netns=None, progress=None, should_stop=None):
    """Runs the capture to its end; returns a Result. progress(packets, bytes) every
    POLL seconds; should_stop() True ends it early (reason "request")."""
    proc = subprocess.Popen(argv(spec, path, netns), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=end_with_parent(os.getpid()))
    stderr = _Stderr(proc.stderr)
    stderr.start()
    started, reason, stopped_at, escalated = time.monotonic(), "", None, False
    while proc.poll() is None:
        time.sleep(POLL)
        size = size_of(files_of(path))
        if progress:
            progress(stderr.packets, size)
        now = time.monotonic()
        if stopped_at is None:
            if should_stop and should_stop():
                reason = "request"
            elif not spec.ring_files and size >= spec.max_bytes:
                reason = "bytes"
            elif now - started > spec.max_seconds + STOP_GRACE:
                reason = "duration"   # dumpcap's own timer should have ended it
            if reason:
                proc.send_signal(signal.SIGINT)
                stopped_at = now
        elif now - stopped_at > 2 * STOP_GRACE:
            proc.kill()
        elif now - stopped_at > STOP_GRACE and not escalated:
            proc.terminate()      # dumpcap closes its file on SIGTERM too
            escalated = True
    stderr.join(5)
    proc.stderr.close()
    files = files_of(path)
    result = Result(files=files, packets=stderr.packets, bytes=size_of(files))
    if reason:
        result.reason = reason
    elif proc.returncode != 0:
        result.reason, result.error = "error", stderr.error(proc.returncode)
    elif result.packets >= spec.max_packets:
        result.reason = "packets"
    elif not spec.ring_files and result.bytes >= spec.max_bytes * 0.9:
        result.reason = "bytes"
    else:
        result.reason = "duration"
    return result
