"""Upgrades (docs/UPGRADES.md): the slots and what happened to them, an update bundle
sent as the body (RAUC checks its signature and installs it into the other slot: the
job system.upgrade), and the reboot into it. The new slot is marked good by the box's
own health check once it has booted - not by a call, so that a release that does not
come up undoes itself; a program waits for `health.passed` of the new release.

nginx asks the upload gate (accounts/views.py upload_gate: an admin token, or an admin's
session with a recent second factor) before it reads a byte of the body, which may be
gigabytes; this view streams it into upgrade_dir, never into memory."""
from typing import Any

from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from system import services

from .auth import ADMIN, ADMIN_STEP_UP, READ
from .jobs import accepted, job_out
from .schemas import JobOut, ProblemsOut

router = Router(tags=["system"])


class SystemOut(Schema):
    slots: dict[str, Any] = Field(description="The slots (booted, next, each slot's "
                                              "release and state); {} off the appliance")
    health: dict[str, Any] | None = Field(description="The last health check: slot, "
                                                      "release, trial, passed, failures")
    events: list[dict[str, Any]] = Field(description="Upgrades, fallbacks, newest first")
    upgrading: JobOut | None = Field(description="The upgrade or reboot under way")
    last_upgrade: JobOut | None


class BundleQuery(Schema):
    name: str = Field("bundle.raucb", min_length=1, max_length=255,
                      description="The bundle's file name, for the record")


BUNDLE_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": {
    "schema": {"type": "string", "format": "binary"}}}}}


@router.get("/system", response=SystemOut, auth=READ, operation_id="system_get",
            summary="The system slots, the last health check and upgrades")
def get_system(request):
    busy, last = services.upgrading(), services.last_upgrade()
    return {"slots": services.state_file("slots.json") or {},
            "health": services.state_file("health.json"), "events": services.events(),
            "upgrading": busy and job_out(busy), "last_upgrade": last and job_out(last)}


@router.post("/system/upgrade", response={202: JobOut, 409: ProblemsOut, 413: ProblemsOut,
                                               422: ProblemsOut},
             auth=ADMIN_STEP_UP, openapi_extra=BUNDLE_BODY, operation_id="system_upgrade",
             summary="Install an update bundle (the body) into the other slot")
def upgrade(request, response: HttpResponse, query: Query[BundleQuery]):
    try:
        stored_as, size = services.receive(request.read)
    except services.BundleTooLarge as error:
        return Status(413, {"problems": [{"code": "TOO_LARGE", "path": "",
                                          "message": str(error)}]})
    if size == 0:
        services.discard(stored_as)
        return Status(422, {"problems": [{"code": "INVALID", "path": "body",
                                          "message": "empty: the body is the bundle's bytes"}]})
    return accepted(response, services.upgrade(request.auth.actor(), query.name, stored_as,
                                               size))


@router.post("/system/reboot", response={202: JobOut, 409: ProblemsOut}, auth=ADMIN,
             operation_id="system_reboot", summary="Reboot (into the slot that boots next)")
def reboot(request, response: HttpResponse):
    return accepted(response, services.reboot(request.auth.actor()))
