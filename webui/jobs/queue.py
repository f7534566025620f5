"""The job queue: rows in jobs_job, announced to the agent with PostgreSQL NOTIFY.

Web process: enqueue() - the row and the NOTIFY commit together, so the agent never
hears of a job it cannot see, and a job whose request failed never exists.
Agent: claim() takes the oldest queued job with FOR UPDATE SKIP LOCKED; progress(),
succeed() and fail() record what happened in the row, which the job's page polls.
"""
import logging

from django.db import connection, transaction
from django.utils import timezone

from .models import Job
from .registry import known_kinds

log = logging.getLogger("tusk.agent")
CHANNEL_NEW = "tusk_jobs"  # payload: job id
MAX_ATTEMPTS = 3


def enqueue(kind, args=None, user=None):
    if kind not in known_kinds():
        raise ValueError(f"unknown job kind {kind!r}")
    with transaction.atomic():
        job = Job.objects.create(kind=kind, args=args or {},
                                 created_by=user if user and user.is_authenticated else None)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL_NEW, str(job.pk)])
    return job


def claim(agent, only=None, exclude=None):
    """The oldest queued job (of the kinds in `only`, if given, and not in `exclude`),
    now running and owned by agent; None if there is none."""
    with transaction.atomic():
        queued = Job.objects.select_for_update(skip_locked=True).filter(state=Job.State.QUEUED)
        if only is not None:
            queued = queued.filter(kind__in=only)
        if exclude:
            queued = queued.exclude(kind__in=exclude)
        job = queued.order_by("id").first()
        if job is None:
            return None
        job.state = Job.State.RUNNING
        job.agent = agent
        job.started_at = timezone.now()
        job.attempts += 1
        job.message = "started"
        job.save(update_fields=["state", "agent", "started_at", "attempts", "message"])
    return job


def progress(job, percent, message=""):
    percent = max(0, min(100, int(percent)))
    Job.objects.filter(pk=job.pk, state=Job.State.RUNNING).update(progress=percent,
                                                                  message=message)
    job.progress, job.message = percent, message


def succeed(job, result=None, message="done"):
    _finish(job, Job.State.SUCCEEDED, result=result, message=message, error="")


def fail(job, error, result=None):
    _finish(job, Job.State.FAILED, result=result, message="failed", error=error)


def _finish(job, state, **fields):
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=now, **fields,
                                         **({"progress": 100} if state == "succeeded" else {}))
    job.refresh_from_db()


def recover(agent, retry_safe, abandoned=None):
    """At agent start: jobs left running by an agent that died. A job whose kind may
    run twice (retry_safe(kind)) is queued again, up to MAX_ATTEMPTS; any other one
    fails with what happened, since half of it may have been done, and abandoned(job)
    settles what it left (a capture fails with it) in the same transaction - whoever
    sees the job failed sees the rest settled. A hook that raises is undone alone
    (its savepoint) and logged; the job fails all the same."""
    requeued, failed = [], []
    with transaction.atomic():
        orphans = list(Job.objects.select_for_update()
                       .filter(state=Job.State.RUNNING).exclude(agent=agent))
        for job in orphans:
            if retry_safe(job.kind) and job.attempts < MAX_ATTEMPTS:
                job.state = Job.State.QUEUED
                job.message = (f"queued again: agent {job.agent} stopped while running it "
                               f"(attempt {job.attempts})")
                job.save(update_fields=["state", "message"])
                requeued.append(job.pk)
                continue
            job.state = Job.State.FAILED
            job.finished_at = timezone.now()
            job.message = "failed"
            job.error = (f"the agent ({job.agent}) stopped while running this job; it was "
                         "not run again because it may have been partly done - check the "
                         "result and submit it again")
            job.save(update_fields=["state", "finished_at", "message", "error"])
            failed.append(job.pk)
            if abandoned:
                try:
                    with transaction.atomic():
                        abandoned(job)
                except Exception:  # one job's leftovers must not keep the agent down
                    log.exception("settling what job %s left failed", job.pk)
    return requeued, failed
