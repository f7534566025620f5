"""The captures' operations, called by the Diagnostics page and every other front end
alike: start one (its spec checked by diag/core/capture.py's validate, the page's form's
check), stop, analyse, delete it, and the files of one to download - named from its id
(diag/files.py), opened without following a link. Refusals are SpecError (with the
field's path) or a ServiceError (NOT_FOUND, CONFLICT)."""
import os
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.http import FileResponse, StreamingHttpResponse

from accounts import audit
from commitkit.services import Queued
from dashboard.models import Sample
from jobs import queue
from jobs.models import Job
from tusklib.problems import Refusal, ServiceError

from .core import capture as core
from .files import Directory, UnsafeFile
from .models import Capture

CONTENT_TYPES = {"pcapng": "application/x-pcapng", "pcap": "application/vnd.tcpdump.pcap"}


def interfaces():
    """The interfaces of the agent's target, from its latest statistics sample."""
    sample = Sample.objects.only("interfaces").first()
    return sorted(name for name in (sample.interfaces if sample else {}) if name != "lo")


def stored():
    """{capture id: [(file name, bytes)]} of the capture directory."""
    try:
        with Directory(settings.TUSK.capture_dir) as shared:
            return shared.listing()
    except UnsafeFile:   # not there yet: nothing stored
        return {}


def check(spec):
    """spec (a core.Spec) against this box's interfaces and the quota; SpecError."""
    core.validate(spec, set(interfaces()), settings.TUSK.capture_quota_mb)
    return spec


def start(actor, spec):
    """Queues a capture of spec (checked). -> the Capture"""
    check(spec)
    with transaction.atomic():
        cap = Capture.objects.create(spec=spec.as_dict(), created_by=actor.user)
        cap.job = queue.enqueue("diag.capture", {"capture": cap.pk}, actor.user)
        cap.save(update_fields=["job"])
        audit.record_for(actor, "capture start", f"capture {cap.pk}", **spec.as_dict())
    return cap


def _capture(pk):
    found = Capture.objects.filter(pk=pk).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "capture", f"no capture {pk}")
    return found


def stop(actor, pk):
    """Asks the agent to stop capture pk; True when it was running (or queued)."""
    _capture(pk)
    with transaction.atomic():
        stopped = Capture.objects.filter(pk=pk, state__in=(
            Capture.State.QUEUED, Capture.State.RUNNING)).update(stop_requested=True)
        if stopped:
            audit.record_for(actor, "capture stop", f"capture {pk}")
    return bool(stopped)


def delete(actor, pk):
    cap = _capture(pk)
    if cap.active:
        raise ServiceError(Refusal.CONFLICT, "capture", "stop the capture before deleting it")
    with Directory(settings.TUSK.capture_dir) as shared:
        shared.delete(cap.pk)
    with transaction.atomic():
        audit.record_for(actor, "capture delete", f"capture {pk}")
        cap.delete()


def analyze(actor, pk):
    """Queues the health report of capture pk. -> Queued"""
    cap = _capture(pk)
    if cap.active or not stored().get(cap.pk):
        raise ServiceError(Refusal.CONFLICT, "capture", "nothing to analyse yet")
    with transaction.atomic():
        job = queue.enqueue("diag.analyze", {"capture": cap.pk}, actor.user)
        audit.record_for(actor, "capture analyse", f"capture {pk}")
    return Queued(job=job.pk, kind=job.kind)


def analysing():
    """The ids of the captures being analysed now."""
    return set(Job.objects.filter(kind="diag.analyze", state__in=(
        Job.State.QUEUED, Job.State.RUNNING)).values_list("args__capture", flat=True))


@dataclass
class Download:
    handles: list          # open binary files, in order (ring files of pcapng: joined)
    filename: str
    content_type: str
    part: int | None


def download(pk, part=None):
    """Capture pk's file(s): pcapng ring files together (sections concatenate into a valid
    pcapng), pcap ring files one at a time (part, 1-based). ServiceError NOT_FOUND."""
    cap = _capture(pk)
    with Directory(settings.TUSK.capture_dir) as shared:
        names = [] if cap.active else shared.names(cap.pk)
        if not names:
            raise ServiceError(Refusal.NOT_FOUND, "capture", "no file to download")
        fmt = names[0].rsplit(".", 1)[1]
        if len(names) > 1 and fmt == "pcap":
            if part is None or not 1 <= part <= len(names):
                raise ServiceError(Refusal.NOT_FOUND, "part", f"choose a part, 1 to "
                                                              f"{len(names)}")
            names = [names[part - 1]]
        else:
            part = None
        try:
            handles = [open(shared.open(name), "rb") for name in names]
        except UnsafeFile:   # swapped for a link since it was listed
            raise ServiceError(Refusal.NOT_FOUND, "capture", "no file to download") from None
    stamp = (cap.started_at or cap.created_at).strftime("%Y%m%dT%H%M%SZ")
    base = (f"tusk-upload-{cap.pk}-{cap.name}" if cap.source == Capture.Source.UPLOAD
            else f"tusk-capture-{cap.pk}-{stamp}")
    if cap.source == Capture.Source.UPLOAD:
        base = base.rsplit(".", 1)[0]
    return Download(handles, f"{base}-part{part}.pcap" if part else f"{base}.{fmt}",
                    CONTENT_TYPES[fmt], part)


def _concatenated(handles):
    for handle in handles:
        with handle:
            while chunk := handle.read(1 << 20):
                yield chunk


def file_response(found):
    """A services.Download as the answer: one file whole, ring files joined."""
    if len(found.handles) == 1:
        return FileResponse(found.handles[0], as_attachment=True,
                            content_type=found.content_type, filename=found.filename)
    response = StreamingHttpResponse(_concatenated(found.handles),
                                     content_type=found.content_type)
    response["Content-Disposition"] = f'attachment; filename="{found.filename}"'
    response["Content-Length"] = str(sum(os.fstat(h.fileno()).st_size for h in found.handles))
    return response
