"""The scrape at /metrics (a scrape token, never a session) and the Metrics page, where an
admin makes and revokes the tokens."""
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_POST, require_safe
from prometheus_client.exposition import choose_encoder

from accounts import audit
from accounts.roles import is_admin
from dashboard import loss
from dashboard.models import RETENTION, Sample
from policy.models import READING_PK, CounterReading
from tusklib.rowvalues import number, utc_time

from . import tokens
from .collector import DROP_COUNTERS, FAMILIES, scrape_registry
from .forms import TokenForm
from .models import ScrapeToken

_REALM = 'Bearer realm="tusk metrics"'


def _refused(body, challenge):
    response = HttpResponse(body, status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = challenge
    return response


@login_not_required
@require_safe
def scrape(request):
    """Prometheus' exposition of collector.TuskCollector, for a valid scrape token."""
    token = tokens.presented(request)
    if token is None:
        return _refused("A scrape token is needed: Authorization: Bearer <token>.\n", _REALM)
    found = tokens.valid(token)
    if found is None:
        return _refused("This token is not valid.\n", f'{_REALM}, error="invalid_token"')
    tokens.used(found, audit.client_address(request))
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    response = HttpResponse(encoder(scrape_registry()), content_type=content_type)
    patch_cache_control(response, no_store=True)
    return response


def _page(request, form=None, created=None, status=200):
    response = render(request, "metrics/index.html", {
        "form": form or TokenForm(), "created": created, "tokens": ScrapeToken.objects
        .select_related("created_by"), "families": FAMILIES.values(),
        "scrape_url": request.build_absolute_uri("/metrics")}, status=status)
    patch_cache_control(response, no_store=True)   # a new token is in it, once
    return response


def index(request):
    """Admins only, also to look: the page is about credentials."""
    if not is_admin(request.user):
        return HttpResponseForbidden("The Metrics page is for admins.")
    if request.method != "POST":
        return _page(request)
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    with transaction.atomic():
        row, token = tokens.create(form.cleaned_data["name"], request.user)
        audit.record(request, "metrics token create", row.name, token=row.pk)
    return _page(request, created={"row": row, "token": token}, status=201)


@require_POST
def revoke(request, pk):
    if not is_admin(request.user):
        return HttpResponseForbidden("The Metrics page is for admins.")
    row = get_object_or_404(ScrapeToken, pk=pk)
    if row.revoked_at is None:
        with transaction.atomic():
            ScrapeToken.objects.filter(pk=row.pk).update(revoked_at=timezone.now())
            audit.record(request, "metrics token revoke", row.name, token=row.pk)
        messages.success(request, f"Token {row.name} revoked: scrapes with it are refused now.")
    return redirect("metrics")


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
