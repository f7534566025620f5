"""This box's half of the HA pair (ha.toml's structure, docs/HA.md): GET it as the agent
last reported it (the pair key is never in it) with the live role, apply a new one
(checked as the HA page checks it; pending until confirmed), fail over, and the
commit-confirm kit's decisions and history."""
from django.http import HttpResponse
from ninja import Router, Schema
from pydantic import Field

from ha import services
from ha.core.applier import CONFIRM_TIMEOUT_DEFAULT, CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from ha.core.peer import KEY_MAX
from ha.domain import DOMAIN

from . import commit
from .auth import ADMIN, OPERATE, READ
from .jobs import accepted
from .schemas import Document, JobOut, ProblemsOut

router = Router(tags=["ha"])


class HaOut(Schema):
    document: Document | None = Field(description="ha.toml's structure, without the key; "
                                                  "null: not set up")
    role: str | None = Field(description="MASTER or BACKUP as keepalived says; null: not "
                                         "running or not reported")
    has_key: bool


class ApplyIn(Schema):
    document: Document = Field(description="ha.toml's structure (docs/HA.md)")
    key: str | None = Field(None, min_length=1, max_length=KEY_MAX,
                            description="A new pair key (both boxes the same); null: "
                                        "keep this box's")
    timeout: int = Field(CONFIRM_TIMEOUT_DEFAULT, ge=CONFIRM_TIMEOUT_MIN,
                         le=CONFIRM_TIMEOUT_MAX)


@router.get("", response=HaOut, auth=READ, summary="This box's half of the pair",
            operation_id="ha_get")
def get_ha(request):
    status = services.status()
    return {"document": services.current_document(), "role": status.role if status else None,
            "has_key": bool(status and status.has_key)}


@router.post("/apply", response={202: JobOut, 422: ProblemsOut}, auth=ADMIN,
             summary="Apply this box's half: live and pending until confirmed",
             operation_id="ha_apply")
def apply_ha(request, response: HttpResponse, body: ApplyIn):
    status = services.status()
    services.check(body.document, body.key, has_key=bool(status and status.has_key))
    return accepted(response, services.apply(request.auth.actor(), body.document,
                                             body.timeout, body.key))


@router.post("/failover", response={202: JobOut, 409: ProblemsOut}, auth=OPERATE,
             summary="Hand the pair's addresses to the peer (this box must be master)",
             operation_id="ha_failover")
def failover(request, response: HttpResponse):
    status = services.status()
    return accepted(response, services.fail_over(request.auth.actor(),
                                                 status.role if status else None))


commit.routes(router, DOMAIN)
