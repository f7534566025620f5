"""The agent's diagnostics jobs.

diag.capture runs dumpcap (diag/core/capture.py) in the agent's target (the lab's
namespace with --netns) on the agent's pool for long-running jobs, so captures never
hold the workers policy and tuning jobs need. Before it starts, the oldest finished
captures are deleted until this one's byte limit fits the quota. dumpcap writes into the
agent's root-only spool; the finished files are moved into the capture directory, which
the web user can write, under names from the capture's id (diag/files.py).

diag.analyze runs `tusk diag analyze --json` on the capture's files, which the agent
opens and hands over as descriptors, in a sandbox: bubblewrap (bwrap), which shows it
nothing of the host's files but the interpreter and Tusk's code, read-only, no network,
user tusk-analyze with no other group, no capability, no new privileges, memory, CPU
and file limits and a timeout - it parses untrusted input (uploads). When the sandbox
cannot run, the job fails saying why; it never runs unsandboxed or as root instead. The
report is kept in Report.result.
"""
import os
import pwd
import resource
import subprocess
import sys

from django.conf import settings
from django.utils import timezone

from jobs.registry import JobFailed, handler
from tusklib import children

from . import files, storage
from .core import capture as core
from .models import Capture, Report

TUSK = settings.BASE_DIR / "bin" / "tusk"
ANALYZE_MEMORY = 1 << 30      # bytes of address space for one analysis
ANALYZE_TIMEOUT = 1800        # seconds
ANALYZE_USER = "tusk-analyze"
ANALYZE_LIMITS = {resource.RLIMIT_AS: ANALYZE_MEMORY, resource.RLIMIT_CPU: ANALYZE_TIMEOUT,
                  resource.RLIMIT_NOFILE: 64, resource.RLIMIT_FSIZE: 0}   # writes no file
ACTIVE = (Capture.State.QUEUED, Capture.State.RUNNING)
BWRAP, SETPRIV = children.BWRAP, children.SETPRIV   # the sandbox's tools (see sandboxed)


def _spool_path(config, pk, fmt):
    return os.path.join(config.capture_spool_dir, files.capture_name(pk, fmt))


def _publish(config, pk, spooled):
    """Moves dumpcap's files of capture pk (spool paths, oldest first) into the capture
    directory: capture-<pk>.<fmt>, or ring files capture-<pk>-<n>.<fmt>. UnsafeFile
    when a name there is taken (nothing is moved then)."""
    moves = []
    for number, path in enumerate(spooled, 1):
        name = os.path.basename(path)
        fmt = name.rsplit(".", 1)[1]
        single = name == files.capture_name(pk, fmt)
        moves.append((name, files.capture_name(pk, fmt, None if single else number)))
    with files.Directory(config.capture_dir) as shared, \
            files.spool(config.capture_spool_dir, shared) as source:
        return files.publish(source, shared, moves)


def _finish(cap, **fields):
    Capture.objects.filter(pk=cap.pk).update(finished_at=timezone.now(), **fields)


def capture_abandoned(job, config):
    """At agent start, for a capture job its dead predecessor was running: the capture
    failed, and what it wrote is kept (dumpcap closed the file when the agent died).
    Only the spool's files of the capture's id are looked at, never a path of the row."""
    for cap in Capture.objects.filter(job=job, state__in=ACTIVE):
        spooled = [f for fmt in files.FORMATS
                   for f in core.files_of(_spool_path(config, cap.pk, fmt))]
        size, error = core.size_of(spooled), "the agent stopped during this capture"
        try:
            kept = _publish(config, cap.pk, spooled) if spooled else []
        except files.UnsafeFile as exc:
            kept, error = [], f"{error}; {exc}"
        _finish(cap, state=Capture.State.FAILED, reason="error", bytes=size if kept else 0,
                error=error + ("; the file holds what was captured until then" if kept else ""))


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
        raise JobFailed(f"capture {cap.pk}: {exc}") from None
    if cap.stop_requested:   # stopped while it waited for a slot
        _finish(cap, state=Capture.State.DONE, reason="request")
        return {"capture": cap.pk, "packets": 0, "bytes": 0, "reason": "request", "files": 0,
                "deleted": []}
    try:   # both usable before anything is deleted or captured
        with files.Directory(config.capture_dir) as shared, \
                files.spool(config.capture_spool_dir, shared):
            pass
    except files.UnsafeFile as exc:
        _finish(cap, state=Capture.State.FAILED, reason="error", error=str(exc))
        raise JobFailed(f"capture {cap.pk}: {exc}") from None
    quota = config.capture_quota_mb * 1_000_000
    deleted, fits = storage.make_room(config.capture_dir, quota, spec.max_bytes,
                                      exclude=cap.pk)
    if not fits:
        error = (f"the storage quota ({config.capture_quota_mb} MB) is held by running "
                 f"captures: this one may need {spec.max_mb} MB - wait for them or stop one")
        _finish(cap, state=Capture.State.FAILED, reason="error", error=error)
        raise JobFailed(f"capture {cap.pk}: {error}")
    started = timezone.now()
    Capture.objects.filter(pk=cap.pk).update(state=Capture.State.RUNNING, started_at=started)

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
    result = core.run(spec, _spool_path(config, cap.pk, spec.format),
                      netns=config.netns or None, progress=progress, should_stop=should_stop)
    try:
        kept = _publish(config, cap.pk, result.files)
    except files.UnsafeFile as exc:
        kept, result.reason = [], "error"
        result.error = "; ".join(filter(None, (result.error, str(exc))))
    failed = result.reason == "error"
    _finish(cap, state=Capture.State.FAILED if failed else Capture.State.DONE,
            reason=result.reason, error=result.error, packets=result.packets,
            bytes=result.bytes if kept else 0)
    if failed:
        raise JobFailed(f"capture {cap.pk}: {result.error}")
    return {"capture": cap.pk, "packets": result.packets, "bytes": result.bytes,
            "reason": result.reason, "files": len(kept), "deleted": deleted}


def sandboxed(config, argv, pass_fds=(), timeout=ANALYZE_TIMEOUT):
    """`python -B argv...` in the analysis sandbox (tusklib.children.sandbox: bubblewrap,
    started by root, in which setpriv becomes ANALYZE_USER) under the limits of
    children.confined: what it printed, parsed as JSON (children.run_json, which raises
    ChildFailed and TimeoutExpired); the descriptors pass_fds are inherited, and nothing
    of the host's files is there but the interpreter and Tusk's code, read-only.
    JobFailed naming what is missing when the sandbox cannot run: there is no fallback,
    neither unsandboxed nor as root."""
    python = children.interpreter(config.analysis_python or sys.executable)
    if os.geteuid() != 0:
        raise JobFailed(f"the analysis runs only as user {ANALYZE_USER}, which needs the "
                        "agent to run as root")
    try:
        user = pwd.getpwnam(ANALYZE_USER)
    except KeyError:
        raise JobFailed(f"there is no user {ANALYZE_USER}: the analysis runs only as that "
                        "user (the image has it; tools/tusk-lab creates it)") from None
    for tool, package in ((BWRAP, "bubblewrap (Debian package bubblewrap; the image "
                                  "selects BR2_PACKAGE_BUBBLEWRAP)"),
                          (SETPRIV, "setpriv (util-linux: Debian's util-linux; the image "
                                    "selects BR2_PACKAGE_UTIL_LINUX_SETPRIV)")):
        if not os.access(tool, os.X_OK):
            raise JobFailed(f"the analysis runs only in its sandbox, and there is no "
                            f"{tool}: install {package}")
    status, report = os.pipe()     # bwrap's --json-status-fd: was the sandbox set up?
    try:
        call = children.sandbox([python, "-B", *argv], user.pw_uid, user.pw_gid,
                                [*children.interpreter_paths(python), str(settings.BASE_DIR)],
                                report, bwrap=BWRAP, setpriv=SETPRIV)
    except ValueError as exc:
        os.close(status)
        os.close(report)
        raise JobFailed(f"analysis_python {python}: {exc}") from None
    try:
        return children.run_json(call, timeout, pass_fds=[*pass_fds, report], cwd="/",
                                 env={"PATH": "/usr/bin:/bin"},
                                 preexec_fn=children.confined(ANALYZE_LIMITS))
    except children.ChildFailed as exc:
        os.close(report)
        report = None
        _sandbox_failed(python, exc, _read_all(status))
        raise
    except subprocess.TimeoutExpired:
        raise
    except OSError as exc:   # bwrap itself could not be started
        raise JobFailed(f"the analysis sandbox (bwrap) could not be started: {exc}: nothing "
                        "ran") from None
    except subprocess.SubprocessError as exc:   # confined() failed
        raise JobFailed(f"the analysis sandbox could not be set up ({exc}): nothing ran") \
            from None
    finally:
        os.close(status)
        if report is not None:
            os.close(report)


def _read_all(fd):
    """What is waiting in the pipe fd, without waiting (its writers are gone)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode(errors="replace")


def _sandbox_failed(python, exc, status):
    """JobFailed when the analysis never ran: bwrap reported no "exit-code" (it stopped
    before starting setpriv: what it printed says why), or setpriv could not run the
    interpreter as ANALYZE_USER (exit status 126 or 127 and its message)."""
    stderr = exc.stderr.strip()
    if '"exit-code"' not in status:
        raise JobFailed(f"the analysis sandbox (bwrap) could not be set up: "
                        f"{stderr or exc.reason}: nothing ran") from None
    if exc.status in (126, 127) and stderr.startswith("setpriv: failed to execute"):
        raise JobFailed(f"user {ANALYZE_USER} cannot run {python}: "
                        f"{stderr.rsplit(': ', 1)[-1]} - the analysis runs only as that user, "
                        "never as root: let it reach the interpreter (tools/tusk-lab grants "
                        "search permission on the way)") from None
    if stderr.startswith("setpriv: "):
        raise JobFailed(f"the analysis sandbox could not become user {ANALYZE_USER}: "
                        f"{stderr}: nothing ran") from None


@handler("diag.analyze", "Analyse a capture", retry_safe=True, long_running=True)
def analyze(run):
    cap = Capture.objects.get(pk=run.args["capture"])
    opened = []
    try:
        with files.Directory(run.config.capture_dir) as shared:
            for name in shared.names(cap.pk):
                opened.append((shared.open(name), name))
        if not opened:
            raise JobFailed(f"capture {cap.pk} has no file left to analyse in "
                            f"{run.config.capture_dir} (deleted by the quota?)")
        run.progress(5, f"analysing {len(opened)} file(s)")
        return _analyze(run, cap, opened)
    except files.UnsafeFile as exc:
        raise JobFailed(f"capture {cap.pk}: {exc}: not analysed") from None
    finally:
        for fd, _ in opened:
            os.close(fd)


def _analyze(run, cap, opened):
    call = [str(TUSK), "diag", "analyze", "--json"]
    for fd, name in opened:
        call += ["--fd", f"{fd}={name}"]
    error, result = "", None
    try:
        result = sandboxed(run.config, call, pass_fds=[fd for fd, _ in opened])
    except subprocess.TimeoutExpired:
        error = f"the analysis did not finish in {ANALYZE_TIMEOUT} s and was stopped"
    except children.ChildFailed as exc:
        if exc.status == 0:
            error = "the analyser printed no report"
        elif exc.status < 0 or exc.status > 128 or "MemoryError" in exc.stderr:
            # bwrap reports a child killed by signal n as status 128 + n, as a shell does
            error = (f"the analysis ran out of its {ANALYZE_MEMORY >> 20} MiB or CPU time, or "
                     f"was killed (status {exc.status})")
        else:
            error = exc.stderr.strip() or f"the analyser {exc.reason}"
    report = Report.objects.create(capture=cap, job=run.job, result=result, error=error)
    if error:
        raise JobFailed(error)
    return {"report": report.pk, "flows": len(result["flows"]), "packets": result["packets"],
            "user": ANALYZE_USER}
