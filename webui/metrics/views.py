"""The scrape at /metrics (a token, never a session) and the Metrics page, where an admin
makes and revokes scrape tokens (accounts.Token of scope metrics; every token of a wider
scope scrapes too, and the Tokens page lists them all)."""
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_POST, require_safe
from prometheus_client.exposition import choose_encoder

from accounts import audit, tokens
from accounts.forms import ScrapeTokenForm
from accounts.models import Scope, Token
from accounts.second_factor import recent_second_factor
from accounts.views import token_form, token_revoke_of
from dashboard import loss
from dashboard.models import RETENTION, Sample
from policy.models import READING_PK, CounterReading
from tusklib.rowvalues import number, utc_time

from .collector import DROP_COUNTERS, FAMILIES, scrape_registry

_REALM = "tusk metrics"


@login_not_required
@require_safe
def scrape(request):
    """Prometheus' exposition of collector.TuskCollector, for a valid scrape token."""
    try:
        tokens.check(tokens.presented(request), audit.client_address(request))
    except tokens.Refused as refused:
        response = HttpResponse(refused.message + "\n", status=refused.status,
                                content_type="text/plain; charset=utf-8")
        for header, value in refused.headers(_REALM).items():
            response[header] = value
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    response = HttpResponse(encoder(scrape_registry()), content_type=content_type)
    patch_cache_control(response, no_store=True)
    return response


def _page(request, form=None, created=None, status=200):
    response = render(request, "metrics/index.html", {
        "form": form or ScrapeTokenForm(), "created": created, "now": timezone.now(),
        "tokens": Token.objects
        .filter(scope=Scope.METRICS).select_related("created_by"),
        "families": FAMILIES.values(),
        "scrape_url": request.build_absolute_uri("/metrics")}, status=status)
    patch_cache_control(response, no_store=True)   # a new token is in it, once
    return response


RULES = Path(__file__).resolve().parent / "rules" / "tusk-alerts.yml"


@require_safe
def rules(request):
    """The alert rules Tusk ships, for an operator's Prometheus (docs/MONITORING.md)."""
    response = HttpResponse(RULES.read_bytes(), content_type="application/yaml")
    response["Content-Disposition"] = 'attachment; filename="tusk-alerts.yml"'
    return response


@recent_second_factor
def index(request):
    return token_form(request, ScrapeTokenForm, _page, "metrics token create")


@require_POST
@recent_second_factor
def revoke(request, pk):
    return token_revoke_of(request, Token.objects.filter(scope=Scope.METRICS), pk,
                           "metrics token revoke", "metrics")


@require_safe
def loss_page(request):
    """The loss path: every stage where this box drops forwarded packets, with rates, totals
    and the last increase (dashboard/loss.py), and the ruleset's own drops beside them."""
    now = timezone.now()
    samples = Sample.objects.filter(taken__gte=now - timedelta(seconds=RETENTION)).order_by(
        "taken").only("taken", "loss")
    rows = loss.summary(list(samples), now)
    reading = CounterReading.objects.filter(pk=READING_PK).first()
    policy = []
    counters = reading.counters if reading is not None and isinstance(reading.counters,
                                                                       dict) else {}
    for name, reason in DROP_COUNTERS.items():
        value = counters.get(name)
        if isinstance(value, list) and len(value) == 3 and number(value[0]) is not None:
            policy.append({"reason": reason, "packets": value[0],
                           "last": utc_time(value[2])})
    return render(request, "metrics/loss.html", {
        "rows": rows, "alarms": [row for row in rows if row.alarm], "policy": policy,
        "recent_minutes": loss.RECENT // 60, "sampled": bool(rows)})
