"""Which ports a lab takes, so that several labs run side by side (`make run LAB=a` beside
`make run LAB=b`): each running lab holds a lock and records its ports in /run/tusk-lab;
a port asked for that another lab, another PostgreSQL cluster or another program holds
is refused with one line naming the holder, and a port not asked for is the first free
one of a few slots.

A lab takes HTTP PORT, HTTPS PORT+1 and the redirect PORT+2 on 127.0.0.1 (the image's
three listeners), and one PostgreSQL port for its cluster (a Unix socket only)."""
import fcntl
import json
import os
import socket
import subprocess
from pathlib import Path

RUN = Path("/run/tusk-lab")
PG_SOCKETS = Path("/var/run/postgresql")
HTTP_FIRST, PG_FIRST, STRIDE, SLOTS = 8000, 5439, 10, 10
HTTP_LISTENERS = 3   # PORT, PORT+1, PORT+2


class PortTaken(Exception):
    """One line for the operator: which port, who holds it, what to do."""


class Claim:
    """The lab's lock and its recorded ports; release() gives both up (so does its death:
    the lock goes with the process, and a record without a live lock is ignored)."""

    def __init__(self, name):
        self.name = name
        RUN.mkdir(mode=0o755, exist_ok=True)
        self.lock = open(RUN / f"{name}.lock", "a+")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.seek(0)
            holder = self.lock.read().strip() or "?"
            self.lock.close()
            raise PortTaken(f"lab {name} is already running (pid {holder}): stop it first, "
                            "or start another with another name (make run LAB=...)") from None
        self.lock.seek(0)
        self.lock.truncate()
        self.lock.write(f"{os.getpid()}\n")
        self.lock.flush()
        self.http = self.pg = None

    def choose(self, http=None, pg=None):
        """Takes the ports asked for, or the first free slots; records them for the others.
        Under a lock of its own: two labs starting together never pick the same ports."""
        with open(RUN / ".choose.lock", "a") as choosing:
            fcntl.flock(choosing, fcntl.LOCK_EX)
            others = running_labs(besides=self.name)
            if http is None:
                http = first_free(HTTP_FIRST, lambda p: http_holder(p, others))
            else:
                holder = http_holder(http, others)
                if holder:
                    raise PortTaken(f"HTTP port {holder[0]} is taken by {holder[1]}: choose "
                                    "another (make run LAB_HTTP_PORT=...) or leave it out to "
                                    "take a free one")
            if pg is None:
                pg = first_free(PG_FIRST, lambda p: pg_holder(p, others, self.name))
            else:
                holder = pg_holder(pg, others, self.name)
                if holder:
                    raise PortTaken(f"PostgreSQL port {pg} is taken by {holder}: choose "
                                    "another (make run LAB_PG_PORT=...) or leave it out to "
                                    "take a free one")
            self.http, self.pg = http, pg
            (RUN / f"{self.name}.json").write_text(json.dumps({
                "pid": os.getpid(), "http": http, "postgresql": pg}) + "\n")
        return http, pg

    def release(self):
        (RUN / f"{self.name}.json").unlink(missing_ok=True)
        self.lock.close()


def running_labs(besides=None):
    """{name: {"pid", "http", "postgresql"}} of the labs whose lock is held."""
    labs = {}
    for record in RUN.glob("*.json") if RUN.is_dir() else ():
        name = record.stem
        if name == besides or not _locked(RUN / f"{name}.lock"):
            continue
        try:
            labs[name] = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
    return labs


def _locked(path):
    try:
        with open(path) as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True
    except FileNotFoundError:
        return False


def first_free(first, holder):
    for port in range(first, first + STRIDE * SLOTS, STRIDE):
        if not holder(port):
            return port
    raise PortTaken(f"no free port among {first}, {first + STRIDE}, ... "
                    f"{first + STRIDE * (SLOTS - 1)}: stop a lab, or name a port")


def http_holder(port, labs):
    """None if 127.0.0.1:port..port+2 are free, else (the port, who holds it)."""
    for candidate in range(port, port + HTTP_LISTENERS):
        for name, lab in labs.items():
            if lab["http"] <= candidate < lab["http"] + HTTP_LISTENERS:
                return candidate, f"lab {name} (pid {lab['pid']})"
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                return candidate, _listener(candidate)
    return None


def _listener(port):
    found = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                           text=True).stdout
    program = found.split('(("')[1].split('"')[0] if '(("' in found else None
    return f"another program ({program})" if program else "another program"


def pg_holder(port, labs, name):
    """None if no other lab, PostgreSQL cluster or socket uses port, else who does."""
    for other, lab in labs.items():
        if lab["postgresql"] == port:
            return f"lab {other} (pid {lab['pid']})"
    clusters = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
    for line in clusters.splitlines():
        version, cluster, cluster_port = line.split()[:3]
        if int(cluster_port) == port and cluster != f"tusk-{name}":
            return f"PostgreSQL cluster {version}/{cluster}"
    if (PG_SOCKETS / f".s.PGSQL.{port}").exists() and not _ours(port, clusters, name):
        return "another PostgreSQL server"
    return None


def _ours(port, clusters, name):
    return any(line.split()[1] == f"tusk-{name}" and int(line.split()[2]) == port
               for line in clusters.splitlines())
