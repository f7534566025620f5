"""The Flows page: the connections crossing the firewall now, fastest first, as the
agent's sampler last saw them (its periodic task's result: the web process never
speaks netlink), with Capture this flow, Diagnose and, for admins, Drop - each a job
the agent checks again."""
import bisect
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts import audit
from dashboard import loss
from dashboard.models import RETENTION, Sample
from jobs import queue
from jobs.models import Job, PeriodicState
from tusklib import contracts

from .agent_jobs import CAPTURE, DROP, SAMPLE
from .classes import class_names
from .contracts import FlowSample
from .forms import CaptureForm, FlowForm, SettingsForm
from .models import FlowSettings

STALE_SAMPLES = 3      # samples missed before the page says the list is old
ACTIONS_SHOWN = 10
MAX_AGE = 10 * 365 * 86400   # seconds: older is no age a connection has


def _age(seconds):
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


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


def _context(flow_settings=None, settings_form=None, refused=None):
    flow_settings = flow_settings or FlowSettings.current()
    state = PeriodicState.objects.filter(name=SAMPLE).first()
    # the row is the web user's to write: one not of the contract's shape is no sample
    found = contracts.read(FlowSample, state.result) if state else None
    snapshot = contracts.table(found) if found is not None else None
    threshold = flow_settings.elephant_mbps * 1_000_000
    names = class_names()
    flows = []
    for flow in (snapshot or {}).get("flows", [])[:flow_settings.rows]:
        rate = sum(flow["bps"]) if flow["bps"] else None
        flows.append({**flow, "rate": rate, "age_text": _age(flow["age"]),
                      "lost": None, "lost_since": None,
                      "elephant": (flow["estimate"] if rate is None else rate) >= threshold,
                      "class_name": names.get(flow["class"], "") if flow["class"] else ""})
    lost_while(flows, timezone.now())
    interval = settings.TUSK.sample_interval
    age = time.time() - snapshot["at"] if snapshot else None
    return {
        "snapshot": snapshot, "flows": flows, "settings": flow_settings,
        "elephants": sum(1 for f in flows if f["elephant"]),
        "sampled_ago": age, "stale": age is not None and age > STALE_SAMPLES * interval,
        "sample_error": state.error if state else "", "poll": max(1, round(interval)),
        "cpu_percent": 100 * snapshot["cpu"]["share"] if snapshot else None,
        "settings_form": settings_form or SettingsForm(instance=flow_settings),
        "refused": refused,
        "actions": Job.objects.filter(kind__in=(CAPTURE, DROP)).select_related(
            "created_by")[:ACTIONS_SHOWN],
    }


def index(request):
    return render(request, "flows/index.html", _context())


def table(request):
    """The list alone, which the page polls."""
    return render(request, "flows/table.html", _context())


@require_POST
def save_settings(request):
    current = FlowSettings.current()
    form = SettingsForm(request.POST, instance=current)
    if not form.is_valid():
        return render(request, "flows/index.html", _context(current, settings_form=form),
                      status=400)
    with transaction.atomic():
        saved = form.save(commit=False)
        saved.updated_by = request.user
        saved.save()
        audit.record(request, "flows settings", "flows", **form.cleaned_data)
    return redirect("flows")


def _refused(request, form):
    """The page again, saying why the action was refused (a stale or forged row)."""
    reasons = [f"{name}: {message}" if name != "__all__" else message
               for name, messages in form.errors.items() for message in messages]
    return render(request, "flows/index.html", _context(refused=reasons), status=400)


def _queue(request, kind, args, action, ref):
    """The job and its audit entry together; then the job's page."""
    with transaction.atomic():
        job = queue.enqueue(kind, args, request.user)
        audit.record(request, action, str(ref), job=job.pk, **ref.as_dict())
    return redirect("flows_action", job.pk)


def _capture(request, analyze):
    form = CaptureForm(request.POST)
    if not form.is_valid():
        return _refused(request, form)
    ref = form.cleaned_data["flow"]
    return _queue(request, CAPTURE, {"flow": ref.as_dict(), "seconds": form.cleaned_data["seconds"],
                                     "analyze": analyze},
                  "flow diagnose" if analyze else "flow capture", ref)


@require_POST
def capture(request):
    return _capture(request, analyze=False)


@require_POST
def diagnose(request):
    return _capture(request, analyze=True)


def drop(request):
    """GET: the connection and a button to drop it (the confirmation); POST: the job."""
    form = FlowForm(request.POST if request.method == "POST" else request.GET)
    if not form.is_valid():
        return _refused(request, form)
    ref = form.cleaned_data["flow"]
    if request.method != "POST":
        return render(request, "flows/drop.html", {"form": form, "flow": ref})
    return _queue(request, DROP, {"flow": ref.as_dict()}, "flow drop", ref)


def action(request, pk):
    """A flows job's progress, polled until it is done; a finished Diagnose goes on to
    its health report."""
    job = get_object_or_404(Job, pk=pk, kind__in=(CAPTURE, DROP))
    result = job.result if isinstance(job.result, dict) else {}
    report = result.get("report") if job.state == Job.State.SUCCEEDED else None
    response = render(request, "flows/action.html", {"job": job, "result": result,
                                                      "report": report})
    if report and request.headers.get("HX-Request"):
        response["HX-Redirect"] = reverse("diag_report", args=[report])
    return response
