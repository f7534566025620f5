"""Backup (README.md, Backup), as the Backup page does it: download the configuration as one
JSON file; send one back as a pending restore, which answers with everything restoring
it would change (the page's preview) and the preview's token; restore it with that
token - refused (409) once the box changed since - with the choices the page offers
(which of the backup's policies, apply now, this box's port for each of the backup's,
or the box's network kept). The restored policy's apply is the normal one: unconfirmed,
it rolls back. The file holds the users' password hashes: admin only, and a session's
restore needs a recent second factor, as the page does."""
from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from django.urls import reverse
from ninja import Path, Query, Router, Schema, Status
from pydantic import Field

from backup import document as backups
from backup import restore as restores
from backup import services
from backup.forms import PORT_FIELD, confirm_form
from tusklib.problems import Problem, Refusal, ServiceError

from .auth import ADMIN, ADMIN_STEP_UP
from .documents import read_body
from .jobs import job_out
from .schemas import BIGINT_MAX, JobOut, ProblemsOut

router = Router(tags=["backup"])
ID = Path(..., ge=1, le=BIGINT_MAX)
NAME = r"^[A-Za-z0-9._+~-]{1,200}$"


class PendingOut(Schema):
    id: int
    name: str
    sha256: str
    uploaded_at: datetime
    plan: dict[str, Any] = Field(description="What restoring it would change: policy, "
                                             "users, tuning, network (null: the backup "
                                             "has none), and the preview's token")
    url: str


class RestoreIn(Schema):
    token: str = Field(min_length=1, max_length=128,
                       description="The plan's token: the restore is refused (409) once "
                                   "what it replaces changed since")
    source: Literal["draft", "confirmed"] = Field(
        "draft", description="Which of the backup's policies (and networks) become the "
                             "drafts")
    apply: bool = Field(True, description="Queue the normal apply of the restored policy "
                                          "(confirm it, or it rolls back)")
    ports: dict[str, str] = Field(
        default_factory=dict, max_length=64,
        description="{the backup's port: this box's port}, for a backup whose ports this "
                    "box does not all have")
    keep_network: bool = Field(False, description="Leave this box's network as it is")


class RestoredOut(Schema):
    users: dict[str, list[str]] = Field(description="added, updated, removed, unchanged")
    policy_job: JobOut | None = Field(description="The apply of the restored policy")
    tuning_job: JobOut | None
    network: dict[str, Any] | None = Field(
        description="The network draft restored (never applied here: Network -> apply, "
                    "commit-confirm): source, renamed, changed, policy_waits")


class UploadQuery(Schema):
    name: str = Field("backup.json", pattern=NAME, description="The file's name, for the "
                                                               "record")


UPLOAD_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"type": "object", "description": "A file GET /backup made"}}}}}
FILE = {"responses": {200: {"description": "The backup file", "content": {
    "application/json": {"schema": {"type": "object"}}}}}}


def _out(actor, found):
    document = services.document_of(actor, found)
    return {"id": found.pk, "name": found.name, "sha256": found.sha256,
            "uploaded_at": found.uploaded_at, "plan": restores.plan(document),
            "url": reverse("api:backup_restore", args=[found.pk])}


@router.get("/backup", response={422: ProblemsOut}, auth=ADMIN, openapi_extra=FILE,
            operation_id="backup_download", summary="The backup file of this box now")
def download(request):
    name, data = services.download(request.auth.actor())
    response = HttpResponse(data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@router.post("/backup/restores", response={201: PendingOut, 422: ProblemsOut}, auth=ADMIN,
             openapi_extra=UPLOAD_BODY, operation_id="backup_upload",
             summary="Send a backup file: checked, kept as your pending restore, and "
                     "what restoring it would change")
def upload(request, response: HttpResponse, query: Query[UploadQuery]):
    actor = request.auth.actor()
    found = services.upload(actor, query.name, read_body(request, backups.MAX_BYTES))
    response["Location"] = reverse("api:backup_restore", args=[found.pk])
    return Status(201, _out(actor, found))


@router.get("/backup/restores/{restore_id}", response={200: PendingOut, 404: ProblemsOut,
                                                       422: ProblemsOut},
            auth=ADMIN, url_name="backup_restore", operation_id="backup_preview",
            summary="What restoring your pending backup would change now")
def preview(request, restore_id: int = ID):
    actor = request.auth.actor()
    return _out(actor, services.pending(actor, restore_id))


@router.delete("/backup/restores/{restore_id}", response={204: None, 404: ProblemsOut},
               auth=ADMIN, operation_id="backup_discard", summary="Discard it")
def discard(request, restore_id: int = ID):
    services.discard(request.auth.actor(), restore_id)
    return Status(204, None)


def _checked(form, body):
    """body's choices through the page's own ConfirmForm -> its cleaned data, or
    Problems naming each field (ports.<backup port> for a port's choice)."""
    problems = []
    if body.source == restores.CONFIRMED and "source" not in form.fields:
        problems.append(("source", "the backup has no confirmed revision to restore"))
    for name in sorted(set(body.ports) - set(form.ports)):
        problems.append((f"ports.{name}", "not a port of the backup that this box lacks "
                                          f"(to map: {', '.join(form.ports) or 'none'})"))
    if not form.is_valid() or problems:
        for field, messages in form.errors.items():
            path = (f"ports.{field[len(PORT_FIELD):]}" if field.startswith(PORT_FIELD)
                    else "" if field == "__all__" else field)
            problems += [(path, message) for message in messages]
        raise backups.BackupError([Problem(backups.Code.VALUE, path, message)
                                   for path, message in problems])
    return form.cleaned_data


@router.post("/backup/restores/{restore_id}/restore",
             response={200: RestoredOut, 404: ProblemsOut, 409: ProblemsOut,
                       422: ProblemsOut},
             auth=ADMIN_STEP_UP, operation_id="backup_restore",
             summary="Restore your pending backup, as its plan (token) says")
def restore(request, body: RestoreIn, restore_id: int = ID):
    actor = request.auth.actor()
    found = services.pending(actor, restore_id)
    document = services.document_of(actor, found)
    data = {"token": body.token, "source": body.source, "apply": body.apply,
            "keep_network": body.keep_network,
            **{PORT_FIELD + name: port for name, port in body.ports.items()}}
    data = _checked(confirm_form(document, data), body)
    try:
        changes, apply_job, tuning_job, network = restores.restore(
            actor, found, data["token"], data.get("source", restores.DRAFT), data["apply"],
            data["ports"], data.get("keep_network", False))
    except restores.StaleRestore:
        raise ServiceError(Refusal.STALE, "token", "the box changed since this plan: read "
                                                   "it again and restore with its token") \
            from None
    if request.auth.token is None:
        restores.stay_signed_in(request)
    return {"users": changes["users"], "policy_job": apply_job and job_out(apply_job),
            "tuning_job": tuning_job and job_out(tuning_job), "network": network}
