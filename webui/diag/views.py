"""The Diagnostics page: captures (start, live progress, stop, download, delete),
uploads, and the health report of either. The agent captures and analyses; the web
process queues jobs, serves the files named from a capture's id (diag/files.py: never a
path from a row, never through a link) and renders reports."""
import os
import re

from django.conf import settings
from django.db import transaction
from django.http import Http404, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.audit import Actor
from accounts.roles import is_admin
from jobs import queue
from tusklib.problems import ServiceError

from . import charts, services, storage
from .files import Directory, upload_name
from .forms import CaptureForm, UploadForm
from .models import Capture, Report

SHOWN_FLOWS = 50


def _page(request, form=None, upload=None, status=200):
    captures = list(Capture.objects.select_related("job").prefetch_related("reports")[:100])
    stored = services.stored()
    analysing = services.analysing()
    for cap in captures:
        cap.report = next(iter(cap.reports.all()), None)
        cap.analysing = cap.pk in analysing
        cap.stored = stored.get(cap.pk, [])
    context = {
        "form": form or CaptureForm(interfaces=services.interfaces()),
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
    form = CaptureForm(request.POST, interfaces=services.interfaces())
    if not form.is_valid():
        return _page(request, form=form, status=200 if request.headers.get("HX-Request") else 400)
    services.start(Actor.of(request), form.cleaned_data["spec"])
    return redirect("diag")


@require_POST
def stop(request, pk):
    try:
        services.stop(Actor.of(request), pk)
    except ServiceError:
        raise Http404("no such capture") from None
    return redirect("diag")


@require_POST
def delete(request, pk):
    get_object_or_404(Capture, pk=pk)
    try:
        services.delete(Actor.of(request), pk)
    except ServiceError as error:
        return HttpResponseForbidden(f"{error.message[:1].upper()}{error.message[1:]}.")
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
    get_object_or_404(Capture, pk=pk)
    try:
        services.analyze(Actor.of(request), pk)
    except ServiceError:
        return HttpResponseForbidden("Nothing to analyse yet.")
    return redirect("diag")


def download(request, pk):
    """The capture's file(s): pcapng ring files joined (sections concatenate into a
    valid pcapng), pcap ring files one by one (?part=N)."""
    if not is_admin(request.user):
        return HttpResponseForbidden("Your role (viewer) cannot download packets.")
    part = request.GET.get("part", "")
    part = int(part) if part.isascii() and part.isdigit() and len(part) < 10 else None
    try:
        found = services.download(pk, part)
    except ServiceError as error:
        raise Http404(error.message) from None
    return services.file_response(found)


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
