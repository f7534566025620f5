"""The commit-confirm kit's API side: for a declared domain (commitkit/domain.py), its
state, history, one revision, its diff, and the decisions - confirm and roll back the
pending change now (operate: they make nothing new live) and, where the domain has it,
roll back to a revision (admin: a change). A fourth domain's API is a call of routes()."""
from django.http import HttpResponse
from django.utils import timezone
from ninja import Path, Query, Router, Schema
from pydantic import Field

from commitkit import services as kit

from .auth import ADMIN, OPERATE, READ
from .jobs import accepted
from .schemas import INT_MAX, CommitStateOut, DiffOut, JobOut, ProblemsOut, RevisionSummaryOut

HISTORY_MAX = 200


class RevisionOut(RevisionSummaryOut):
    texts: dict[str, str] = Field(description="The revision's files and reports by name")


class HistoryFilter(Schema):
    limit: int = Field(50, ge=1, le=HISTORY_MAX)


class RollbackIn(Schema):
    revision: int = Field(ge=1, le=INT_MAX, description="The revision to return to (pending until "
                                            "confirmed, as an apply)")


def state_out(domain):
    row = domain.state_model.current()
    if row is None:
        return {"confirmed": None, "pending": None, "deadline": None, "seconds_left": None,
                "synced_at": None}
    return {"confirmed": row.confirmed, "pending": row.pending, "deadline": row.deadline,
            "seconds_left": row.seconds_left(timezone.now()), "synced_at": row.synced_at}


def routes(router: Router, domain, confirm=True):
    """Adds the domain's commit-confirm operations to router (mounted at /<domain>)."""
    name = domain.name
    errors = {404: ProblemsOut, 409: ProblemsOut}

    @router.get("/state", response=CommitStateOut, auth=READ, url_name=f"{name}_state",
                summary=f"The {domain.label}'s confirmed and pending revisions",
                operation_id=f"{name}_state")
    def state(request):
        return state_out(domain)

    @router.get("/revisions", response=list[RevisionSummaryOut], auth=READ,
                summary=f"The {domain.label}'s revisions, newest first",
                operation_id=f"{name}_revisions")
    def revisions(request, filters: Query[HistoryFilter]):
        return kit.history(domain, filters.limit)

    @router.get("/revisions/{number}", response={200: RevisionOut, 404: ProblemsOut},
                auth=READ, summary="One revision", operation_id=f"{name}_revision")
    def revision(request, number: int = Path(..., ge=1, le=INT_MAX)):
        found = kit.revision(domain, number)
        return {"number": found.number, "created": found.created, "user": found.user,
                "action": found.action, "outcome": found.outcome,
                "texts": {field: domain.show(getattr(found, field))
                          for field in domain.heavy_fields}}

    @router.get("/revisions/{number}/diff", response={200: DiffOut, 404: ProblemsOut},
                auth=READ, summary="A revision against the one before it",
                operation_id=f"{name}_diff")
    def revision_diff(request, number: int = Path(..., ge=1, le=INT_MAX)):
        compared = kit.compare(domain, number)
        return {"revision": compared.revision.number,
                "previous": compared.previous.number if compared.previous else None,
                "diff": compared.diff}

    if confirm:
        @router.post("/confirm", response={202: JobOut, **errors}, auth=OPERATE,
                     summary=f"Confirm the pending {domain.label}",
                     operation_id=f"{name}_confirm")
        def confirm_pending(request, response: HttpResponse):
            return accepted(response, kit.confirm(domain, request.auth.actor()))

    @router.post("/cancel", response={202: JobOut, **errors}, auth=OPERATE,
                 summary=f"Roll the pending {domain.label} back now",
                 operation_id=f"{name}_cancel")
    def cancel_pending(request, response: HttpResponse):
        return accepted(response, kit.cancel(domain, request.auth.actor()))

    if domain.rollback:
        @router.post("/rollback", response={202: JobOut, **errors}, auth=ADMIN,
                     summary=f"Return to a {domain.label} revision (pending until confirmed)",
                     operation_id=f"{name}_rollback")
        def rollback(request, response: HttpResponse, body: RollbackIn):
            return accepted(response, kit.rollback(domain, request.auth.actor(),
                                                   body.revision))
    return router
