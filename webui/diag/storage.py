"""The capture directory's quota, kept by the agent before a capture starts and by the
web process before it stores an upload: the oldest finished captures (and uploads)
are deleted, files and rows, each audit-logged, until the new one fits.

A running capture counts at its byte limit (it may still grow to it), anything else
at the size of its files. Deleting needs only write permission on the directory, so
the web user may delete what the agent wrote (see config.py: capture_dir)."""

from django.db import transaction

from accounts.models import AuditEntry

from .core.capture import files_of, size_of
from .models import Capture


def used_bytes(exclude=None):
    total = 0
    for cap in Capture.objects.exclude(pk=exclude).only("state", "files", "spec", "source"):
        size = size_of(f for path in cap.files for f in files_of(path))
        if cap.state == Capture.State.RUNNING and cap.source == Capture.Source.CAPTURE:
            size = max(size, cap.spec.get("max_mb", 0) * 1_000_000)
        total += size
    return total


def make_room(quota_bytes, wanted, exclude=None, username="agent"):
    """Deletes the oldest finished captures until what is used + wanted <= quota.
    Returns (ids deleted, whether it fits now): it does not fit, and nothing is
    deleted, when running captures hold the rest of the quota."""
    deleted = []
    used = used_bytes(exclude)
    oldest_first = list(Capture.objects.exclude(pk=exclude)
                        .filter(state__in=(Capture.State.DONE, Capture.State.FAILED))
                        .order_by("id"))
    deletable = sum(size_of(cap.existing_files()) for cap in oldest_first)
    if used - deletable + wanted > quota_bytes:
        return deleted, False    # deleting every finished capture would not be enough
    for cap in oldest_first:
        if used + wanted <= quota_bytes:
            break
        size = size_of(cap.existing_files())
        cap.delete_files()
        with transaction.atomic():
            AuditEntry.objects.create(username=username, action="capture deleted",
                                      target=f"capture {cap.pk}",
                                      detail={"bytes": size, "why": "storage quota"})
            deleted.append(cap.pk)
            cap.delete()
        used -= size
    return deleted, used + wanted <= quota_bytes
