"""Tuning's operations, called by the Tuning page and every other front end alike:
queue tusk-tune's plan or apply of a profile (checked here first: one the catalogue has
and that loads), its verify, its rollback; read the reports the agent stored. Refusals
are the profile's own TuneError or a ServiceError NOT_FOUND."""
from django.db import transaction

from accounts import audit
from commitkit.services import Queued
from jobs import queue as jobs
from tusklib.problems import Refusal, ServiceError

from .core import profile as profiles
from .models import TuningReport

PROFILE_KINDS = ("plan", "apply")


def catalogue():
    """{name: summary} of the profiles an operator chooses from, and {name: TuneError}
    of those that do not load."""
    found = profiles.catalogue()
    return ({name: info["summary"] for name, info in found.items() if "error" not in info},
            {name: info["error"] for name, info in found.items() if "error" in info})


def check_profile(name):
    good, broken = catalogue()
    if name in broken:
        raise broken[name]
    if name not in good:
        raise ServiceError(Refusal.NOT_FOUND, "profile", f"no tuning profile {name!r} "
                                                         f"(there are: {', '.join(good)})")
    return name


def run(actor, kind, profile=None):
    """Queues tuning.<kind> (plan, apply: of profile; verify, rollback), audited.
    -> Queued"""
    args = {"profile": check_profile(profile)} if kind in PROFILE_KINDS else {}
    with transaction.atomic():
        job = jobs.enqueue(f"tuning.{kind}", args, actor.user)
        audit.record_for(actor, f"tuning {kind}", profile or "", job=job.pk)
    return Queued(job=job.pk, kind=job.kind)


def reports():
    """{kind: the TuningReport} of the last plan, apply, verify and rollback."""
    return {r.kind: r for r in TuningReport.objects.select_related("job")}
