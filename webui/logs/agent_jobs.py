"""The agent's half of the Logs page, as root. Nothing here takes a path or a value from
a row unchecked: the settings row goes through core/settings.py's check (the forms')
before anything of it is used, and every path comes from the configuration
(core/paths.py).

logs.start      at agent start: the log directory made as it must be (core/storage.py),
                an rsyslogd a dead agent left behind stopped, and the forwarder started
                when the settings name receivers.
logs.keep       every sample_interval: the log's bound (storage.keep) with the settings'
                files x MB. A row the check refuses is not used - the defaults bound the
                log meanwhile, and the result says why. Whatever the agent removes from
                the log directory (nothing but root can put anything there) is audited.
logs.forwarder  every few seconds: rsyslogd started again if it died.
logs.apply      the job the settings forms queue: the row checked again (refused: the job
                fails naming the field and nothing changes), the new bound kept at once,
                the forwarder's configuration written from the checked settings and
                rsyslogd restarted - or stopped, with its positions forgotten, when no
                receiver is left."""
import grp
import os
import threading

from accounts.models import AuditEntry
from jobs.registry import JobFailed, handler, on_start, periodic

from .contracts import Forwarding, Kept
from .core import forwarder, paths, storage
from .core.constants import (
    APPLY_JOB,
    FORWARDER_CHECK_SECONDS,
    FORWARDER_TASK,
    KEEP_TASK,
    START_TASK,
)
from .core.settings import Settings, SettingsError, check
from .models import LogSettings

WEB_GROUP = "tusk"   # the web user's group: it may read the log files

_lock = threading.Lock()
_forwarder = {"proc": None, "targets": []}


def _checked():
    """The settings row, checked as the forms check it; SettingsError if refused."""
    document = LogSettings.objects.filter(pk=1).values_list("document", flat=True).first()
    return check({} if document is None else document)


def _audit_removed(removed, log_dir):
    for name in removed:
        AuditEntry.objects.create(username="agent", action="log file removed",
                                  target=name[:255], detail={"directory": log_dir,
                                                             "why": "not a log file"})


def _forward(config, settings):
    """Makes the forwarder what settings say (with _lock held): the same configuration
    and running - nothing to do; else rsyslogd restarted on the new one, or stopped."""
    work = paths.syslog_dir(config)
    forwarder.prepare(work)
    conf = os.path.join(work, forwarder.CONF)
    wanted = forwarder.render(settings, paths.log_dir(config), work) if settings.syslog else None
    try:
        with open(conf, encoding="utf-8") as handle:
            written = handle.read()
    except FileNotFoundError:
        written = None
    proc = _forwarder["proc"]
    if wanted is not None and wanted == written and proc is not None and proc.poll() is None:
        return
    if wanted is not None:
        forwarder.write(settings, paths.log_dir(config), work)   # checked before the stop
    if proc is not None:
        forwarder.stop(proc)
        _forwarder["proc"] = None
    forwarder.stop_leftover(work)
    _forwarder["targets"] = []
    if wanted is None:
        forwarder.clear(work)
        return
    _forwarder["proc"] = forwarder.start(work, config.netns or None)
    _forwarder["targets"] = [str(target) for target in settings.syslog]


def _forwarding():
    proc = _forwarder["proc"]
    running = proc is not None and proc.poll() is None
    return {"running": running, "pid": proc.pid if running else None,
            "targets": _forwarder["targets"] if running else []}


@on_start(START_TASK, contract=Forwarding)
def start(agent):
    config = agent.config
    logs, removed = storage.prepare(paths.log_dir(config), grp.getgrnam(WEB_GROUP).gr_gid)
    os.close(logs.fd)
    _audit_removed(removed, paths.log_dir(config))
    try:
        settings, refused = _checked(), ""
    except SettingsError as exc:
        settings, refused = Settings(), f"the log settings were refused: {exc}"
    with _lock:
        _forward(config, settings)
        return {**_forwarding(), "refused": refused}


@periodic(KEEP_TASK, lambda config: config.sample_interval, contract=Kept)
def keep(agent):
    try:
        settings, refused = _checked(), ""
    except SettingsError as exc:
        settings, refused = Settings(), (f"the log settings were refused, the defaults bound "
                                         f"the log: {exc}")
    log_dir = paths.log_dir(agent.config)
    kept = storage.keep(log_dir, grp.getgrnam(WEB_GROUP).gr_gid, settings.files,
                        settings.file_bytes)
    _audit_removed(kept.removed, log_dir)
    return {"total": kept.total, "rotated": kept.rotated, "deleted": list(kept.deleted),
            "removed": list(kept.removed), "writers": list(kept.writers),
            "files": settings.files, "file_mb": settings.file_mb, "refused": refused}


@periodic(FORWARDER_TASK, FORWARDER_CHECK_SECONDS, contract=Forwarding)
def watch_forwarder(agent):
    """rsyslogd again if it died; an error (the Jobs page, the Logs page) if it cannot."""
    with _lock:
        proc = _forwarder["proc"]
        if proc is not None and proc.poll() is not None:
            _forwarder["proc"] = None
            _forward(agent.config, _checked())
        return _forwarding()


@handler(APPLY_JOB, "Apply the log settings")
def apply(run):
    if run.args not in ({}, None):
        raise JobFailed("logs.apply takes no arguments (the settings are read from their "
                        "row and checked again); nothing changed")
    try:
        settings = _checked()
    except SettingsError as exc:
        raise JobFailed(f"{exc}\nnothing changed") from None
    log_dir = paths.log_dir(run.config)
    run.progress(20, "keeping the log within its bound")
    kept = storage.keep(log_dir, grp.getgrnam(WEB_GROUP).gr_gid, settings.files,
                        settings.file_bytes)
    _audit_removed(kept.removed, log_dir)
    run.progress(50, "forwarding" if settings.syslog else "no remote syslog")
    with _lock:
        try:
            _forward(run.config, settings)
        except forwarder.ForwarderError as exc:
            raise JobFailed(str(exc)) from None
        forwarding = _forwarding()
    return {"files": settings.files, "file_mb": settings.file_mb, "total": kept.total,
            **forwarding}
