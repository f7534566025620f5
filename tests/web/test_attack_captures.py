"""Issue 16, items 2-4: what the web user (OS user tusk, the database) can plant in the
capture directory or forge in Capture rows and analysis jobs must never make the root
agent write, chown, chmod, delete or read a file outside its own captures, and the
analysis of untrusted files runs only in its sandbox, never as root.

Each attack is performed as the web user would: rows written with the ORM (the web's
database role), links planted in the capture directory (2770, the web user's group)
and owned by tusk. The agent is the real one (tests/web/conftest.py)."""
import os
import pwd
import socket
import stat
import sys

import pytest

from diag import agent_jobs
from diag.models import Capture, Report
from jobs import queue
from kit import wait_until
from simflow import Sim, write_pcap
from test_captures import finished, latest, running, sampled, start
from tusklib import config as tusk_config
from tuskweb import TEST_SECRET, wait

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
import fcntl, json, os, resource, socket, struct, sys
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))   # before this opens any
fd, secret, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
try:
    open(secret).read()
    secret_read = True
except PermissionError:
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
    "no_new_privs": status["NoNewPrivs"].strip(),
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
    assert seen["no_new_privs"] == "1"
    assert (seen["interfaces"], seen["lo_up"]) == (["lo"], False)
    assert seen["connect_errno"] is not None and not seen["secret_read"]
    assert seen["given"] == "handed over"         # the descriptor, not the path (0600 root)
    listing = [n for n in seen["fds"] if n not in (0, 1, 2, fd)]
    assert fd in seen["fds"] and len(listing) == 1    # nothing else of the agent's is open
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
