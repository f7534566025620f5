"""Attacks on the Logs page's boundary: what someone who controls the web process (the
database role tusk, the OS user tusk) could write must never make the root agent or the
forwarder reach further than an admin's settings, and the web user never reads more than
the log files through the page.

- Settings rows written straight into the database (past the forms), and a job with
  arguments, are refused by the agent with the field named; the forwarder that runs, its
  configuration and the storage bound stay as they were.
- Entries planted as user tusk in the log directory (were it ever writable by its group):
  links to root's files and to the web user's own secret key, a FIFO, a second name of a
  file, a file under another name. The agent removes them (never following or opening
  one), puts the directory back to root:tusk 2750, and audits what it removed; the page
  and the reader run as user tusk show none of what they point at; user tusk cannot
  create anything in the directory as the agent keeps it."""
import dataclasses
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kit import wait_until
from netns.test_logs_ulogd import Receiver
from tuskweb import TEST_SECRET, wait

from accounts.models import AuditEntry
from jobs import queue
from jobs.models import PeriodicState
from lab.paths import WEBUI
from lab.ulogd import make_log_dir
from lab.users import WEB_USER, reach_interpreter
from logs.core.constants import CURRENT, FORWARDER_TASK, KEEP_TASK
from logs.models import LogSettings

VALID = {"host": "127.0.0.1", "port": 514, "transport": "udp"}
FORGED = [  # (document, what the agent says)
    ({"syslog": [{**VALID, "host": '127.0.0.1" port="9'}]},
     "syslog[0].host: '127.0.0.1\" port=\"9' is neither an IP address nor a host name"),
    ({"syslog": [{**VALID, "host": 'x"\nmodule(load="omprog")'}]}, "syslog[0].host: "),
    # issue 34: an IPv6 scope carrying rsyslog syntax, which Python's ipaddress takes
    ({"syslog": [{**VALID, "host": '::1%"port="1")}\nmodule(load="omprog")\n'
                                  'input(type="imfile" file="\\57tmp\\57tusk-x" tag="x")'}]},
     "syslog[0].host: '::1%\"port=\"1\")}\\nmodule(load=\"omprog\")"),
    ({"syslog": [{**VALID, "host": '::1%"port="1")}'}]},
     "syslog[0].host: '::1%\"port=\"1\")}' has a zone (%...)"),
    ({"syslog": [{**VALID, "host": "fe80::1%lo"}]}, "syslog[0].host: 'fe80::1%lo' has a zone"),
    ({"syslog": [{**VALID, "host": "/dev/log"}]},
     "syslog[0].host: '/dev/log' is neither an IP address nor a host name"),
    ({"syslog": [{**VALID, "host": "0.0.0.0"}]}, "0.0.0.0 is not the address of one host"),
    ({"syslog": [{**VALID, "port": 0}]}, "syslog[0].port: 0 is outside 1-65535"),
    ({"syslog": [{**VALID, "port": 70000}]}, "syslog[0].port: 70000 is outside 1-65535"),
    ({"syslog": [{**VALID, "port": "514"}]},
     "syslog[0].port: expected a whole number, got str"),
    ({"syslog": [{**VALID, "port": True}]}, "syslog[0].port: expected a whole number, got bool"),
    ({"syslog": [{**VALID, "transport": "file"}]},
     "syslog[0].transport: 'file' is not one of udp, tcp"),
    ({"syslog": [{**VALID, "file": "/etc/shadow"}]}, "syslog[0].file: unknown key"),
    ({"syslog": [{**VALID, "port": 600 + n} for n in range(5)]},
     "syslog: 5 receivers: at most 4"),
    ({"syslog": "127.0.0.1"}, "syslog: expected a list of receivers"),
    ({"syslog": ["127.0.0.1"]}, "syslog[0]: expected a table of host, port, transport"),
    ({"files": 100000}, "files: 100000 is outside 2-100"),
    ({"file_mb": 0}, "file_mb: 0 is outside 1-1000"),
    ({"path": "/etc"}, "path: unknown key"),
    (["127.0.0.1"], "expected a table of files, file_mb, syslog"),
]


def forge(document):
    """The settings row as the web user can write it: any JSON at all."""
    LogSettings.objects.update_or_create(pk=1, defaults={"document": document})


def test_forged_settings_rows_are_refused_and_change_nothing(agent, agent_config, netns):
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
    receiver = Receiver(netns)
    try:
        port = receiver.ports()[0]
        forge({"files": 5, "file_mb": 2, "syslog": [{**VALID, "port": port}]})
        first = wait(queue.enqueue("logs.apply"))
        assert first.state == "succeeded", first.error
        conf = agent_config.parent / "syslog" / "rsyslog.conf"
        before = conf.read_bytes()
        pid = first.result["pid"]
        for document, message in FORGED:
            forge(document)
            job = wait(queue.enqueue("logs.apply"))
            assert job.state == "failed" and message in job.error, (document, job.error)
            assert job.error.endswith("nothing changed")
            assert conf.read_bytes() == before
            assert os.path.exists(f"/proc/{pid}")      # the same rsyslogd, still running
        forge({"files": 5, "file_mb": 2, "syslog": [{**VALID, "port": port}]})
        job = wait(queue.enqueue("logs.apply", {"path": "/etc/shadow", "file": "x"}))
        assert job.state == "failed" and "logs.apply takes no arguments" in job.error
        # the periodic bound never takes a refused row: the defaults bound the log then
        forge({"files": 100000, "file_mb": 1000})
        kept = wait_until(lambda: "files: 100000" in str(PeriodicState.last_result(KEEP_TASK))
                          and PeriodicState.last_result(KEEP_TASK), 10, "the refusal")
        assert (kept["files"], kept["file_mb"]) == (10, 10)
        assert "files: 100000 is outside 2-100" in kept["refused"]
        assert PeriodicState.objects.get(name=FORWARDER_TASK).error == ""
        assert os.path.exists(f"/proc/{pid}") and conf.read_bytes() == before
    finally:
        receiver.close()


def as_web_user(*argv, **kwargs):
    return subprocess.run(["runuser", "-u", WEB_USER, "--", *argv], capture_output=True,
                          text=True, **kwargs)


def root_only(path, content=b"root only\n", mode=0o600, gid=0):
    path.write_bytes(content)
    os.chown(path, 0, gid)
    os.chmod(path, mode)
    return path


def untouched(path, content, mode=0o600, gid=0):
    info = os.lstat(path)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, gid, mode), path
    assert path.read_bytes() == content


def plant(how, at, *args):
    """An entry made as the web user would make it: owned by tusk."""
    how(*args, at) if args else how(at)
    tusk = pwd.getpwnam(WEB_USER)
    os.lchown(at, tusk.pw_uid, tusk.pw_gid)
    return at


def test_entries_planted_in_the_log_directory_are_removed_and_never_followed(
        agent, agent_config, tmp_path):
    logs = agent_config.parent / "logs"     # made by the agent at its start
    web = grp.getgrnam(WEB_USER).gr_gid
    wait_until(lambda: logs.is_dir(), 10, "the log directory")
    target = root_only(tmp_path / "root-only")
    secret = agent_config.parent / "secret"      # the web user may read it, as on the box
    os.chmod(logs, 0o2770)                       # as if it had been opened to the group
    plant(os.symlink, logs / CURRENT, target)            # where ulogd would append
    plant(os.symlink, logs / f"{CURRENT}.1", secret)
    plant(os.mkfifo, logs / f"{CURRENT}.2")
    plant(lambda at: at.write_text("mine\n"), logs / "own")
    os.link(logs / "own", logs / f"{CURRENT}.3")        # a second name of the same file
    plant(os.mkdir, logs / "sub")
    plant(os.symlink, logs / "sub" / "deeper", target)
    wait_until(lambda: stat.S_IMODE(os.stat(logs).st_mode) == 0o2750 and
               os.listdir(logs) == [], 10, lambda: os.listdir(logs))
    untouched(target, b"root only\n")
    untouched(secret, TEST_SECRET, 0o640, web)
    expected = sorted([CURRENT, f"{CURRENT}.1", f"{CURRENT}.2", f"{CURRENT}.3", "own", "sub"])

    def audited():
        return sorted(AuditEntry.objects.filter(action="log file removed")
                      .values_list("target", flat=True))
    wait_until(lambda: audited() == expected, 10, lambda: f"each audited once: {audited()}")
    assert (os.stat(logs).st_uid, os.stat(logs).st_gid) == (0, web)


RECORD = ('{"oob.prefix": "tusk:drop:%s", "oob.time.sec": 1780000000, "oob.in": "eth1", '
          '"oob.out": "eth3", "ip.protocol": 6, "src_ip": "10.98.1.2", "dest_ip": "10.98.2.2", '
          '"src_port": 40000, "dest_port": 5209}\n')


@pytest.fixture
def web_reads(settings, system_users):
    """A log directory as the image lays it out (in a place the web user can reach), with
    one real record (ulogd's fields) that the web process of the test reads; and links
    planted in it by the web user itself (the directory opened to its group for that,
    then closed again) to a root-only file and to a file it may read, both holding
    records of their own."""
    top = Path(tempfile.mkdtemp(prefix="tusk-test-logs-", dir="/var/tmp"))
    os.chmod(top, 0o755)
    settings.TUSK = dataclasses.replace(settings.TUSK, state_dir=str(top / "policy"))
    logs = top / "logs"
    make_log_dir(logs)
    web = grp.getgrnam(WEB_USER).gr_gid
    root_only(logs / CURRENT, (RECORD % "web").encode(), 0o640, web)
    hidden = root_only(top / "root-only", (RECORD % "rootonly").encode())
    readable = root_only(top / "readable", (RECORD % "readable").encode(), 0o640, web)
    os.chmod(logs, 0o2770)
    planted = as_web_user("sh", "-c", f"ln -s {hidden} {logs}/{CURRENT}.1 && "
                                      f"ln -s {readable} {logs}/{CURRENT}.2")
    assert planted.returncode == 0, planted.stderr
    os.chmod(logs, 0o2750)
    yield logs
    shutil.rmtree(top)


@pytest.mark.django_db
def test_the_page_reads_no_file_through_a_planted_link(admin_client, web_reads):
    page = admin_client.get("/logs/").content.decode()
    assert 'data-class="web"' in page
    assert "rootonly" not in page and "readable" not in page


def test_the_web_user_reads_the_log_and_nothing_beyond_it(web_reads):
    problem = reach_interpreter(sys.executable, WEB_USER, "import json")
    assert problem is None, problem
    read = as_web_user(sys.executable, "-c", f"""
import sys
sys.path.insert(0, {str(WEBUI)!r})
from logs.core import records, storage
found = storage.search({str(web_reads)!r}, records.parse, lambda r: True, 100, 1 << 30)
print(" ".join(r.cls for r in found.records))
""", cwd="/")
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["web"]
    # through the links themselves the web user reads what it may read anyway, no more:
    # the reader above declined even that one
    assert as_web_user("cat", str(web_reads / f"{CURRENT}.1")).returncode != 0
    assert as_web_user("touch", str(web_reads / "x")).returncode != 0
    assert pwd.getpwnam(WEB_USER).pw_uid != os.stat(web_reads).st_uid


FORGED_REPORTS = [
    (KEEP_TASK, ["not", "a", "table"]),
    (KEEP_TASK, {"total": "huge", "files": 2, "file_mb": 1}),
    (KEEP_TASK, {"total": 1, "rotated": False, "deleted": [], "removed": [], "writers": "ulogd",
                 "files": 2, "file_mb": 1, "refused": ""}),
    (FORWARDER_TASK, {"running": True, "pid": "1", "targets": "everywhere"}),
]


@pytest.mark.parametrize(("task", "row"), FORGED_REPORTS, ids=range(len(FORGED_REPORTS)))
def test_a_forged_report_reads_as_nothing_reported(admin_client, task, row):
    """The agent's reports are the web user's rows to write: one not of its contract's
    shape (logs/contracts.py) is no report on the Logs page - before, a keeper's report
    that was no table was a server error there."""
    PeriodicState.objects.update_or_create(name=task, defaults={"result": row})
    page = admin_client.get("/logs/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Stored:" not in text and 'id="syslog-state"' not in text
