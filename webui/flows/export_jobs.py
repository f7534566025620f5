"""Flow export in the agent, as root (imported by agent_jobs.py). Nothing here takes a
path or a value from a row unchecked: the settings row goes through core/export.py's
check - the page's and the API's - before anything of it is used; the exporter's files
are in a directory derived from the configuration (export.directory), root's only, and
the exporter reads its file through the same check again.

flows.export.start  at agent start: an exporter a dead agent left behind stopped, and
                    the exporter started when the settings name collectors.
flows.export        every few seconds: the exporter started again if it died; its
                    status (what it sent, what it lost) for the page and the API.
flows.export.apply  the job the page and the API queue: the row checked again (refused:
                    the job fails naming the field and nothing changes), the file
                    written and the exporter restarted on it - or stopped, when no
                    collector is left. The old exporter sends what moved since its last
                    records before it ends (SIGTERM), the new one starts from there.
"""
import json
import os
import signal
import subprocess
import sys
import threading

from jobs.registry import JobFailed, handler, on_start, periodic
from tusklib import children
from tusklib.files import write_atomically

from .contracts import Exporting
from .core import export
from .models import FlowExportSettings

START, WATCH, APPLY = "flows.export.start", "flows.export", "flows.export.apply"
WATCH_SECONDS = 5
START_SECONDS = 1.0          # an exporter alive this long has taken its file
EXPORTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin",
                        "tusk-flowexport")

_lock = threading.Lock()
_running = {"proc": None}


def _checked():
    """The settings row, checked as the page checks it; export.ExportError if refused."""
    document = FlowExportSettings.objects.filter(pk=1).values_list("document",
                                                                   flat=True).first()
    return export.check({} if document is None else document)


def _files(config):
    directory = export.directory(config)
    export.prepare(directory)
    return (os.path.join(directory, export.CONF), os.path.join(directory, export.STATUS),
            os.path.join(directory, export.PID))


def _stop(config):
    proc = _running["proc"]
    if proc is not None:
        children.stop(proc, grace=30)      # it sends what moved since its last records
        _running["proc"] = None
    export.stop_leftover(export.directory(config), EXPORTER)


def _start(config, settings):
    """The exporter on settings (checked), as a child that dies with the agent;
    JobFailed with what it said if it exits at once."""
    conf, status, pid = _files(config)
    write_atomically(conf, export.render(settings), 0o600, owner=(0, 0))
    argv = [sys.executable, EXPORTER, conf, status]
    if config.netns:
        argv = ["ip", "netns", "exec", config.netns, *argv]
    errors = os.path.join(export.directory(config), export.ERRORS)
    with open(errors, "wb") as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=stderr, cwd="/", preexec_fn=children.end_with_parent(
                                    os.getpid(), signal.SIGTERM))
    write_atomically(pid, f"{proc.pid}\n", 0o600, owner=(0, 0))
    try:
        proc.wait(START_SECONDS)
    except subprocess.TimeoutExpired:
        _running["proc"] = proc
        return
    with open(errors, "rb") as said:
        text = said.read(2000).decode(errors="replace").strip()
    raise JobFailed(f"tusk-flowexport exited with status {proc.returncode}: {text}")


def _make(config, settings):
    """The exporter as settings say (with _lock held): the same file and running -
    nothing to do; else restarted on the new one, or stopped."""
    conf, _, _ = _files(config)
    wanted = export.render(settings) if settings.enabled else None
    try:
        with open(conf, encoding="utf-8") as handle:
            written = handle.read()
    except FileNotFoundError:
        written = None
    proc = _running["proc"]
    if wanted is not None and wanted == written and proc is not None and proc.poll() is None:
        return
    _stop(config)
    if wanted is None:
        export.clear(export.directory(config))
        return
    _start(config, settings)


def _report(config, refused=""):
    """What the running exporter says of itself (its status file: the settings it runs
    on, what it sent), with the agent's word on the process."""
    proc = _running["proc"]
    running = proc is not None and proc.poll() is None
    found = {}
    if running:
        try:
            with open(os.path.join(export.directory(config), export.STATUS),
                      encoding="utf-8") as handle:
                found = json.loads(handle.read(256 * 1024))
        except (OSError, ValueError):
            found = {}
    default = export.Settings()
    return {"running": running, "pid": proc.pid if running else None,
            "protocol": str(found.get("protocol", default.protocol)),
            "active_timeout": int(found.get("active_timeout", default.active_timeout)),
            "collectors": [str(c) for c in found.get("collectors", [])],
            "records": int(found.get("records", 0)), "messages": int(found.get("messages", 0)),
            "send_errors": {str(k): int(v) for k, v in found.get("send_errors", {}).items()},
            "last_error": str(found.get("last_error", "")),
            "lost_events": int(found.get("lost_events", 0)),
            "tracked": int(found.get("tracked", 0)),
            "sweep_seconds": float(found.get("sweep_seconds", 0.0)), "refused": refused}


@on_start(START, contract=Exporting)
def start(agent):
    try:
        settings, refused = _checked(), ""
    except export.ExportError as exc:
        settings, refused = export.Settings(), f"the flow export settings were refused: {exc}"
    with _lock:
        try:
            _make(agent.config, settings)     # stops what a dead agent left running
        except JobFailed as exc:
            refused = str(exc)
        return _report(agent.config, refused)


@periodic(WATCH, WATCH_SECONDS, contract=Exporting)
def watch(agent):
    """The exporter again if it died; its status."""
    with _lock:
        proc = _running["proc"]
        if proc is not None and proc.poll() is not None:
            _running["proc"] = None
            try:
                _make(agent.config, _checked())
            except export.ExportError as exc:
                return _report(agent.config, f"the flow export settings were refused: {exc}")
        return _report(agent.config)


@handler(APPLY, "Apply the flow export settings")
def apply(run):
    if run.args not in ({}, None):
        raise JobFailed("flows.export.apply takes no arguments (the settings are read from "
                        "their row and checked again); nothing changed")
    try:
        settings = _checked()
    except export.ExportError as exc:
        raise JobFailed(f"{exc}\nnothing changed") from None
    run.progress(30, "exporting" if settings.enabled else "no collector: no export")
    with _lock:
        _make(run.config, settings)
        return _report(run.config)
