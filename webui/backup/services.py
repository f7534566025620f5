"""The Backup page's operations, called by the page and the API alike (README.md, Backup):
make the backup file; take an uploaded one, checked, as a pending restore of its
uploader's; what restoring it would change (restore.plan) and the restore itself
(restore.restore), confirmed with the preview's token; discard it. Refusals are a
BackupError (the file's problems, with their paths) or a ServiceError (NOT_FOUND)."""
import hashlib
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from accounts import audit
from tusklib.problems import Refusal, ServiceError

from . import collect as collected
from . import document as backups
from .models import PendingRestore

PENDING_FOR = timedelta(days=1)  # an upload left unconfirmed is deleted after this


def download(actor):
    """The backup of this box now -> (a file name, its bytes). BackupError if it cannot
    be made."""
    document = collected.build()
    data = collected.dump(document)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    name = f"tusk-backup-{document['hostname']}-{stamp}.json"
    audit.record_for(actor, "backup download", name, bytes=len(data),
                     users=len(document["users"]))
    return name, data


def upload(actor, name, data):
    """The file's bytes, checked as a restore by actor's user would check them, kept as
    that user's one pending restore (a new upload replaces the last) -> PendingRestore.
    BackupError with every problem; nothing is kept then."""
    backups.read(data, actor.user.get_username())
    with transaction.atomic():
        PendingRestore.objects.filter(user=actor.user).delete()
        PendingRestore.objects.filter(uploaded_at__lt=timezone.now() - PENDING_FOR).delete()
        return PendingRestore.objects.create(
            user=actor.user, name=(name or "backup")[:200], text=data.decode(),
            sha256=hashlib.sha256(data).hexdigest())


def pending(actor, pk):
    """actor's pending restore pk (nobody sees another's upload)."""
    found = PendingRestore.objects.filter(pk=pk, user=actor.user).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "restore", f"no pending restore {pk} of yours")
    return found


def document_of(actor, found):
    """The pending restore's backup, checked again (the box may have changed since the
    upload). BackupError."""
    return backups.read(found.text.encode(), actor.user.get_username())


def discard(actor, pk):
    pending(actor, pk).delete()
