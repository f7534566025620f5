"""Jobs: what the agent runs for a call (an apply, a confirm, a capture). Every call that
queues one answers 202 with it and its address; poll that until `done`."""
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Path, Query, Router, Schema, Status
from pydantic import Field

from jobs.models import Job
from tusklib.rowvalues import utc_time

from .auth import READ
from .schemas import BIGINT_MAX, JobOut

router = Router(tags=["jobs"])
LIST_MAX = 500


def job_out(job):
    result = job.result if isinstance(job.result, dict) else {}
    problems = result.get("problems") if isinstance(result.get("problems"), list) else []
    revision = result.get("revision")
    return {
        "id": job.pk, "kind": job.kind, "state": job.state, "progress": job.progress,
        "message": job.message, "error": job.error,
        "created_by": job.created_by.get_username() if job.created_by else None,
        "created_at": job.created_at, "started_at": job.started_at,
        "finished_at": job.finished_at, "done": job.done,
        "deadline": utc_time(result.get("deadline")),
        "revision": revision if isinstance(revision, int) and not isinstance(revision, bool)
        else None,
        "outcome": result.get("outcome") if isinstance(result.get("outcome"), str) else None,
        "problems": [{"code": str(p.get("code", "")), "path": str(p.get("path", "")),
                      "message": str(p.get("message", ""))}
                     for p in problems if isinstance(p, dict)],
        "url": reverse("api:job", args=[job.pk])}


def queued_job(response, queued):
    """A queued job's resource, its address in the answer's Location."""
    job = Job.objects.select_related("created_by").get(pk=queued.job)
    response["Location"] = reverse("api:job", args=[job.pk])
    return job_out(job)


def accepted(response, queued):
    """A queued job as the 202 answer: the job, and its address in Location."""
    return Status(202, queued_job(response, queued))


class JobFilter(Schema):
    kind: str | None = Field(None, pattern=r"^[a-z0-9_.]{1,64}$",
                             description="Only jobs of this kind, e.g. policy.apply")
    state: Job.State | None = None
    limit: int = Field(50, ge=1, le=LIST_MAX)


@router.get("/jobs", response=list[JobOut], auth=READ, summary="Jobs, newest first")
def list_jobs(request, filters: Query[JobFilter]):
    rows = Job.objects.select_related("created_by")
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    if filters.state:
        rows = rows.filter(state=filters.state)
    return [job_out(job) for job in rows[:filters.limit]]


@router.get("/jobs/{job_id}", response=JobOut, auth=READ, url_name="job",
            summary="One job")
def get_job(request, job_id: int = Path(..., ge=1, le=BIGINT_MAX)):
    return job_out(get_object_or_404(Job.objects.select_related("created_by"), pk=job_id))
