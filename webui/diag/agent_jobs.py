"""The agent's diagnostics jobs.

diag.capture runs dumpcap (diag/core/capture.py) in the agent's target (the lab's
namespace with --netns) on the agent's pool for long-running jobs, so captures never
hold the workers policy and tuning jobs need. Before it starts, the oldest finished
captures are deleted until this one's byte limit fits the quota.

diag.analyze runs `tusk diag analyze --json` in a process of its own with a memory
limit and a timeout, as an unprivileged user when the agent is root: it parses
untrusted input (uploaded files). The report is kept in Report.result.
"""
import json
import logging
import os
import pwd
import resource
import subprocess
import sys

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import AuditEntry
from jobs.registry import JobFailed, handler

from .core import capture as core
from .models import Capture, Report

TUSK = settings.BASE_DIR / "bin" / "tusk"
ANALYZE_MEMORY = 1 << 30      # bytes of address space for one analysis
ANALYZE_TIMEOUT = 1800        # seconds
ANALYZE_USER = "nobody"

log = logging.getLogger("tusk.agent")


def used_bytes(exclude=None):
    total = 0
    for cap in Capture.objects.exclude(pk=exclude).only("files"):
        for path in cap.files:
            try:
                total += os.path.getsize(path)
            except OSError:
                pass
    return total


def make_room(quota_bytes, wanted, exclude):
    """Deletes the oldest finished captures until used + wanted <= quota; returns
    the ids deleted (each audit-logged)."""
    deleted = []
    used = used_bytes(exclude)
    for cap in Capture.objects.exclude(pk=exclude).filter(
            state__in=(Capture.State.DONE, Capture.State.FAILED)).order_by("id"):
        if used + wanted <= quota_bytes:
            break
        size = sum(os.path.getsize(p) for p in cap.existing_files())
        cap.delete_files()
        with transaction.atomic():
            AuditEntry.objects.create(username="agent", action="capture deleted",
                                      target=f"capture {cap.pk}",
                                      detail={"bytes": size, "why": "storage quota"})
            pk = cap.pk
            cap.delete()
        deleted.append(pk)
        used -= size
    return deleted


def share(path, directory):
    """A finished file: readable by the web user (the capture directory's group)."""
    try:
        os.chown(path, -1, os.stat(directory).st_gid)
        os.chmod(path, 0o640)
    except OSError:
        pass


@handler("diag.capture", "Packet capture", long_running=True)
def capture(run):
    cap = Capture.objects.get(pk=run.args["capture"])
    config = run.config
    try:
        spec = core.validate(core.Spec.from_dict(cap.spec))
    except (core.SpecError, TypeError) as exc:
        Capture.objects.filter(pk=cap.pk).update(state=Capture.State.FAILED, error=str(exc),
                                                 finished_at=timezone.now())
        raise JobFailed(f"capture {cap.pk}: {exc}")
    directory = config.capture_dir
    os.makedirs(directory, exist_ok=True)
    deleted = make_room(config.capture_quota_mb * 1_000_000, spec.max_bytes, cap.pk)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(directory, f"capture-{cap.pk}-{stamp}.{spec.format}")
    Capture.objects.filter(pk=cap.pk).update(state=Capture.State.RUNNING, files=[path],
                                             started_at=timezone.now())
    started = timezone.now()

    def progress(packets, size):
        elapsed = (timezone.now() - started).total_seconds()
        shares = [packets / spec.max_packets, elapsed / spec.max_seconds]
        if not spec.ring_files:
            shares.append(size / spec.max_bytes)
        Capture.objects.filter(pk=cap.pk).update(packets=packets, bytes=size)
        run.progress(min(99, int(100 * max(shares))), f"{packets} packets, {size} bytes")

    def should_stop():
        return run.agent.stopping.is_set() or Capture.objects.filter(
            pk=cap.pk, stop_requested=True).exists()

    run.progress(0, f"capturing on {', '.join(spec.interfaces)}")
    result = core.run(spec, path, netns=config.netns or None, progress=progress,
                      should_stop=should_stop)
    for name in result.files:
        share(name, directory)
    failed = result.reason == "error"
    Capture.objects.filter(pk=cap.pk).update(
        state=Capture.State.FAILED if failed else Capture.State.DONE, reason=result.reason,
        error=result.error, files=result.files, packets=result.packets, bytes=result.bytes,
        finished_at=timezone.now())
    if failed:
        raise JobFailed(f"capture {cap.pk}: {result.error}")
    return {"capture": cap.pk, "packets": result.packets, "bytes": result.bytes,
            "reason": result.reason, "files": len(result.files), "deleted": deleted}


def _limits(ids):
    """preexec_fn of the analysis: a memory cap, and no root for untrusted input."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (ANALYZE_MEMORY, ANALYZE_MEMORY))
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
    return apply


def _analysis_ids(files):
    """(uid, gid) to analyse as: `nobody`, with the group the files are readable by
    (the capture directory's); None when the agent is not root (nothing to drop) or
    there is no such user."""
    if os.geteuid() != 0:
        return None
    try:
        uid = pwd.getpwnam(ANALYZE_USER).pw_uid
    except KeyError:
        return None
    # the interpreter and the code must be reachable by anyone (they are on the
    # appliance; a development checkout with Python under /root is not): otherwise
    # the analysis runs as the agent, still with its memory limit
    for path in (os.path.realpath(sys.executable), os.path.realpath(TUSK)):
        if not _open_to_others(path):
            log.warning("analysing as root: %s is not readable by %s", path, ANALYZE_USER)
            return None
    return uid, os.stat(files[0]).st_gid


def _open_to_others(path):
    """Every directory above path searchable by others, path itself readable."""
    try:
        if not os.stat(path).st_mode & 0o004:
            return False
        parent = os.path.dirname(path)
        while parent != os.path.dirname(parent):
            if not os.stat(parent).st_mode & 0o001:
                return False
            parent = os.path.dirname(parent)
    except OSError:
        return False
    return True


@handler("diag.analyze", "Analyse a capture", retry_safe=True, long_running=True)
def analyze(run):
    cap = Capture.objects.get(pk=run.args["capture"])
    files = cap.existing_files()
    if not files:
        raise JobFailed(f"capture {cap.pk} has no file left to analyse (deleted by the quota?)")
    run.progress(5, f"analysing {len(files)} file(s)")
    ids = _analysis_ids(files)
    call = [sys.executable, str(TUSK), "diag", "analyze", "--json", *files]
    error, result = "", None
    try:
        done = subprocess.run(call, capture_output=True, text=True, timeout=ANALYZE_TIMEOUT,
                              preexec_fn=_limits(ids), cwd="/")
    except subprocess.TimeoutExpired:
        error = f"the analysis did not finish in {ANALYZE_TIMEOUT} s and was stopped"
    else:
        if done.returncode == 0:
            try:
                result = json.loads(done.stdout)
            except ValueError:
                error = "the analyser printed no report"
        elif done.returncode < 0 or "MemoryError" in done.stderr:
            error = (f"the analysis ran out of its {ANALYZE_MEMORY >> 20} MiB or was killed "
                     f"(status {done.returncode})")
        else:
            error = done.stderr.strip() or f"the analyser exited with status {done.returncode}"
    report = Report.objects.create(capture=cap, job=run.job, result=result, error=error)
    if error:
        raise JobFailed(error)
    return {"report": report.pk, "flows": len(result["flows"]), "packets": result["packets"]}

