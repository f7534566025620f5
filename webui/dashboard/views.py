import time
from datetime import timedelta

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from jobs import registry
from jobs.agent_jobs import HEARTBEAT
from jobs.models import AgentHeartbeat, Job, PeriodicState
from policy.models import TargetState
from policy.selectors import seqrand_available

from . import calculators, loss, stats
from .agent_jobs import WEB_CHECK
from .contracts import WebCheck
from .forms import PcieForm, WindowForm
from .health import AGENT_STALE, check, register, stale_after
from .health import run as run_checks
from .models import Sample

JOB_PATIENCE = 5     # seconds a job may wait to be claimed before the agent counts as stuck


def dashboard(request):
    return render(request, "dashboard/dashboard.html", live_context())


def live(request):
    return render(request, "dashboard/live.html", live_context())


def health(request):
    return render(request, "dashboard/health.html", {"checks": run_checks()})


def live_context():
    samples = stats.recent()
    data = stats.series(samples)
    rows = []
    for name, rates in sorted(data["interfaces"].items()):
        last = samples[-1].interfaces.get(name, {}) if samples else {}
        rows.append({"name": name, "rates": rates, "operstate": last.get("operstate", ""),
                     "now": {k: stats.latest(v) for k, v in rates.items()},
                     "dropped_total": last.get("rx_dropped", 0) + last.get("tx_dropped", 0)})
    cpus = [{"cpu": cpu, "values": values, "now": stats.latest(values)}
            for cpu, values in sorted(data["softirq"].items(), key=lambda i: int(i[0]))]
    newest = samples[-1] if samples else None
    lost = recent_loss()
    return {"interfaces": rows, "cpus": cpus, "sample": newest, "conntrack": data["conntrack"],
            "seqadj": newest.seqadj if newest else None,
            "seqrand_available": bool(seqrand_available()),
            "loss": {"sampled": bool(lost), "alarms": [r for r in lost if r.alarm],
                     "minutes": loss.RECENT // 60}}


def recent_loss():
    """The loss path's rows over the last loss.RECENT seconds of samples."""
    now = timezone.now()
    return loss.summary(Sample.objects.filter(
        taken__gte=now - timedelta(seconds=loss.RECENT)).order_by("taken").only("taken", "loss"),
        now)


def _loss_check():
    """Packet loss: failing while a stage that should stay at zero grows (the Loss page)."""
    rows = recent_loss()
    if not rows:
        return check("packet loss", None, "no samples of the loss path yet")
    alarms = [row for row in rows if row.alarm]
    if not alarms:
        return check("packet loss", True, f"no stage that should stay at zero grew in the "
                     f"last {loss.RECENT // 60} minutes")
    return check("packet loss", False, "losing at " + ", ".join(
        f"{row.stage.label}{' on ' + row.interface if row.interface else ''} ({row.total})"
        for row in alarms) + ": see the Loss page")


@register
def own_checks():
    """What the agent keeps current on its own (heartbeat, web check, the table's
    state) and the loss path, read: polling this creates nothing."""
    checks = []
    web = PeriodicState.read(WEB_CHECK, WebCheck)
    if web is not None and web.url and web.at is not None:
        age = time.time() - web.at
        ok = web.status == 200 and age < stale_after(WEB_CHECK)
        checks.append(check("web", ok, f"GET {web.url}: "
                            + (f"HTTP {web.status} in {web.ms} ms"
                                if web.status else web.error or "no answer")
                             + f", {age:.0f} s ago (checked by the agent)"))
    else:
        checks.append(check("web", None, "not checked: the agent has no web_url configured"))
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks.append(check("database", True, f"answered a query in "
                            f"{(time.monotonic() - started) * 1000:.1f} ms"))
    except Exception as exc:  # the check reports, it does not fail the page
        checks.append(check("database", False, f"query failed: {exc}"))
    checks.append(_agent_check())
    checks.append(_nft_check())
    checks.append(_loss_check())
    return checks


def _agent_check():
    """Alive: its heartbeat (a periodic task of its own) is recent. Taking jobs: no job
    has waited longer than JOB_PATIENCE to be claimed (but the long-running kinds, which
    wait for a slot of their own pool by design)."""
    now = timezone.now()
    heartbeat = AgentHeartbeat.objects.first()
    if heartbeat is None:
        return check("agent", None, "has not started yet")
    silent = (now - heartbeat.seen_at).total_seconds()
    if silent > stale_after(HEARTBEAT, AGENT_STALE):
        return check("agent", False, f"no heartbeat for {silent:.0f} s")
    waiting = (Job.objects.filter(state=Job.State.QUEUED)
               .exclude(kind__in=registry.long_running_kinds()).order_by("id").first())
    waited = (now - waiting.created_at).total_seconds() if waiting else 0
    if waited > JOB_PATIENCE:
        return check("agent", False, f"alive, but job {waiting.pk} ({waiting.kind}) has "
                     f"waited {waited:.0f} s to be taken")
    return check("agent", True, f"heartbeat {silent:.0f} s ago, taking jobs")


def _nft_check():
    state = TargetState.objects.filter(pk=1).first()
    if state is None or state.synced_at is None:
        return check("nftables", None, "the agent has not reported yet")
    age = (timezone.now() - state.synced_at).total_seconds()
    if not state.table_loaded:
        return check("nftables", state.confirmed is None, "no Tusk ruleset is loaded" + (
            "" if state.confirmed is None else f" but revision {state.confirmed} is confirmed"))
    if state.pending:
        return check("nftables", True, f"revision {state.pending} loaded, awaiting "
                     f"confirmation (checked {age:.0f} s ago)")
    if state.matches:
        return check("nftables", True, f"revision {state.confirmed} loaded and unchanged "
                     f"(checked {age:.0f} s ago)")
    return check("nftables", False, f"the loaded ruleset differs from revision "
                 f"{state.confirmed}: changed outside Tusk (checked {age:.0f} s ago)")


@login_not_required
def healthz(request):
    """For the agent's check and load balancers: the web process answers and reaches
    the database. No details to anonymous callers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return HttpResponse("database unreachable\n", status=503, content_type="text/plain")
    return HttpResponse("ok\n", content_type="text/plain")


def tools(request):
    window = WindowForm(request.GET if "bandwidth" in request.GET else None)
    pcie = PcieForm(request.GET if "lanes" in request.GET else None)
    context = {"window_form": window, "pcie_form": pcie}
    if window.is_bound and window.is_valid():
        data = window.cleaned_data
        bdp = calculators.bdp_bytes(data["bandwidth"] * 1e6, data["rtt"] / 1000)
        context["window"] = {"bdp": bdp, "shift": calculators.window_shift(bdp),
                             "unscaled_cap": calculators.window_cap_bps(
                                 calculators.MAX_WINDOW_UNSCALED, data["rtt"] / 1000)}
        if data["window"]:
            context["window"]["cap"] = calculators.window_cap_bps(data["window"],
                                                                  data["rtt"] / 1000)
            context["window"]["checked"] = data["window"]
    if pcie.is_bound and pcie.is_valid():
        data = pcie.cleaned_data
        slot = calculators.pcie_bps(data["generation"], data["lanes"])
        need = data["ports"] * data["port_gbps"] * 1e9
        context["pcie"] = {"slot": slot, "need": need, "enough": slot >= need,
                           "ratio": slot / need}
    template = "dashboard/tools_result.html" if request.headers.get("HX-Request") else \
        "dashboard/tools.html"
    return render(request, template, context, status=400 if (
        (window.is_bound and window.errors) or (pcie.is_bound and pcie.errors)) else 200)
