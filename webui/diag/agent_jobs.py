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
from django.utils import timezone

from jobs.registry import JobFailed, handler

from . import storage
from .core import capture as core
from .models import Capture, Report

TUSK = settings.BASE_DIR / "bin" / "tusk"
ANALYZE_MEMORY = 1 << 30      # bytes of address space for one analysis
ANALYZE_TIMEOUT = 1800        # seconds
ANALYZE_USER = "nobody"
ACTIVE = (Capture.State.QUEUED, Capture.State.RUNNING)

log = logging.getLogger("tusk.agent")


def share(path, directory):
    """A finished file: readable by the web user (the capture directory's group)."""
    try:
        os.chown(path, -1, os.stat(directory).st_gid)
        os.chmod(path, 0o640)
    except OSError:
        pass


def _finish(cap, **fields):
    Capture.objects.filter(pk=cap.pk).update(finished_at=timezone.now(), **fields)


def capture_abandoned(job, config):
    """At agent start, for a capture job its dead predecessor was running: the capture
    failed, and what it wrote is kept (dumpcap closed the file when the agent died)."""
    for cap in Capture.objects.filter(job=job, state__in=ACTIVE):
        files = [f for path in cap.files for f in core.files_of(path)]
        for name in files:
            share(name, config.capture_dir)
        _finish(cap, state=Capture.State.FAILED, reason="error", files=files,
                bytes=sum(os.path.getsize(f) for f in files),
                error="the agent stopped during this capture"
                      + ("; the file holds what was captured until then" if files else ""))


@handler("diag.capture", "Packet capture", long_running=True, abandoned=capture_abandoned)
def capture(run):
    cap = Capture.objects.get(pk=run.args["capture"])
    try:
        return _capture(run, cap)
    finally:   # a crash must not leave the row running for ever
        Capture.objects.filter(pk=cap.pk, state__in=ACTIVE).update(
            state=Capture.State.FAILED, reason="error", finished_at=timezone.now(),
            error="the capture job crashed: see its job page")


def _capture(run, cap):
    config = run.config
    try:
        spec = core.validate(core.Spec.from_dict(cap.spec))
    except (core.SpecError, TypeError) as exc:
        _finish(cap, state=Capture.State.FAILED, reason="error", error=str(exc))
        raise JobFailed(f"capture {cap.pk}: {exc}")
    if cap.stop_requested:   # stopped while it waited for a slot
        _finish(cap, state=Capture.State.DONE, reason="request")
        return {"capture": cap.pk, "packets": 0, "bytes": 0, "reason": "request", "files": 0,
                "deleted": []}
    directory = config.capture_dir
    os.makedirs(directory, exist_ok=True)
    quota = config.capture_quota_mb * 1_000_000
    deleted, fits = storage.make_room(quota, spec.max_bytes, exclude=cap.pk)
    if not fits:
        error = (f"the storage quota ({config.capture_quota_mb} MB) is held by running "
                 f"captures: this one may need {spec.max_mb} MB - wait for them or stop one")
        _finish(cap, state=Capture.State.FAILED, reason="error", error=error)
        raise JobFailed(f"capture {cap.pk}: {error}")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(directory, f"capture-{cap.pk}-{stamp}.{spec.format}")
    started = timezone.now()
    Capture.objects.filter(pk=cap.pk).update(state=Capture.State.RUNNING, files=[path],
                                             started_at=started)

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
    _finish(cap, state=Capture.State.FAILED if failed else Capture.State.DONE,
            reason=result.reason, error=result.error, files=result.files,
            packets=result.packets, bytes=result.bytes)
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


# What the analysis needs, tried as the unprivileged user before it is run as that user
PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); import diag.cli; "
         "[open(f, 'rb').close() for f in sys.argv[2:]]")


def _analysis_ids(files):
    """(uid, gid) to analyse as, or (None, why not). The user is `nobody`; the group
    is the capture directory's (that is how nobody may read the files, and it grants
    no more than the web user's group already has). Root is kept - with the memory
    limit still - only when that user cannot run this interpreter, import the
    analyser or read the files: e.g. a development checkout with Python under /root."""
    if os.geteuid() != 0:
        return None, "the agent is not root"
    try:
        uid = pwd.getpwnam(ANALYZE_USER).pw_uid
    except KeyError:
        return None, f"there is no user {ANALYZE_USER}"
    ids = (uid, os.stat(files[0]).st_gid)
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE, str(settings.BASE_DIR), *files],
                               capture_output=True, text=True, timeout=60,
                               preexec_fn=_limits(ids), cwd="/")
    except subprocess.TimeoutExpired:
        return None, f"a trial run as {ANALYZE_USER} did not finish"
    except OSError as exc:   # exec refused: the interpreter is out of its reach
        return None, f"as {ANALYZE_USER}: {sys.executable}: {exc.strerror}"
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return None, f"as {ANALYZE_USER}: {lines[-1] if lines else probe.returncode}"
    return ids, ""


@handler("diag.analyze", "Analyse a capture", retry_safe=True, long_running=True)
def analyze(run):
    cap = Capture.objects.get(pk=run.args["capture"])
    files = cap.existing_files()
    if not files:
        raise JobFailed(f"capture {cap.pk} has no file left to analyse (deleted by the quota?)")
    run.progress(5, f"analysing {len(files)} file(s)")
    ids, why = _analysis_ids(files)
    if ids is None:
        log.warning("job %s: analysing as the agent's user: %s", run.job.pk, why)
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
    return {"report": report.pk, "flows": len(result["flows"]), "packets": result["packets"],
            "user": ANALYZE_USER if ids else f"the agent's ({why})"}

