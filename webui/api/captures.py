"""Captures (docs/DIAGNOSTICS.md): start one with its limits (checked as the page checks
them, against this box's interfaces and the storage quota), follow it, stop it, download
its packets as pcap or pcapng, have its health report made and read it. Starting,
stopping, analysing, deleting and downloading are an operator's (operate): packets carry
what the connections carried."""
from datetime import datetime
from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from ninja import Path, Query, Router, Schema, Status
from pydantic import Field

from diag import services
from diag.core import capture as core
from diag.models import Capture, Report
from tusklib.problems import Refusal, ServiceError

from .auth import OPERATE, READ
from .jobs import accepted
from .schemas import BIGINT_MAX, JobOut, ProblemsOut

router = Router(tags=["captures"])
LIST_MAX = 100


def _limit(name):
    low, high, default = core.LIMITS[name]
    return Field(default, ge=low, le=high)


class CaptureIn(Schema):
    interfaces: list[str] = Field(min_length=1, max_length=16)
    filter: str = Field("", max_length=core.FILTER_MAX, description="BPF, e.g. tcp port 5201")
    max_packets: int = _limit("max_packets")
    max_mb: int = _limit("max_mb")
    max_seconds: int = _limit("max_seconds")
    snaplen: int = _limit("snaplen")
    ring_files: int = _limit("ring_files")
    format: str = Field("pcapng", pattern="^(pcapng|pcap)$")


class CaptureOut(Schema):
    id: int
    source: str = Field(description="capture, or upload")
    name: str
    state: str
    spec: dict[str, Any]
    packets: int
    bytes: int
    reason: str = Field(description="What ended it: packets, bytes, duration, request, ...")
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    report: int | None = Field(description="Its health report's id, once made")
    url: str


class StoppedOut(Schema):
    stopping: bool = Field(description="False: it had ended already")


class ReportOut(Schema):
    id: int
    capture: int
    created_at: datetime
    error: str
    result: dict[str, Any] | None = Field(description="The health report (docs/"
                                                      "DIAGNOSTICS.md), null if it failed")


class PartQuery(Schema):
    part: int | None = Field(None, ge=1, le=100, description="A pcap ring buffer's file")


ID = Path(..., ge=1, le=BIGINT_MAX)


def _out(cap):
    report = cap.reports.order_by("-id").values_list("id", flat=True).first()
    return {"id": cap.pk, "source": cap.source, "name": cap.name, "state": cap.state,
            "spec": cap.spec if isinstance(cap.spec, dict) else {}, "packets": cap.packets,
            "bytes": cap.bytes, "reason": cap.reason, "error": cap.error,
            "created_at": cap.created_at, "started_at": cap.started_at,
            "finished_at": cap.finished_at, "report": report,
            "url": reverse("api:capture", args=[cap.pk])}


def _found(capture_id):
    found = Capture.objects.filter(pk=capture_id).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "capture", f"no capture {capture_id}")
    return found


@router.get("/captures", response=list[CaptureOut], auth=READ, operation_id="captures_list",
            summary="Captures and uploads, newest first")
def list_captures(request):
    return [_out(cap) for cap in Capture.objects.all()[:LIST_MAX]]


@router.post("/captures", response={202: CaptureOut, 422: ProblemsOut}, auth=OPERATE,
             operation_id="captures_start", summary="Start a capture")
def start(request, response: HttpResponse, body: CaptureIn):
    spec = core.Spec(**{**body.dict(), "interfaces": tuple(body.interfaces)})
    cap = services.start(request.auth.actor(), spec)
    response["Location"] = reverse("api:capture", args=[cap.pk])
    return Status(202, _out(cap))


@router.get("/captures/{capture_id}", response={200: CaptureOut, 404: ProblemsOut},
            auth=READ, url_name="capture", operation_id="captures_get", summary="One capture")
def get_capture(request, capture_id: int = ID):
    return _out(_found(capture_id))


@router.post("/captures/{capture_id}/stop", response={200: StoppedOut, 404: ProblemsOut},
             auth=OPERATE, operation_id="captures_stop", summary="Stop a capture now")
def stop(request, capture_id: int = ID):
    return {"stopping": services.stop(request.auth.actor(), capture_id)}


@router.post("/captures/{capture_id}/analyze",
             response={202: JobOut, 404: ProblemsOut, 409: ProblemsOut}, auth=OPERATE,
             operation_id="captures_analyze", summary="Make the capture's health report")
def analyze(request, response: HttpResponse, capture_id: int = ID):
    return accepted(response, services.analyze(request.auth.actor(), capture_id))


@router.delete("/captures/{capture_id}", response={204: None, 404: ProblemsOut,
                                                   409: ProblemsOut},
               auth=OPERATE, operation_id="captures_delete",
               summary="Delete a capture and its files")
def delete(request, capture_id: int = ID):
    services.delete(request.auth.actor(), capture_id)
    return Status(204, None)


BINARY = {"responses": {200: {"description": "The packets", "content": {
    media: {"schema": {"type": "string", "format": "binary"}}
    for media in services.CONTENT_TYPES.values()}}}}


@router.get("/captures/{capture_id}/download", response={404: ProblemsOut}, auth=OPERATE,
            openapi_extra=BINARY, operation_id="captures_download",
            summary="The capture's packets: pcapng (ring files joined) or pcap (?part=N)")
def download(request, filters: Query[PartQuery], capture_id: int = ID):
    return services.file_response(services.download(capture_id, filters.part))


@router.get("/reports/{report_id}", response={200: ReportOut, 404: ProblemsOut}, auth=READ,
            operation_id="reports_get", summary="A capture's health report")
def get_report(request, report_id: int = ID):
    found = Report.objects.filter(pk=report_id).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "report", f"no report {report_id}")
    return {"id": found.pk, "capture": found.capture_id, "created_at": found.created_at,
            "error": found.error,
            "result": found.result if isinstance(found.result, dict) else None}
