"""The Flows page: the connections crossing the firewall now, fastest first, as the
agent's sampler last saw them (its periodic task's result: the web process never
speaks netlink), with Capture this flow, Diagnose and, for admins, Drop - each a job
the agent checks again."""

from django.conf import settings
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.audit import Actor
from accounts.roles import is_admin
from jobs.models import Job

from . import services
from .agent_jobs import CAPTURE, DROP
from .core.export import COLLECTORS_MAX
from .core.hook import HookError
from .forms import BlockForm, CaptureForm, ExportForm, FlowForm, SettingsForm
from .models import FlowSettings

ACTIONS_SHOWN = 10
HOOKS_SHOWN = 100


def _age(seconds):
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _context(flow_settings=None, settings_form=None, refused=None):
    found = services.listing(flow_settings)
    for flow in found.flows:
        flow["age_text"] = _age(flow["age"])
    snapshot = found.snapshot
    return {
        "snapshot": snapshot, "flows": found.flows, "settings": found.settings,
        "elephants": sum(1 for f in found.flows if f["elephant"]),
        "sampled_ago": found.sampled_ago, "stale": found.stale,
        "sample_error": found.sample_error,
        "poll": max(1, round(settings.TUSK.sample_interval)),
        "cpu_percent": 100 * snapshot["cpu"]["share"] if snapshot else None,
        "settings_form": settings_form or SettingsForm(instance=found.settings),
        "refused": refused,
        "actions": Job.objects.filter(kind__in=(CAPTURE, DROP)).select_related(
            "created_by")[:ACTIONS_SHOWN],
        "hooks": services.hooks()[:HOOKS_SHOWN],
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


def _capture(request, analyze):
    form = CaptureForm(request.POST)
    if not form.is_valid():
        return _refused(request, form)
    queued = services.capture(Actor.of(request), form.cleaned_data["flow"].as_dict(),
                              form.cleaned_data["seconds"], analyze)
    return redirect("flows_action", queued.job)


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
    return redirect("flows_action", services.drop(Actor.of(request), ref.as_dict()).job)


def block(request):
    """GET: the block form (?prefix= fills it in: the Flows table's Block... of a
    connection's client); POST: the IDS hook's block job, checked by the agent's own
    check first."""
    form = BlockForm(request.POST if request.method == "POST" else None,
                     initial={"prefix": request.GET.get("prefix", "")[:64]})
    if request.method == "POST" and form.is_valid():
        try:
            queued, _ = services.hook(Actor.of(request), "block", form.match())
        except HookError as error:
            form.add_problems(error)
        else:
            return redirect(reverse("job", args=[queued.job]) + "?next=flows")
    return render(request, "flows/block.html", {"form": form},
                  status=400 if form.errors else 200)


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


def export_page(request):
    """Flow export: the collectors, the protocol, the active timeout (admins change
    them; the agent applies them), and what the exporter last reported."""
    state = services.export_state()
    form = None
    status = 200
    if request.method == "POST":
        form = ExportForm(request.POST)
        if form.is_valid():
            services.set_export(Actor.of(request), form.cleaned_data["settings"].as_dict())
            return redirect("flows_export")
        status = 400
    form = form or ExportForm(initial=ExportForm.initial_of(state.document))
    return render(request, "flows/export.html", {
        "state": state, "form": form, "is_admin": is_admin(request.user),
        "collectors_max": COLLECTORS_MAX}, status=status)
