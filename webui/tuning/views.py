"""The Tuning page: the hardware tusk-tune found, its plan for a profile, the last
apply, verify and rollback, and the buttons that queue them as agent jobs. Only the
agent runs tusk-tune; a GET shows what it stored (TuningReport) and queues nothing."""
import json

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from accounts.audit import Actor
from jobs.models import Job

from . import services
from .core import profile as profiles
from .core.report import Write
from .forms import ProfileForm
from .models import TuningReport

KINDS = ("tuning.plan", "tuning.apply", "tuning.verify", "tuning.rollback",
         "backup.tuning")  # a restore applies the backup's profile


def _shown(write, value):
    """A value as tusk-tune prints it: a CPU mask with its CPUs, ethtool's on/off."""
    return Write.from_dict(write).show(value)


def _nic_rows(nics):
    """The NICs as table rows, built here rather than in a template loop: most cells
    have a fallback for what a driver does not report."""
    rows = []
    for nic in nics:
        pci = nic["pci"]
        link, usable = "-", "-"
        if pci:
            link = pci["link"] + (f" (card {pci['card']})"
                                  if pci["card"] and pci["card"] != pci["link"] else "")
            usable = pci["usable_gbps"]
        mtu_max = nic["mtu_range"]["max"] if nic["mtu_range"] else "-"
        rows.append(format_html(
            '<tr data-nic="{0}"><td>{0}</td><td>{1}</td><td class="num">{2}</td><td>{3}</td>'
            '<td class="num">{4}</td><td class="num">{5}</td><td class="num">{6} rx / {7} tx'
            '</td><td class="num">{8}</td><td class="num">{9} / {10}</td></tr>',
            nic["name"], nic["driver"] or "unknown",
            f"{nic['speed_mbps']} Mb/s" if nic["speed_mbps"] else "unknown", link, usable,
            nic["numa_node"] if nic["numa_node"] >= 0 else "-", nic["rx_queues"],
            nic["tx_queues"], nic["queue_irqs"], nic["mtu"], mtu_max))
    return mark_safe("\n".join(rows))


def _change_rows(writes, undone=False):
    """Writes as rows: label, old -> new, why. Built here like the policy lists' rows: a
    many-queue machine's plan has a hundred or more. undone: a rollback's, which set
    each value back from new to old."""
    return format_html_join(
        "\n", '<tr data-label="{0}"><td><code>{0}</code></td><td>{1} → {2}</td><td>{3}</td>'
        '</tr>',
        ((w["label"], _shown(w, w["new"] if undone else w["old"]),
          _shown(w, w["old"] if undone else w["new"]), w["reason"]) for w in writes))


def _skipped_rows(skipped):
    return format_html_join("\n", "<tr><td><code>{}</code></td><td>{}</td></tr>",
                            ((s["label"], s["why"]) for s in skipped))


def _page(request, form=None, status=200):
    reports = services.reports()
    plan, verify = reports.get(TuningReport.Kind.PLAN), reports.get(TuningReport.Kind.VERIFY)
    if form is None:
        form = ProfileForm(initial={"profile": plan.profile if plan else
                                    profiles.DEFAULT_PROFILE})
    context = {"form": form, "plan": plan, "verify": verify,
               "busy": Job.objects.filter(kind__in=KINDS, state__in=(
                   Job.State.QUEUED, Job.State.RUNNING)).first()}
    if plan and plan.result:
        context.update(hardware=plan.result["hardware"],
                       nic_rows=_nic_rows(plan.result["hardware"]["nics"]),
                       write_rows=_change_rows(plan.result["writes"]))
    changed = []
    for kind in (TuningReport.Kind.APPLY, TuningReport.Kind.ROLLBACK):
        report = reports.get(kind)
        if report and report.result:
            report.written_rows = _change_rows(report.result["written"],
                                               undone=kind == TuningReport.Kind.ROLLBACK)
            report.skipped_rows = _skipped_rows(report.result["skipped"])
            changed.append(report.finished_at)
        context[kind.value] = report
    # the values verify compared were applied or rolled back after it
    context["verify_stale"] = bool(verify and changed and verify.finished_at < max(changed))
    return render(request, "tuning/tuning.html", context, status=status)


def tuning(request):
    """What the agent last stored; a GET never queues a job."""
    return _page(request)


def _queue(request, kind, profile=None):
    """Queues the job (services.run: with its audit entry), then on to the job's progress
    page, which comes back here when it is done. The buttons post with htmx (for
    hx-confirm): to an htmx request the page is named in HX-Location, which htmx follows
    like a link."""
    queued = services.run(Actor.of(request), kind, profile)
    url = reverse("job", args=[queued.job]) + "?next=tuning"
    if request.headers.get("HX-Request"):
        response = HttpResponse(status=204)
        response["HX-Location"] = json.dumps({"path": url, "target": "main"})
        return response
    return redirect(url)


def _with_profile(request, kind):
    form = ProfileForm(request.POST)
    if form.is_valid():
        return _queue(request, kind, form.cleaned_data["profile"])
    # htmx swaps only a 2xx answer into the page: it gets the errors with 200
    return _page(request, form, status=200 if request.headers.get("HX-Request") else 400)


@require_POST
def plan(request):
    return _with_profile(request, "plan")


@require_POST
def apply(request):
    return _with_profile(request, "apply")


@require_POST
def verify(request):
    return _queue(request, "verify")


@require_POST
def rollback(request):
    return _queue(request, "rollback")
