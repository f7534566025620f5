"""The connections crossing the firewall now, as the Flows page lists them (the agent's
sampler keeps the fastest; docs/FLOWS.md), filtered; and the actions on one of them -
drop it, capture it on both sides (with its health report when asked) - for an operate
token. A flow is named by its conntrack id and original tuple (the list gives them);
the agent checks it again and acts only on the connection that still has them."""
from datetime import UTC, datetime
from typing import Any

from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field, IPvAnyAddress

from flows import services
from flows.core import hook
from flows.core.flowref import CAPTURE_SECONDS

from .auth import ADMIN, OPERATE, READ
from .jobs import accepted, queued_job
from .schemas import JobOut, ProblemsOut

router = Router(tags=["flows"])


class EndpointOut(Schema):
    src: str
    dst: str
    sport: int
    dport: int


class LostOut(Schema):
    stage: str
    label: str
    interface: str | None
    packets: int


class FlowOut(Schema):
    id: int
    family: int
    proto: int
    protocol: str
    orig: EndpointOut
    reply: EndpointOut
    nat: bool
    zone: int
    class_id: int = Field(description="The traffic class's ordinal (0: none)")
    class_name: str
    fastpath: bool
    offloaded: bool
    in_hardware: bool
    bps: list[int] | None = Field(description="bit/s each way; null before two readings")
    rate: int | None
    elephant: bool
    bytes: list[int] | None
    packets: list[int] | None
    age: float | None
    state: str | None
    lost: list[LostOut] = Field(description="An elephant's: the loss path's stages that "
                                            "lost packets while it ran")


class FlowsOut(Schema):
    at: datetime | None = Field(description="When the sampler read the table")
    entries: int | None = Field(description="Connections in the table then")
    stale: bool
    flows: list[FlowOut]


class FlowFilter(Schema):
    address: IPvAnyAddress | None = Field(None, description="Either end, either "
                                                            "direction (after NAT too)")
    port: int | None = Field(None, ge=0, le=65535)
    protocol: str | None = Field(None, max_length=8, description="tcp, udp, icmp, ...")
    class_name: str | None = Field(None, max_length=64)
    elephants: bool = Field(False, description="Only the elephants")
    limit: int = Field(50, ge=1, le=50)


class FlowIn(Schema):
    id: int = Field(ge=0, le=2 ** 32 - 1)
    family: int
    proto: int
    src: str = Field(max_length=64)
    dst: str = Field(max_length=64)
    sport: int
    dport: int
    zone: int = 0


class DropIn(Schema):
    flow: FlowIn


class CaptureIn(Schema):
    flow: FlowIn
    seconds: int = Field(CAPTURE_SECONDS[2], ge=CAPTURE_SECONDS[0], le=CAPTURE_SECONDS[1])
    analyze: bool = Field(False, description="Then the capture's health report")


def _matches(flow, filters, address):
    ends = [flow[way][end] for way in ("orig", "reply") for end in ("src", "dst")]
    ports = [flow[way][end] for way in ("orig", "reply") for end in ("sport", "dport")]
    return ((address is None or address in ends)
            and (filters.port is None or filters.port in ports)
            and (filters.protocol is None or flow["protocol"] == filters.protocol.lower())
            and (filters.class_name is None or flow["class_name"] == filters.class_name)
            and (not filters.elephants or flow["elephant"]))


def _out(flow):
    return {**flow, "class_id": flow["class"],
            "lost": [{"stage": stage.key, "label": stage.label, "interface": interface,
                      "packets": packets} for stage, interface, packets in flow["lost"] or []]}


@router.get("", response={200: FlowsOut, 422: ProblemsOut}, auth=READ,
            summary="The fastest connections now, filtered", operation_id="flows_list")
def list_flows(request, filters: Query[FlowFilter]):
    address = str(filters.address) if filters.address is not None else None
    found = services.listing(rows=50)
    snapshot = found.snapshot
    return {"at": datetime.fromtimestamp(snapshot["at"], UTC) if snapshot else None,
            "entries": snapshot["entries"] if snapshot else None, "stale": found.stale,
            "flows": [_out(flow) for flow in found.flows
                      if _matches(flow, filters, address)][:filters.limit]}


@router.post("/drop", response={202: JobOut, 422: ProblemsOut}, auth=OPERATE,
             summary="Drop a connection", operation_id="flows_drop")
def drop(request, response: HttpResponse, body: DropIn):
    return accepted(response, services.drop(request.auth.actor(), body.flow.dict()))


@router.post("/capture", response={202: JobOut, 422: ProblemsOut}, auth=OPERATE,
             summary="Capture a connection on both sides of the firewall",
             operation_id="flows_capture")
def capture(request, response: HttpResponse, body: CaptureIn):
    return accepted(response, services.capture(request.auth.actor(), body.flow.dict(),
                                               body.seconds, body.analyze))


class HookFlowIn(Schema):
    src: str = Field(max_length=64)
    dst: str = Field(max_length=64)
    protocol: str = Field(max_length=8, description="tcp, udp or sctp")
    sport: int
    dport: int


class HookIn(Schema):
    """A prefix (either end of a connection) or a connection (either direction)."""

    prefix: str | None = Field(None, max_length=64, description="e.g. 198.51.100.7/32")
    flow: HookFlowIn | None = None
    ttl: int = Field(hook.TTL[2], ge=hook.TTL[0], le=hook.TTL[1],
                     description="Seconds until it ends by itself")
    reason: str = Field("", max_length=hook.REASON_MAX,
                        description="Why: the IDS's alert, a ticket")
    announce: bool = Field(False, description="A block of one host (/32, /128): also "
                                              "announce it as a BGP black-hole route "
                                              "(RFC 7999) to the neighbours that take them, "
                                              "for as long as it lasts")


class HookOut(Schema):
    id: int
    action: str
    match: str
    request: dict[str, Any]
    reason: str
    created_by: str | None
    token: str
    created_at: datetime
    expires_at: datetime
    job: int | None
    state: str | None = Field(description="Its job's: queued, running, succeeded, failed")


class HookedOut(Schema):
    job: JobOut
    entry: HookOut


def _hook_out(entry):
    return {"id": entry.pk, "action": entry.action, "match": entry.match,
            "request": entry.request if isinstance(entry.request, dict) else {},
            "reason": entry.reason,
            "created_by": entry.created_by.get_username() if entry.created_by else None,
            "token": entry.token, "created_at": entry.created_at,
            "expires_at": entry.expires_at, "job": entry.job_id,
            "state": entry.job.state if entry.job else None}


def _hook(request, response, action, body):
    match = {"prefix": body.prefix, "flow": body.flow.dict() if body.flow else None,
             "ttl": body.ttl, "reason": body.reason}
    if body.announce:
        match["announce"] = True
    queued, entry = services.hook(request.auth.actor(), action, match)
    return Status(202, {"job": queued_job(response, queued), "entry": _hook_out(entry)})


@router.post("/block", response={202: HookedOut, 422: ProblemsOut}, auth=OPERATE,
             operation_id="flows_block",
             summary="Drop every packet of matching connections for a time (the IDS hook)")
def block(request, response: HttpResponse, body: HookIn):
    return _hook(request, response, "block", body)


@router.post("/bypass", response={202: HookedOut, 422: ProblemsOut}, auth=OPERATE,
             operation_id="flows_bypass",
             summary="Put matching connections the policy accepted on the fast path for a "
                     "time (the IDS hook)")
def bypass(request, response: HttpResponse, body: HookIn):
    return _hook(request, response, "bypass", body)


@router.get("/hooks", response=list[HookOut], auth=READ, operation_id="flows_hooks",
            summary="The IDS hook's blocks and bypasses in force")
def hooks(request):
    return [_hook_out(entry) for entry in services.hooks()]


# -- flow export ----------------------------------------------------------------------------

class CollectorIn(Schema):
    address: str = Field(max_length=64, description="An IP address")
    port: int | None = Field(None, description="UDP; default 4739 (IPFIX) or 2055 (v9)")


class ExportIn(Schema):
    protocol: str = Field("ipfix", max_length=16, description="ipfix or netflow9")
    active_timeout: int = Field(60, description="Seconds between the records of a "
                                                "connection that lasts (5-3600)")
    collectors: list[CollectorIn] = Field(description="Up to 4; [] : no export")


class ExporterOut(Schema):
    running: bool
    records: int
    messages: int
    send_errors: dict[str, int]
    last_error: str
    lost_events: int
    tracked: int
    refused: str


class ExportOut(Schema):
    protocol: str
    active_timeout: int
    collectors: list[dict[str, Any]]
    refused: str = Field(description="Why the saved settings do not hold (\"\": they do)")
    exporter: ExporterOut | None = Field(description="What the agent last reported")


class ExportPutOut(Schema):
    job: JobOut
    settings: dict[str, Any]


@router.get("/export", response=ExportOut, auth=READ, operation_id="flows_export_get",
            summary="Flow export's settings and what the exporter sent")
def export_get(request):
    state = services.export_state()
    shown = state.settings.as_dict() if state.settings else {
        "protocol": "ipfix", "active_timeout": 60, "collectors": []}
    status = state.status
    return {**shown, "refused": state.refused,
            "exporter": None if status is None else {
                key: getattr(status, key) for key in ExporterOut.model_fields}}


@router.put("/export", response={202: ExportPutOut, 422: ProblemsOut}, auth=ADMIN,
            operation_id="flows_export_put",
            summary="Set flow export (IPFIX or NetFlow v9 to up to 4 collectors)")
def export_put(request, response: HttpResponse, body: ExportIn):
    document = body.dict()
    document["collectors"] = [{key: value for key, value in item.items() if value is not None}
                              for item in document["collectors"]]
    queued, checked = services.set_export(request.auth.actor(), document)
    return Status(202, {"job": queued_job(response, queued), "settings": checked.as_dict()})
