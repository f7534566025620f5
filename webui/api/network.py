"""The network configuration as one document (network.toml's structure, docs/NETWORK.md),
as the policy's: GET with its version as the ETag, PUT whole with If-Match (checked
against this box's ports, the policy's zones and the HA pair's links), apply (202; a
change that moves the management address is confirmed only by a call that arrives
over the new address - `confirm_over` says which), confirm, roll back now, history."""
import json

from django.http import HttpResponse
from ninja import Router, Schema, Status
from pydantic import Field

from accounts.audit import local_address
from network import draft as drafts
from network import services
from network.core.applier import CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from network.core.errors import Code, NetworkError
from network.domain import DOMAIN

from . import commit, documents
from .auth import ADMIN, OPERATE
from .documents import read_body
from .jobs import accepted, queued_job
from .schemas import INT_MAX, JobOut, ProblemsOut

router = Router(tags=["network"])
BODY_MAX = 1024 * 1024          # the agent takes a network document of at most 1 MiB
CONTENT = {"application/json": {"schema": {
    "type": "object", "additionalProperties": True,
    "description": "network.toml's structure (docs/NETWORK.md)"}}}


class ApplyIn(Schema):
    version: int = Field(ge=1, le=INT_MAX, description="The draft version applied")
    timeout: int = Field(ge=CONFIRM_TIMEOUT_MIN, le=CONFIRM_TIMEOUT_MAX,
                         description="Seconds to confirm in, or it rolls back by itself")


class AppliedOut(Schema):
    job: JobOut
    confirm_over: list[str] = Field(description="When the change moves the management "
                                                "address: the addresses a confirm must "
                                                "arrive over (\"dhcp\": the one it gets)")


def _parse(request):
    if request.content_type != "application/json":
        raise NetworkError(Code.SCHEMA, "", "the body must be application/json")
    try:
        return json.loads(read_body(request, BODY_MAX))
    except (UnicodeDecodeError, ValueError) as error:
        raise NetworkError(Code.SCHEMA, "", f"not JSON: {error}") from None


@router.post("/apply", response={202: AppliedOut, 409: ProblemsOut, 422: ProblemsOut},
             auth=ADMIN, summary="Apply the draft: live and pending until confirmed",
             operation_id="network_apply")
def apply_network(request, response: HttpResponse, body: ApplyIn):
    applied = services.apply_draft(request.auth.actor(), body.version, body.timeout)
    return Status(202, {"job": queued_job(response, applied.queued),
                        "confirm_over": applied.over})


@router.post("/confirm", response={202: JobOut, 409: ProblemsOut}, auth=OPERATE,
             summary="Confirm the pending network configuration (over the new management "
                     "address when it moves it)", operation_id="network_confirm")
def confirm_network(request, response: HttpResponse):
    return accepted(response, services.confirm(request.auth.actor(), local_address(request)))


documents.routes(router, "network", "network configuration", drafts.get,
                 services.replace_draft, _parse, CONTENT, shown=drafts.shown)
commit.routes(router, DOMAIN, confirm=False)
