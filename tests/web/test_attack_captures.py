"""Issue 16, items 2-4: what the web user (OS user tusk, the database) can plant in the
capture directory or forge in Capture rows and analysis jobs must never make the root
agent write, chown, chmod, delete or read a file outside its own captures, and the
analysis of untrusted files runs only in its sandbox, never as root.

Each attack is performed as the web user would: rows written with the ORM (the web's
database role), links planted in the capture directory (2770, the web user's group)
and owned by tusk. The agent is the real one (tests/web/conftest.py)."""
import json
import os
import pwd
import shutil
import socket
import stat
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from kit import wait_until
from simflow import Sim, write_pcap
from test_captures import finished, latest, running, sampled, start
from tuskweb import TEST_SECRET, wait

from diag import agent_jobs
from diag.models import Capture, Report
from jobs import queue
from jobs.registry import JobFailed
from lab.paths import WEBUI
from tusklib import config as tusk_config

CONTENT = b"root only\n"


@pytest.fixture
def captures(agent_config):
    return agent_config.parent / "captures"


@pytest.fixture
def spool(agent_config):
    return agent_config.parent / "capture-spool"


def root_only(path):
    path.write_bytes(CONTENT)
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def target(tmp_path):
    return root_only(tmp_path / "root-only")


def plant_link(at, to):
    """A link made by the web user (owned by tusk, as if it had made it itself)."""
    os.symlink(to, at)
    tusk = pwd.getpwnam("tusk")
    os.lchown(at, tusk.pw_uid, tusk.pw_gid)
    return at


def untouched(path, mode=0o600, gid=0, content=CONTENT):
    info = os.lstat(path)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, gid, mode)
    assert path.read_bytes() == content


@pytest.mark.parametrize("ring_files, planted", [(0, "capture-{}.pcapng"),
                                                 (2, "capture-{}-1.pcapng")])
def test_a_link_planted_at_a_capture_file_name_is_not_followed(agent, netns, router, captures,
                                                               spool, admin_client, target,
                                                               ring_files, planted):
    sampled("eth1", "eth3")
    start(admin_client, interfaces=["eth1"], ring_files=ring_files, max_mb=4, max_seconds=2)
    cap = running(latest())
    link = plant_link(captures / planted.format(cap.pk), target)
    cap = finished(cap)
    untouched(target)
    assert cap.state == "failed" and cap.bytes == 0
    assert f"{link.name} is in the way in {captures} (the agent did not put it there)" \
        in cap.error
    assert os.readlink(link) == str(target)
    assert os.listdir(captures) == [link.name]
    assert os.listdir(spool) == []


def test_the_quota_deletes_nothing_but_regular_files_named_for_the_capture(
        agent, netns, router, captures, admin_client, target, tmp_path):
    sampled("eth1", "eth3")
    other = root_only(tmp_path / "root-only-2")
    first = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done")
    plant_link(captures / f"capture-{first.pk}.pcapng", target)
    second = Capture.objects.create(source="upload", name="x.pcap", state="failed")
    plant_link(captures / f"upload-{second.pk}.pcap", other)
    big = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done")
    with open(captures / f"capture-{big.pk}.pcapng", "wb") as handle:
        handle.truncate(30_000_000)                    # what the quota must delete
    start(admin_client, interfaces=["eth1"], max_mb=45, max_seconds=1)
    cap = finished(latest())
    assert cap.state == "done", cap.error
    assert cap.job.result["deleted"] == [first.pk, second.pk, big.pk]
    untouched(target)
    untouched(other)
    assert sorted(os.listdir(captures)) == sorted([f"capture-{first.pk}.pcapng",
                                                   f"upload-{second.pk}.pcap",
                                                   f"capture-{cap.pk}.pcapng"])


def test_a_crashed_captures_cleanup_touches_nothing_outside(agent, netns, router, captures,
                                                            spool, admin_client, target):
    sampled("eth1", "eth3")
    start(admin_client, interfaces=["eth1"], max_seconds=600)
    cap = running(latest())
    link = plant_link(captures / f"capture-{cap.pk}.pcapng", target)
    agent.kill()
    agent.start()
    # the restarted agent fails the job, then settles the capture: wait for the row
    # itself (slow on a loaded box)
    def settled():
        cap.refresh_from_db()
        return cap.state not in agent_jobs.ACTIVE
    wait_until(settled, 120, lambda: f"{cap} settled by the restarted agent ({cap.state})")
    assert cap.state == "failed" and "the agent stopped during this capture" in cap.error
    assert f"{link.name} is in the way" in cap.error
    untouched(target)
    assert os.listdir(spool) == [] and os.readlink(link) == str(target)


def test_the_analysis_cannot_be_pointed_at_the_secret_key(agent, captures, agent_config):
    secret = agent_config.parent / "secret"        # 0640 root:tusk, as on the appliance
    web = pwd.getpwnam("tusk").pw_gid
    cap = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done")
    plant_link(captures / f"capture-{cap.pk}.pcapng", secret)
    job = wait(queue.enqueue("diag.analyze", {"capture": cap.pk}), 60)
    assert job.state == "failed"
    assert f"capture {cap.pk} has no file left to analyse" in job.error
    assert "6167656e" not in job.error             # "agen": the key's first bytes
    assert not Report.objects.exists()
    untouched(secret, 0o640, web, TEST_SECRET)


PROBE = """
import ctypes, fcntl, json, os, resource, socket, struct, sys
limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
fds = []                                  # before this opens any (there is no /proc)
for n in range(limit):
    try:
        os.fstat(n)
        fds.append(n)
    except OSError:
        pass
fd, secret, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
no_new_privs = libc.prctl(39, 0, 0, 0, 0)                 # PR_GET_NO_NEW_PRIVS
bounding = [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1]   # PR_CAPBSET_READ
try:
    os.setuid(0)
    became_root = True
except PermissionError:
    became_root = False
try:
    open(secret).read()
    secret_read = True
except (PermissionError, FileNotFoundError):
    secret_read = False
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
lo = struct.unpack("16sH", fcntl.ioctl(probe, 0x8913, struct.pack("256s", b"lo"))[:18])[1]
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    connected = None
except OSError as exc:
    connected = exc.errno
print(json.dumps({
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "no_new_privs": no_new_privs, "bounding": bounding, "became_root": became_root,
    "interfaces": [name for _, name in socket.if_nameindex()], "lo_up": bool(lo & 1),
    "connect_errno": connected, "secret_read": secret_read,
    "given": os.read(fd, 100).decode(),
    "fds": fds,
    "limits": {n: resource.getrlimit(getattr(resource, n))[0]
               for n in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_FSIZE")}}))
"""


def test_the_analysis_sandbox_has_its_own_user_no_network_and_limits(agent, agent_config,
                                                                     tmp_path):
    config = tusk_config.load(str(agent_config))
    analyst = pwd.getpwnam(agent_jobs.ANALYZE_USER)
    given = tmp_path / "given"
    given.write_bytes(b"handed over")
    os.chmod(given, 0o600)
    listener = socket.create_server(("127.0.0.1", 0))      # this (the agent's) network
    fd = os.open(given, os.O_RDONLY)
    try:
        seen = agent_jobs.sandboxed(config, ["-c", PROBE, str(fd), str(agent_config.parent /
                                                                       "secret"),
                                             str(listener.getsockname()[1])], pass_fds=[fd])
    finally:
        os.close(fd)
        listener.close()
    gid = analyst.pw_gid
    assert seen["ids"] == [analyst.pw_uid, analyst.pw_uid, gid, gid, []]
    assert seen["no_new_privs"] == 1
    assert seen["bounding"] == [] and not seen["became_root"]   # no capability, ever
    assert (seen["interfaces"], seen["lo_up"]) == (["lo"], False)
    assert seen["connect_errno"] is not None and not seen["secret_read"]
    assert seen["given"] == "handed over"         # the descriptor, not the path (0600 root)
    assert seen["fds"] == [0, 1, 2, fd]           # nothing else of the agent's is open
    assert seen["limits"] == {"RLIMIT_AS": 1 << 30, "RLIMIT_CPU": agent_jobs.ANALYZE_TIMEOUT,
                              "RLIMIT_NOFILE": 64, "RLIMIT_FSIZE": 0}

    sim = Sim(segments=50, rtt=0.01, bandwidth=1e8).run()   # the job runs it the same way
    cap = Capture.objects.create(source="upload", name="x.pcap", state="done")
    write_pcap(agent_config.parent / "captures" / f"upload-{cap.pk}.pcap",
               [p for p in sim.packets if p[1] == "outside"])
    job = wait(queue.enqueue("diag.analyze", {"capture": cap.pk}), 60)
    assert job.state == "succeeded", job.error
    assert job.result["user"] == agent_jobs.ANALYZE_USER
    report = Report.objects.get(capture=cap).result
    assert [f["name"] for f in report["files"]] == [f"upload-{cap.pk}.pcap"]


def test_an_analysis_its_user_cannot_run_fails_and_never_runs_as_root(agent, agent_config,
                                                                      captures, tmp_path):
    private = tmp_path / "private"           # root's only: tusk-analyze cannot search it
    private.mkdir(mode=0o700)
    marker = tmp_path / "ran-as"
    python = private / "python"
    python.write_text(f"#!/bin/sh\nid -u > {marker}\nexec {sys.executable} \"$@\"\n")
    os.chmod(python, 0o755)
    with open(agent_config, "a") as handle:      # [agent] is the file's last section
        handle.write(f'analysis_python = "{python}"\n')
    agent.stop()
    agent.start()
    cap = Capture.objects.create(source="upload", name="x.pcap", state="done")
    sim = Sim(segments=50, rtt=0.01, bandwidth=1e8).run()
    write_pcap(captures / f"upload-{cap.pk}.pcap", [p for p in sim.packets if p[1] == "outside"])
    job = wait(queue.enqueue("diag.analyze", {"capture": cap.pk}), 60)
    assert job.state == "failed"
    assert job.error.startswith(f"user tusk-analyze cannot run {python}: Permission denied - "
                                "the analysis runs only as that user, never as root")
    assert not marker.exists() and not Report.objects.exists()


# Issue 34: the analysis sees nothing of the host but its interpreter and Tusk's code,
# read-only. This runs inside the real sandbox (agent_jobs.sandboxed, as the job does)
# and tries, as a parser exploited by a crafted capture would, to write outside, to
# reach a socket and to read the host's files; it reports what happened to each.
ESCAPE = """
import errno, json, os, socket, sys
plan = json.loads(sys.argv[1])
def outcome(attempt):
    try:
        attempt()
        return "done"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def create(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
def connect(family, address):
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        probe.connect(address)
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps({
    "files": {d: outcome(lambda: create(os.path.join(d, plan["name"]))) for d in plan["dirs"]},
    "dirs": {d: outcome(lambda: os.mkdir(os.path.join(d, plan["name"] + ".d")))
             for d in plan["dirs"]},
    "tcp": outcome(lambda: connect(socket.AF_INET, ("127.0.0.1", plan["port"]))),
    "unix": {p: outcome(lambda: connect(socket.AF_UNIX, p.replace("@", "\\0", 1)))
             for p in plan["unix"]},
    "stat": {p: outcome(lambda: os.stat(p)) for p in plan["paths"]},
    "read": {p: outcome(lambda: open(p, "rb").read()) for p in plan["paths"]},
    "listing": {p: listing(p) for p in ("/", "/root")},
}))
"""


@pytest.fixture
def open_dir():
    """A directory on the host anyone may write (like /tmp itself, 1777), and searchable
    by all on the way: the sandbox must still not reach it."""
    path = Path(tempfile.mkdtemp(prefix="tusk-sandbox-", dir="/tmp"))
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path)


def escape(agent_config, **plan):
    """What ESCAPE saw, run in the analysis sandbox as the job runs it."""
    config = tusk_config.load(str(agent_config))
    plan = {"name": f"tusk-escape-{uuid.uuid4().hex}", "dirs": [], "port": 9, "unix": [],
            "paths": [], **plan}
    return agent_jobs.sandboxed(config, ["-c", ESCAPE, json.dumps(plan)])


def test_inside_the_sandbox_no_write_outside_succeeds_and_nothing_appears_on_the_host(
        analysis_user, agent_config, captures, open_dir):
    targets = [t for t in (open_dir, Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"),
                           captures, Path(WEBUI), Path(sys.prefix), Path("/")) if t.is_dir()]
    name = f"tusk-escape-{uuid.uuid4().hex}"
    try:
        seen = escape(agent_config, name=name, dirs=[str(t) for t in targets])
        leaked = [str(t / n) for t in targets for n in (name, name + ".d")
                  if os.path.lexists(t / n)]
    finally:                                  # what a leak left: the next run starts clean
        for t in targets:
            for n in (name, name + ".d"):
                if os.path.isdir(t / n):
                    os.rmdir(t / n)
                elif os.path.lexists(t / n):
                    os.unlink(t / n)
    assert leaked == []                       # nothing appeared on the host
    for kind in ("files", "dirs"):
        assert all(result != "done" for result in seen[kind].values()), seen[kind]
    # each is either not there at all or the read-only code the analysis runs
    for outside in (open_dir, captures):
        assert seen["files"][str(outside)] == "ENOENT", seen["files"]
    assert seen["files"][str(WEBUI)] in ("EROFS", "EACCES")
    # /tmp is there only as the empty, read-only way to the code when a checkout or its
    # virtualenv lives below it (a CI clone in /tmp)
    code_below_tmp = any(str(p).startswith("/tmp/") for p in (WEBUI, sys.prefix))
    assert seen["files"]["/tmp"] == ("EROFS" if code_below_tmp else "ENOENT"), seen["files"]


def test_inside_the_sandbox_no_socket_reaches_the_host(db, analysis_user, agent_config,
                                                        open_dir, settings):
    listener = socket.create_server(("127.0.0.1", 0))          # the host's loopback
    local = socket.socket(socket.AF_UNIX)                     # a socket anyone may use
    local.bind(str(open_dir / "probe.sock"))
    os.chmod(open_dir / "probe.sock", 0o777)
    local.listen()
    abstract = socket.socket(socket.AF_UNIX)                  # the host's abstract names
    abstract.bind(f"\0tusk-probe-{uuid.uuid4().hex}")
    abstract.listen()
    database = settings.DATABASES["default"]
    postgres = os.path.join(database["HOST"], f".s.PGSQL.{database['PORT']}")
    assert os.path.exists(postgres)           # the web tier's PostgreSQL is up
    with listener, local, abstract:
        seen = escape(agent_config, port=listener.getsockname()[1],
                      unix=[postgres, str(open_dir / "probe.sock"),
                            "@" + abstract.getsockname()[1:].decode()])
    assert seen["tcp"] != "done"
    assert seen["unix"][postgres] == "ENOENT", seen["unix"]
    assert seen["unix"][str(open_dir / "probe.sock")] == "ENOENT", seen["unix"]
    assert all(result != "done" for result in seen["unix"].values()), seen["unix"]


def test_inside_the_sandbox_the_hosts_files_are_not_there(analysis_user, agent_config,
                                                          captures):
    secret = agent_config.parent / "secret"
    paths = ["/etc/passwd", "/etc/hostname", "/etc/tusk", "/var/lib/tusk", "/data", "/home",
             "/proc/1/environ", "/sys/class/net", "/dev/mem", "/var/run/postgresql",
             str(agent_config), str(secret), str(captures), str(agent_config.parent)]
    seen = escape(agent_config, paths=paths)
    assert seen["stat"] == {p: "ENOENT" for p in paths}
    assert seen["read"] == {p: "ENOENT" for p in paths}
    # only the interpreter and Tusk's code are there, and the way to them
    ours = {Path(p).parts[1] for p in (WEBUI, sys.prefix, sys.base_prefix)}
    assert "dev" not in seen["listing"]["/"] and "proc" not in seen["listing"]["/"]
    assert set(seen["listing"]["/"]) <= {"usr", "bin", "sbin", "lib", "lib64"} | ours
    way = {Path(p).relative_to("/root").parts[0] for p in (sys.prefix, sys.base_prefix)
           if p.startswith("/root/")}          # the lab's pyenv: /root/.pyenv/...
    assert seen["listing"]["/root"] == (sorted(way) if way else "ENOENT")


def test_without_bwrap_the_analysis_fails_saying_so_and_nothing_runs(analysis_user,
                                                                    agent_config, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setattr(agent_jobs, "BWRAP", str(tmp_path / "no-bwrap"))
    config = tusk_config.load(str(agent_config))
    marker = tmp_path / "ran"                 # root's: only an unsandboxed run could write it
    with pytest.raises(JobFailed) as failed:
        agent_jobs.sandboxed(config, ["-c", f"open({str(marker)!r}, 'w').write('ran')"])
    assert str(failed.value) == (
        f"the analysis runs only in its sandbox, and there is no {tmp_path / 'no-bwrap'}: "
        "install bubblewrap (Debian package bubblewrap; the image selects "
        "BR2_PACKAGE_BUBBLEWRAP)")
    assert not marker.exists()


def test_a_sandbox_that_cannot_be_set_up_fails_saying_why_and_nothing_runs(analysis_user,
                                                                          agent_config,
                                                                          tmp_path):
    with open(agent_config, "a") as handle:      # [agent] is the file's last section
        handle.write(f'analysis_python = "{tmp_path / "gone" / "bin" / "python"}"\n')
    config = tusk_config.load(str(agent_config))
    marker = tmp_path / "ran"
    with pytest.raises(JobFailed) as failed:
        agent_jobs.sandboxed(config, ["-c", f"open({str(marker)!r}, 'w').write('ran')"])
    assert str(failed.value) == (
        "the analysis sandbox (bwrap) could not be set up: bwrap: Can't find source path "
        f"{tmp_path / 'gone'}: No such file or directory: nothing ran")
    assert not marker.exists()
