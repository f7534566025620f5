"""The System page's operations, called by the page and the API alike (docs/UPGRADES.md):
what the slots, the health check and the last upgrades say; an update bundle received
into upgrade_dir and queued for the agent (system.upgrade checks it with RAUC and
installs it into the other slot); the reboot into it. The slot is marked good by the
box's own health check after that boot, never by a caller: the check is what makes an
upgrade undo itself. Refusals are a ServiceError (CONFLICT: an upgrade or a reboot is
under way; TOO_LARGE is BundleTooLarge)."""
import json
import os
import secrets

from django.conf import settings
from django.db import transaction

from accounts import audit
from commitkit.services import Queued
from diag.files import Directory, UnsafeFile
from jobs import queue
from jobs.models import Job
from tusklib.problems import Refusal, ServiceError

from . import bundles

UPGRADE, REBOOT = "system.upgrade", "system.reboot"
ACTIVE = (Job.State.QUEUED, Job.State.RUNNING)
EVENTS_SHOWN = 10
CHUNK = 1 << 20


class BundleTooLarge(Exception):
    """More than [web] bundle_max_mb: nothing was kept."""

    def __init__(self):
        super().__init__(f"more than the {settings.TUSK.bundle_max_mb} MB a bundle may have")


def state_file(name):
    """A JSON file of system_state_dir (slots.json, health.json), or None."""
    try:
        with open(os.path.join(settings.TUSK.system_state_dir, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def events():
    """The last EVENTS_SHOWN upgrade events (appliance/slots.py writes them), newest first."""
    try:
        with open(os.path.join(settings.TUSK.system_state_dir, "events.jsonl"),
                  encoding="utf-8") as handle:
            lines = handle.readlines()[-EVENTS_SHOWN:]
    except OSError:
        return []
    found = []
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def upgrading():
    """The upgrade or reboot under way, or None."""
    return Job.objects.filter(kind__in=(UPGRADE, REBOOT), state__in=ACTIVE).first()


def last_upgrade():
    return Job.objects.filter(kind=UPGRADE).order_by("-pk").first()


def _refuse_while_busy():
    if upgrading() is not None:
        raise ServiceError(Refusal.CONFLICT, "bundle", "an upgrade or a reboot is already "
                                                       "under way")


def limit_bytes():
    return settings.TUSK.bundle_max_mb * 1_000_000


def incoming():
    """A new file in upgrade_dir for a bundle being received -> (its name, a binary file
    open for writing); never through a planted link. ServiceError if this box has no
    upgrade directory it may write."""
    stored_as = f"incoming-{secrets.token_hex(8)}{bundles.SUFFIX}"
    try:
        with Directory(settings.TUSK.upgrade_dir) as shared:
            return stored_as, os.fdopen(shared.create(stored_as), "wb")
    except (UnsafeFile, OSError) as error:
        raise ServiceError(Refusal.CONFLICT, "bundle", f"this system cannot take a bundle: "
                                                       f"{error}") from None


def discard(stored_as):
    with Directory(settings.TUSK.upgrade_dir) as shared:
        shared.delete_name(stored_as)


def receive(read):
    """A bundle read with read(n) (a request's body, up to its end) stored in
    upgrade_dir -> (its name there, bytes). Past bundle_max_mb it stops reading, removes
    what it stored and raises BundleTooLarge."""
    limit, size = limit_bytes(), 0
    stored_as, handle = incoming()
    try:
        with handle:
            while chunk := read(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise BundleTooLarge()
                handle.write(chunk)
    except BaseException:
        discard(stored_as)
        raise
    return stored_as, size


def upgrade(actor, name, stored_as, size):
    """Queues the install of the bundle received as stored_as (receive(), or the page's
    upload handler) -> Queued. name: the file's name as the sender gave it, kept for the
    record. The bundle is renamed for its job (bundle-<id>.raucb: the agent finds it
    from the job's id); on a refusal it is removed."""
    name, held = bundles.display_name(name), stored_as
    try:
        with transaction.atomic(), Directory(settings.TUSK.upgrade_dir) as shared:
            _refuse_while_busy()
            job = queue.enqueue(UPGRADE, {"name": name}, actor.user)
            final = bundles.upload_name(job.pk)
            shared.delete_name(final)       # a leftover of a lost database is replaced
            try:
                os.rename(stored_as, final, src_dir_fd=shared.fd, dst_dir_fd=shared.fd)
            except OSError as error:
                raise UnsafeFile(f"{stored_as}: {error.strerror}") from None
            held = final
            audit.record_for(actor, "system upgrade upload", f"job {job.pk}", name=name,
                             bytes=size)
    except BaseException:
        discard(held)
        raise
    return Queued(job=job.pk, kind=job.kind)


def reboot(actor):
    """Queues the reboot (into the slot that boots next) -> Queued."""
    with transaction.atomic():
        _refuse_while_busy()
        job = queue.enqueue(REBOOT, {}, actor.user)
        audit.record_for(actor, "system reboot", "box", job=job.pk)
    return Queued(job=job.pk, kind=job.kind)
