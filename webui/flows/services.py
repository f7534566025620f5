"""The Flows page's operations, called by the page and every other front end alike: the
list of the fastest connections as the agent's sampler last saw them (with what the page
derives: rate, elephant, class name, the loss path while each ran), and the actions on
one connection - drop it, capture it (and its health report) - each a job the agent
checks again (flows/core/flowref.py). Refusals are FlowError, with the field's path."""
import bisect
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import audit
from commitkit.services import Queued
from dashboard import loss
from dashboard.models import RETENTION, Sample
from jobs import queue
from jobs.models import Job, PeriodicState
from tusklib import contracts

from .agent_jobs import CAPTURE, DROP, HOOK, SAMPLE
from .classes import class_names
from .contracts import Exporting, FlowSample
from .core import export as flowexport
from .core import flowref
from .core import hook as flowhook
from .export_jobs import APPLY as EXPORT_APPLY
from .export_jobs import WATCH as EXPORT_WATCH
from .models import FlowExportSettings, FlowSettings, HookEntry

STALE_SAMPLES = 3      # samples missed before the list counts as old
MAX_AGE = 10 * 365 * 86400   # seconds: older is no age a connection has


@dataclass(frozen=True)
class Listing:
    snapshot: dict | None     # the sample (contracts.table of FlowSample), None: none yet
    flows: list               # the fastest first, each with rate, elephant, class_name
    settings: FlowSettings
    sampled_ago: float | None
    stale: bool
    sample_error: str


def listing(flow_settings=None, rows=None):
    """The connections the sampler last kept, the fastest first (rows of them: the
    settings' by default), each elephant with the loss path's stages that lost packets
    while it ran."""
    flow_settings = flow_settings or FlowSettings.current()
    state = PeriodicState.objects.filter(name=SAMPLE).first()
    # the row is the web user's to write: one not of the contract's shape is no sample
    found = contracts.read(FlowSample, state.result) if state else None
    snapshot = contracts.table(found) if found is not None else None
    threshold = flow_settings.elephant_mbps * 1_000_000
    names = class_names()
    flows = []
    for flow in (snapshot or {}).get("flows", [])[:rows or flow_settings.rows]:
        rate = sum(flow["bps"]) if flow["bps"] else None
        flows.append({**flow, "rate": rate, "lost": None, "lost_since": None,
                      "elephant": (flow["estimate"] if rate is None else rate) >= threshold,
                      "class_name": names.get(flow["class"], "") if flow["class"] else ""})
    lost_while(flows, timezone.now())
    age = time.time() - snapshot["at"] if snapshot else None
    return Listing(snapshot, flows, flow_settings, age,
                   age is not None and age > STALE_SAMPLES * settings.TUSK.sample_interval,
                   state.error if state else "")


def lost_while(flows, now):
    """Each elephant's "lost": the loss path's stages that should stay at zero and grew
    while it ran (dashboard/loss.py) - from the first statistics sample at or after its
    start (or the oldest kept: "since"), to the newest. Which of its packets were the lost
    ones no counter says: these are the stages that lost packets while it ran."""
    wanted = [f for f in flows if f["elephant"] and type(f.get("age")) in (int, float)
              and 0 <= f["age"] < MAX_AGE]      # a forged row's age is no timedelta
    if not wanted:
        return
    kept = list(Sample.objects.filter(taken__gte=now - timedelta(seconds=RETENTION),
                                      loss__isnull=False).order_by("taken")
                .values_list("id", "taken"))
    if len(kept) < 2:
        return
    times = [taken for _, taken in kept]
    first = {}
    for flow in wanted:
        start = now - timedelta(seconds=flow["age"])
        first[id(flow)] = kept[min(bisect.bisect_left(times, start), len(kept) - 1)][0]
        # started before the oldest sample kept: what it lost is known since that one
        flow["lost_since"] = times[0] if start < times[0] else None
    rows = dict(Sample.objects.filter(id__in={*first.values(), kept[-1][0]})
                .values_list("id", "loss"))
    newest = rows.get(kept[-1][0])
    for flow in wanted:
        flow["lost"] = loss.grown(rows.get(first[id(flow)]), newest)


KEPT_AFTER_EXPIRY = timedelta(days=7)    # hook rows: the record, a week past their end


def hook(actor, action, match):
    """Queues the IDS hook's block or bypass of match ({"prefix"} or {"flow"}, with "ttl"
    and "reason"), checked by the agent's own check first. -> (Queued, HookEntry);
    HookError naming every bad field."""
    request = flowhook.request_of({**match, "action": action})
    now = timezone.now()
    with transaction.atomic():
        HookEntry.objects.filter(expires_at__lt=now - KEPT_AFTER_EXPIRY).delete()
        job = queue.enqueue(HOOK, request.as_dict(), actor.user)
        entry = HookEntry.objects.create(
            action=action, match=request.what[:120], request=request.as_dict(),
            reason=request.reason, created_by=actor.user, token=actor.token,
            expires_at=now + timedelta(seconds=request.ttl), job=job)
        audit.record_for(actor, f"flow {action}", str(request), job=job.pk,
                         ttl=request.ttl, reason=request.reason)
    return Queued(job=job.pk, kind=job.kind), entry


def hooks(now=None):
    """The IDS hook's entries in force (not expired), newest first."""
    return HookEntry.objects.filter(expires_at__gt=now or timezone.now()).select_related(
        "created_by", "job")


def _queue(actor, kind, args, action, ref):
    with transaction.atomic():
        job = queue.enqueue(kind, args, actor.user)
        audit.record_for(actor, action, str(ref), job=job.pk, **ref.as_dict())
    return Queued(job=job.pk, kind=job.kind)


def drop(actor, flow):
    """Queues the drop of flow (a table: FlowRef's fields). -> Queued; FlowError"""
    ref = flowref.drop_args({"flow": flow})["flow"]
    return _queue(actor, DROP, {"flow": ref.as_dict()}, "flow drop", ref)


def capture(actor, flow, seconds, analyze):
    """Queues a capture of flow on both sides of the firewall for seconds (and its health
    report when analyze). -> Queued; FlowError"""
    args = flowref.capture_args({"flow": flow, "seconds": seconds, "analyze": analyze})
    ref = args["flow"]
    return _queue(actor, CAPTURE, {"flow": ref.as_dict(), "seconds": args["seconds"],
                                   "analyze": analyze},
                  "flow diagnose" if analyze else "flow capture", ref)


# -- flow export ------------------------------------------------------------------------

@dataclass(frozen=True)
class ExportState:
    """Flow export as the page and the API show it: the saved document, its checked
    settings (None and refused when the row does not hold), what the agent last reported
    of the exporter, and the last settings job."""

    document: dict
    settings: flowexport.Settings | None
    refused: str
    status: Exporting | None
    job: object


def export_state():
    document = FlowExportSettings.objects.filter(pk=1).values_list("document", flat=True).first()
    document = document if isinstance(document, dict) else {}
    try:
        checked, refused = flowexport.check(document), ""
    except flowexport.ExportError as exc:
        checked, refused = None, str(exc)
    return ExportState(document, checked, refused, PeriodicState.read(EXPORT_WATCH, Exporting),
                       Job.objects.filter(kind=EXPORT_APPLY).order_by("-id").first())


def set_export(actor, document):
    """Saves flow export's settings (a document export.check takes) and queues the agent's
    apply, audited, in one transaction. -> (Queued, Settings); ExportError naming every
    bad field (nothing saved)."""
    checked = flowexport.check(document)
    with transaction.atomic():
        row, _ = FlowExportSettings.objects.select_for_update().get_or_create(pk=1)
        row.document, row.updated_by = checked.as_dict(), actor.user
        row.save()
        job = queue.enqueue(EXPORT_APPLY, {}, actor.user)
        audit.record_for(actor, "flow export settings", "flows", job=job.pk,
                         **checked.as_dict())
    return Queued(job=job.pk, kind=job.kind), checked
