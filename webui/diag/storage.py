"""The capture directory's quota, kept by the agent before a capture starts and by the
web process before it stores an upload: the oldest finished captures (and uploads)
are deleted, files and rows, each audit-logged, until the new one fits.

A running capture counts at its byte limit (it may still grow to it), anything else
at the size of its files - the regular files named from its id (diag/files.py): no
path comes from a row. Deleting needs only write permission on the directory, so the
web user may delete what the agent wrote (see config.py: capture_dir)."""

from django.db import transaction

from accounts.models import AuditEntry

from .files import Directory
from .models import Capture


def _stored(listing, pk):
    return sum(size for _, size in listing.get(pk, []))


def used_bytes(listing, exclude=None):
    total = 0
    for cap in Capture.objects.exclude(pk=exclude).only("state", "spec", "source"):
        size = _stored(listing, cap.pk)
        limit = cap.spec.get("max_mb", 0) if isinstance(cap.spec, dict) else 0
        if cap.state == Capture.State.RUNNING and cap.source == Capture.Source.CAPTURE \
                and isinstance(limit, int):
            size = max(size, limit * 1_000_000)
        total += size
    return total


def make_room(directory, quota_bytes, wanted, exclude=None, username="agent"):
    """Deletes the oldest finished captures until what is used + wanted <= quota.
    Returns (ids deleted, whether it fits now): it does not fit, and nothing is
    deleted, when running captures hold the rest of the quota."""
    deleted = []
    with Directory(directory) as shared:
        listing = shared.listing()
        used = used_bytes(listing, exclude)
        oldest_first = list(Capture.objects.exclude(pk=exclude)
                            .filter(state__in=(Capture.State.DONE, Capture.State.FAILED))
                            .order_by("id"))
        deletable = sum(_stored(listing, cap.pk) for cap in oldest_first)
        if used - deletable + wanted > quota_bytes:
            return deleted, False    # deleting every finished capture would not be enough
        for cap in oldest_first:
            if used + wanted <= quota_bytes:
                break
            size = _stored(listing, cap.pk)
            shared.delete(cap.pk)
            with transaction.atomic():
                AuditEntry.objects.create(username=username, action="capture deleted",
                                          target=f"capture {cap.pk}",
                                          detail={"bytes": size, "why": "storage quota"})
                deleted.append(cap.pk)
                cap.delete()
            used -= size
    return deleted, used + wanted <= quota_bytes
