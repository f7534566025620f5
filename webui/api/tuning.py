"""Tuning (docs/TUNING.md): the profiles there are, what tusk-tune last reported for each
kind of run (plan: the hardware and the writes; apply and rollback: what was written;
verify: what differs), and the runs themselves - plan and verify change nothing
(operate), apply and rollback change the box (admin). Each answers 202 with its job."""
from datetime import datetime
from typing import Any

from django.http import HttpResponse
from ninja import Router, Schema
from pydantic import Field

from tuning import services

from .auth import ADMIN, OPERATE, READ
from .jobs import accepted
from .schemas import JobOut, ProblemsOut

router = Router(tags=["tuning"])


class ReportOut(Schema):
    profile: str
    job: int | None
    finished_at: datetime
    result: dict[str, Any] | None = Field(description="tusk-tune --json's report; null "
                                                      "when it failed")
    error: str


class TuningOut(Schema):
    profiles: dict[str, str] = Field(description="Each profile's summary")
    broken: dict[str, str] = Field(description="Profiles that do not load, and why")
    reports: dict[str, ReportOut] = Field(description="The last plan, apply, verify and "
                                                      "rollback")


class ProfileIn(Schema):
    profile: str = Field(min_length=1, max_length=64, description="A profile's name")


@router.get("", response=TuningOut, auth=READ, summary="Profiles and the last reports",
            operation_id="tuning_get")
def get_tuning(request):
    good, broken = services.catalogue()
    return {"profiles": good, "broken": {name: str(error) for name, error in broken.items()},
            "reports": {kind: {"profile": r.profile, "job": r.job_id,
                               "finished_at": r.finished_at,
                               "result": r.result if isinstance(r.result, dict) else None,
                               "error": r.error}
                        for kind, r in services.reports().items()}}


ERRORS = {202: JobOut, 404: ProblemsOut, 422: ProblemsOut}


@router.post("/plan", response=ERRORS, auth=OPERATE, operation_id="tuning_plan",
             summary="What a profile would change on this hardware (changes nothing)")
def plan(request, response: HttpResponse, body: ProfileIn):
    return accepted(response, services.run(request.auth.actor(), "plan", body.profile))


@router.post("/apply", response=ERRORS, auth=ADMIN, operation_id="tuning_apply",
             summary="Apply a profile (kept across reboots; rolled back by rollback)")
def apply(request, response: HttpResponse, body: ProfileIn):
    return accepted(response, services.run(request.auth.actor(), "apply", body.profile))


@router.post("/verify", response={202: JobOut}, auth=OPERATE, operation_id="tuning_verify",
             summary="Compare the applied profile with the box now (changes nothing)")
def verify(request, response: HttpResponse):
    return accepted(response, services.run(request.auth.actor(), "verify"))


@router.post("/rollback", response={202: JobOut}, auth=ADMIN,
             operation_id="tuning_rollback", summary="Undo the last apply")
def rollback(request, response: HttpResponse):
    return accepted(response, services.run(request.auth.actor(), "rollback"))
