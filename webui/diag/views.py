"""The Diagnostics page: captures (start, live progress, stop, download, delete),
uploads, and the health report of either. The agent captures and analyses; the web
process queues jobs, serves the files named from a capture's id (diag/files.py: never a
path from a row, never through a link) and renders reports."""
import os
import re

from django.conf import settings
from django.db import transaction
from django.http import FileResponse, Http404, HttpResponseForbidden, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.roles import is_admin
from dashboard.models import Sample
from jobs import queue
from jobs.models import Job

from . import charts, storage
from .files import Directory, UnsafeFile, upload_name
from .forms import CaptureForm, UploadForm
from .models import Capture, Report

CONTENT_TYPES = {"pcapng": "application/x-pcapng", "pcap": "application/vnd.tcpdump.pcap"}
SHOWN_FLOWS = 50


def interfaces():
    """The interfaces of the agent's target, from its latest statistics sample."""
    sample = Sample.objects.only("interfaces").first()
    return sorted(name for name in (sample.interfaces if sample else {}) if name != "lo")


def _stored():
    """{capture id: [(file name, bytes)]} of the capture directory."""
    try:
        with Directory(settings.TUSK.capture_dir) as shared:
            return shared.listing()
    except UnsafeFile:   # not there yet: nothing stored
        return {}


def _page(request, form=None, upload=None, status=200):
    captures = list(Capture.objects.select_related("job").prefetch_related("reports")[:100])
    stored = _stored()
    analysing = set(Job.objects.filter(kind="diag.analyze", state__in=(
        Job.State.QUEUED, Job.State.RUNNING)).values_list("args__capture", flat=True))
    for cap in captures:
        cap.report = next(iter(cap.reports.all()), None)
        cap.analysing = cap.pk in analysing
        cap.stored = stored.get(cap.pk, [])
    context = {
        "form": form or CaptureForm(interfaces=interfaces()),
        "upload": upload or UploadForm(), "captures": captures,
        "busy": any(c.active or c.analysing for c in captures),
        "quota_mb": settings.TUSK.capture_quota_mb,
        "used_mb": round(sum(c.bytes for c in captures) / 1e6, 1),
    }
    return render(request, "diag/diag.html", context, status=status)


def diag(request):
    return _page(request)


@require_POST
def start(request):
    form = CaptureForm(request.POST, interfaces=interfaces())
    if not form.is_valid():
        return _page(request, form=form, status=200 if request.headers.get("HX-Request") else 400)
    spec = form.cleaned_data["spec"]
    with transaction.atomic():
        cap = Capture.objects.create(spec=spec.as_dict(), created_by=request.user)
        cap.job = queue.enqueue("diag.capture", {"capture": cap.pk}, request.user)
        cap.save(update_fields=["job"])
        audit.record(request, "capture start", f"capture {cap.pk}", **spec.as_dict())
    return redirect("diag")


@require_POST
def stop(request, pk):
    with transaction.atomic():
        found = Capture.objects.filter(pk=pk, state__in=(Capture.State.QUEUED,
                                                         Capture.State.RUNNING))
        if found.update(stop_requested=True):
            audit.record(request, "capture stop", f"capture {pk}")
    return redirect("diag")


@require_POST
def delete(request, pk):
    cap = get_object_or_404(Capture, pk=pk)
    if cap.active:
        return HttpResponseForbidden("Stop the capture before deleting it.")
    with Directory(settings.TUSK.capture_dir) as shared:
        shared.delete(cap.pk)
    with transaction.atomic():
        audit.record(request, "capture delete", f"capture {pk}")
        cap.delete()
    return redirect("diag")


@require_POST
def upload(request):
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, upload=form, status=400)
    incoming = form.cleaned_data["file"]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(incoming.name))[:100] or "upload"
    quota = settings.TUSK.capture_quota_mb
    _, fits = storage.make_room(settings.TUSK.capture_dir, quota * 1_000_000, incoming.size,
                                username=request.user.get_username())
    if not fits:
        form.add_error("file", f"the storage quota ({quota} MB) is held by running captures: "
                               "wait for them or stop one")
        return _page(request, upload=form, status=400)
    # the web user creates it in capture_dir, whose setgid group it inherits
    with transaction.atomic(), Directory(settings.TUSK.capture_dir) as shared:
        cap = Capture.objects.create(source=Capture.Source.UPLOAD, name=name,
                                     state=Capture.State.DONE, created_by=request.user,
                                     started_at=timezone.now(), finished_at=timezone.now())
        stored = upload_name(cap.pk, cap.format)
        shared.delete_name(stored)   # a leftover of a lost database is replaced
        with open(shared.create(stored), "wb") as out:
            for chunk in incoming.chunks():
                out.write(chunk)
            cap.bytes = out.tell()
        cap.save(update_fields=["bytes"])
        queue.enqueue("diag.analyze", {"capture": cap.pk}, request.user)
        audit.record(request, "capture upload", f"capture {cap.pk}", name=name, bytes=cap.bytes)
    return redirect("diag")


@require_POST
def analyze(request, pk):
    cap = get_object_or_404(Capture, pk=pk)
    if cap.active or not _stored().get(cap.pk):
        return HttpResponseForbidden("Nothing to analyse yet.")
    with transaction.atomic():
        queue.enqueue("diag.analyze", {"capture": cap.pk}, request.user)
        audit.record(request, "capture analyse", f"capture {pk}")
    return redirect("diag")


def _concatenated(handles):
    for handle in handles:
        with handle:
            while chunk := handle.read(1 << 20):
                yield chunk


def download(request, pk):
    """The capture's file(s): pcapng ring files joined (sections concatenate into a
    valid pcapng), pcap ring files one by one (?part=N)."""
    if not is_admin(request.user):
        return HttpResponseForbidden("Your role (viewer) cannot download packets.")
    cap = get_object_or_404(Capture, pk=pk)
    with Directory(settings.TUSK.capture_dir) as shared:
        names = [] if cap.active else shared.names(cap.pk)
        if not names:
            raise Http404("no file to download")
        fmt = names[0].rsplit(".", 1)[1]
        part = None
        if len(names) > 1 and fmt == "pcap":
            part = request.GET.get("part", "")
            if not (part.isascii() and part.isdigit() and len(part) < 10) \
                    or not 1 <= int(part) <= len(names):
                raise Http404("choose a part")
            names = [names[int(part) - 1]]
        try:
            handles = [open(shared.open(name), "rb") for name in names]
        except UnsafeFile:   # swapped for a link since it was listed
            raise Http404("no file to download") from None
    stamp = (cap.started_at or cap.created_at).strftime("%Y%m%dT%H%M%SZ")
    base = (f"tusk-upload-{cap.pk}-{cap.name}" if cap.source == Capture.Source.UPLOAD
            else f"tusk-capture-{cap.pk}-{stamp}")
    if cap.source == Capture.Source.UPLOAD:
        base = base.rsplit(".", 1)[0]
    if len(handles) == 1:
        return FileResponse(handles[0], as_attachment=True, content_type=CONTENT_TYPES[fmt],
                            filename=f"{base}-part{part}.pcap" if part else f"{base}.{fmt}")
    response = StreamingHttpResponse(_concatenated(handles), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{base}.{fmt}"'
    response["Content-Length"] = str(sum(os.fstat(h.fileno()).st_size for h in handles))
    return response


def report(request, pk):
    found = get_object_or_404(Report.objects.select_related("capture"), pk=pk)
    result = found.result or {}
    flows = result.get("flows", [])
    for flow in flows[:SHOWN_FLOWS]:
        for name in ("c2s", "s2c"):
            series = flow["directions"][name]["series"]
            flow["directions"][name]["charts"] = charts.for_direction(series)
    return render(request, "diag/report.html", {
        "report": found, "result": result, "flows": flows, "detailed": flows[:SHOWN_FLOWS]})
