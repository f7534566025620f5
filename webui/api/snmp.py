"""The SNMP agent (snmp.toml's structure, docs/MONITORING.md): GET it as the agent last
reported it - never a passphrase or the community - with snmpd's state, apply a new one
(checked as the SNMP page checks it; pending until confirmed; a passphrase or community
left out keeps the one in force), and the commit-confirm kit's decisions and history."""
from django.http import HttpResponse
from ninja import Router, Schema
from pydantic import Field

from snmp import services
from snmp.core.applier import CONFIRM_TIMEOUT_DEFAULT, CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from snmp.domain import DOMAIN

from . import commit
from .auth import ADMIN, READ
from .jobs import accepted
from .schemas import Document, JobOut, ProblemsOut

router = Router(tags=["snmp"])


class SnmpOut(Schema):
    document: Document = Field(description="snmp.toml's structure without its secrets "
                                           "(passphrases, community)")
    running: bool | None = Field(description="snmpd runs; null: not reported yet")


class ApplyIn(Schema):
    document: Document = Field(description="snmp.toml's structure (docs/MONITORING.md); "
                                           "a passphrase or community left out is kept")
    timeout: int = Field(CONFIRM_TIMEOUT_DEFAULT, ge=CONFIRM_TIMEOUT_MIN,
                         le=CONFIRM_TIMEOUT_MAX)


@router.get("", response=SnmpOut, auth=READ, summary="The SNMP agent's configuration",
            operation_id="snmp_get")
def get_snmp(request):
    status = services.status()
    return {"document": services.current_document(),
            "running": status.running if status else None}


@router.post("/apply", response={202: JobOut, 422: ProblemsOut}, auth=ADMIN,
             summary="Apply the SNMP configuration: live and pending until confirmed",
             operation_id="snmp_apply")
def apply_snmp(request, response: HttpResponse, body: ApplyIn):
    services.check(body.document)
    return accepted(response, services.apply(request.auth.actor(), body.document,
                                             body.timeout))


commit.routes(router, DOMAIN)
