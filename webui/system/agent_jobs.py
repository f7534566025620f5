"""The agent's half of the System page: the console password file, which only root may
write; the update bundles it installs into the other system slot; the reboot; and the
slots' view the page shows (slots.json), kept up to date with GRUB's environment. The job
row is untrusted: its arguments are checked again with the forms' own checks, and every
file's path comes from the agent's configuration and the job's id, never from the row."""
import hashlib
import os
import stat
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime

from accounts.models import AuditEntry
from appliance import consolepw, slots
from diag.files import Directory, UnsafeFile
from jobs.registry import JobFailed, handler, periodic
from tusklib.files import write_atomically

from . import bundles


def _safe_directory(directory):
    """Root's own, writable by no one else: nothing there is a link someone else planted."""
    try:
        info = os.stat(directory)
    except OSError as error:
        raise JobFailed(f"{directory}: {error.strerror}; nothing changed") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise JobFailed(f"{directory} is not a directory only root may write; nothing changed")


@handler("system.console_password", "Set the console password")
def console_password(run):
    value = run.args.get("hash") if isinstance(run.args, dict) else None
    problem = consolepw.argument_problem(value)
    if problem:
        raise JobFailed(f"hash: {problem}; nothing changed")
    path = consolepw.path_beside(run.config.path)
    _safe_directory(os.path.dirname(path))
    try:
        if value == consolepw.CLEAR:
            if os.path.lexists(path):
                os.unlink(path)
        else:
            write_atomically(path, value + "\n", 0o600, owner=(0, 0))
    except OSError as error:
        raise JobFailed(f"{path}: {error.strerror}; nothing changed") from None
    action = "console password cleared" if value == consolepw.CLEAR else "console password set"
    AuditEntry.objects.create(username=run.user, action=action, target="console",
                              detail={"job": run.job.pk})
    return {"set": value != consolepw.CLEAR}


# -- upgrades (docs/UPGRADES.md) ---------------------------------------------------------

# A lab or a developer's host (make run, the tests) has no slots: the agent there never
# installs a system nor reboots the machine it runs on.
NO_SLOT = "this system did not boot from a system slot (the live system, a lab or a " \
          "development host)"

def _spool(path):
    """The agent's own directory for the bundle it works on: created root-only, refused
    if anyone else owns it (nothing in it may be a planted link)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise JobFailed(f"upgrade_spool_dir {path} is not the agent's own directory; nothing "
                        "was written")
    os.chmod(path, 0o700)
    return path


def _take(run, name, limit):
    """The upload of this job, copied from the web user's directory into the spool
    -> the copy's path. The upload itself is removed either way."""
    with Directory(run.config.upgrade_dir) as shared:
        try:
            source = shared.open(name)
        except UnsafeFile as error:
            raise JobFailed(f"the upload is not there as the web process left it ({error}); "
                            "nothing was written") from None
        copy = os.path.join(_spool(run.config.upgrade_spool_dir), name)
        try:
            if os.path.lexists(copy):
                os.unlink(copy)
            target = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            size = 0
            with os.fdopen(source, "rb") as reader, os.fdopen(target, "wb") as writer:
                while chunk := reader.read(1 << 20):
                    size += len(chunk)
                    if size > limit:
                        raise JobFailed(f"the upload is larger than {limit // 1_000_000} MB; "
                                        "nothing was written")
                    writer.write(chunk)
                writer.flush()
                os.fsync(writer.fileno())
        except BaseException:
            if os.path.lexists(copy):
                os.unlink(copy)
            raise
        finally:
            shared.delete_name(name)
    return copy


@handler("system.upgrade", "Install an update bundle into the other system slot")
def upgrade(run):
    args = run.args if isinstance(run.args, dict) else {}
    problem = bundles.name_problem(args.get("name"))
    if problem:
        raise JobFailed(f"name: {problem}; nothing was written")
    run.progress(1, "taking the upload")
    copy = _take(run, bundles.upload_name(run.job.pk), run.config.bundle_max_mb * 1_000_000)
    try:
        run.progress(5, "checking the signature and the compatible")
        try:
            info = bundles.check(copy, run.config.rauc_conf)
            if slots.booted_slot() is None:
                raise bundles.BundleRefused(NO_SLOT)
            run.progress(10, f"installing release {info['version']} into the other slot")
            bundles.install(copy, lambda percent, line: run.progress(10 + percent * 88 // 100,
                                                                     line))
        except bundles.BundleRefused as refused:
            raise JobFailed(f"{refused}; the running system is unchanged") from None
    finally:
        os.unlink(copy)
    status = slots.write_status(run.config.system_state_dir)
    AuditEntry.objects.create(username=run.user, action="system upgrade installed",
                              target=f"slot {status.get('next') or '?'}",
                              detail={"job": run.job.pk, "name": args["name"], **info})
    return {"version": info["version"], "slot": status.get("next"),
            "message": f"release {info['version']} is installed in slot "
                       f"{status.get('next') or '?'}: reboot to try it"}


@handler("system.reboot", "Reboot the box")
def reboot(run):
    if run.args not in ({}, None):
        raise JobFailed("this job takes no arguments; nothing done")
    if slots.booted_slot() is None:
        raise JobFailed(f"{NO_SLOT}: not rebooted")
    AuditEntry.objects.create(username=run.user, action="system reboot", target="box",
                              detail={"job": run.job.pk})
    # in a few seconds, so that this job is reported done before the agent stops
    result = subprocess.run(["systemd-run", "--on-active=5", "--timer-property=AccuracySec=1s",
                             "/usr/bin/systemctl", "reboot"], capture_output=True, text=True)
    if result.returncode != 0:
        raise JobFailed(f"systemd-run: {result.stderr.strip() or result.returncode}")
    return {"message": "the box reboots in 5 seconds"}


SLOTS_TASK = "system.slots"


@dataclass(frozen=True)
class SlotsSeen:
    """system.slots: the start of the digest of GRUB's environment last seen (None: no
    system slot booted, or no environment to read)."""

    grubenv: str


_grubenv_seen = {}


@periodic(SLOTS_TASK, lambda config: max(5.0, config.sample_interval * 5),
          contract=SlotsSeen | None)
def refresh_slots(agent):
    """slots.json written again whenever GRUB's environment changed - `rauc install` from
    the console's shell, the console's "boot the other slot once", RAUC marking a slot -
    so that the System page, which reads only that file, shows the slot that boots next
    and offers the reboot into it. Compared by content: the ESP's FAT keeps times to two
    seconds, and GRUB's environment block never changes size."""
    if slots.booted_slot() is None:
        return None
    try:
        with open(slots.GRUBENV, "rb") as handle:
            digest = hashlib.sha256(handle.read(1 << 16)).hexdigest()
    except OSError:
        return None
    if _grubenv_seen.get(agent.config.system_state_dir) != digest:
        slots.write_status(agent.config.system_state_dir)
        _grubenv_seen[agent.config.system_state_dir] = digest
    return {"grubenv": digest[:16]}


CERTIFICATE_TASK = "system.certificate"


@dataclass(frozen=True)
class CertificateSeen:
    """system.certificate: when the certificate nginx serves ([agent] tls_certificate)
    expires, as openssl read it (seconds since the epoch), or why it could not be read."""

    path: str
    not_after: float | None
    error: str | None = None


def not_after(text):
    """openssl x509 -enddate's `notAfter=Nov  3 19:02:03 2027 GMT` -> seconds since the
    epoch, or ValueError."""
    label, _, value = text.strip().partition("=")
    if label != "notAfter":
        raise ValueError(f"not an end date: {text.strip()[:80]!r}")
    moment = datetime.strptime(" ".join(value.split()), "%b %d %H:%M:%S %Y %Z")
    return moment.replace(tzinfo=UTC).timestamp()


_certificates_seen = {}      # path -> ((device, inode, size, mtime), what openssl read)


@periodic(CERTIFICATE_TASK, lambda config: max(5.0, config.sample_interval * 5),
          contract=CertificateSeen | None)
def certificate(agent):
    """The TLS certificate's end date for /metrics (tusk_certificate_expiry_timestamp_
    seconds) and the shipped alert rule; None when the box names no certificate. Read by
    openssl from root's path in tusk.toml, never from a row - again only when the file
    changed (a renewed certificate shows within a run)."""
    path = agent.config.tls_certificate
    if not path:
        return None
    try:
        info = os.stat(path)
    except OSError as error:
        return {"path": path, "not_after": None, "error": f"{path}: {error.strerror}"}
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    seen = _certificates_seen.get(path)
    if seen is not None and seen[0] == key:
        return seen[1]
    result = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", path],
                            capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["openssl failed"])[-1][:200]
        found = {"path": path, "not_after": None, "error": reason}
    else:
        try:
            found = {"path": path, "not_after": not_after(result.stdout)}
        except ValueError as error:
            found = {"path": path, "not_after": None, "error": str(error)}
    _certificates_seen[path] = (key, found)
    return found
