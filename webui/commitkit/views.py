"""The generic views of a commit-confirm domain: Confirm and Roll back of a pending
change, the history, one revision against the one before, roll back to a revision -
each a thin front end on commitkit/services.py. patterns(domain) gives their URLs; each
view takes the domain's name from the URL's keyword arguments, so a domain's urls.py
lists only what is its own."""
import dataclasses
import time

from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.audit import Actor
from tusklib.problems import Refusal, ServiceError

from . import domain as domains
from . import services
from .services import diff

__all__ = ["diff", "live_state", "patterns"]


def live_state(status, state_model, stale_seconds=30):
    """What a domain's status panel shows: the agent's last report (status, a contract's
    dataclass, or None), the configuration's state row and the countdown of a pending
    change; reported and stale (older than stale_seconds: the agent is not reporting)."""
    found = dataclasses.asdict(status) if status is not None else {}
    config = state_model.current()
    at = found.get("at")
    return {**found, "config": config,
            "seconds_left": config.seconds_left(timezone.now()) if config else None,
            "reported": isinstance(at, (int, float)),
            "stale": not isinstance(at, (int, float)) or time.time() - at > stale_seconds}


def _job_page(domain, queued):
    return reverse("job", args=[queued.job]) + f"?next={domain.status_url}"


def not_found(function):
    """A service's NOT_FOUND is the page's 404."""
    def view(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ServiceError as error:
            if error.code == Refusal.NOT_FOUND:
                raise Http404(error.message) from None
            raise
    view.__name__, view.__doc__ = function.__name__, function.__doc__
    return view


@require_POST
def confirm(request, domain):
    domain = domains.get(domain)
    return redirect(_job_page(domain, services.confirm(domain, Actor.of(request))))


@require_POST
def cancel(request, domain):
    domain = domains.get(domain)
    return redirect(_job_page(domain, services.cancel(domain, Actor.of(request))))


def history(request, domain):
    domain = domains.get(domain)
    return render(request, "commitkit/history.html", {
        **domain.page_context(), "domain": domain, "revisions": services.history(domain),
        "header_template": domain.header_template,
        "revision_url": domain.url("revision")})


@not_found
def revision(request, domain, number):
    domain = domains.get(domain)
    found = services.compare(domain, number)
    return render(request, domain.revision_template, {
        "domain": domain, "rev": found.revision, "previous": found.previous,
        "diff": found.diff})


@require_POST
@not_found
def rollback(request, domain, number):
    domain = domains.get(domain)
    return redirect(_job_page(domain, services.rollback(domain, Actor.of(request), number)))


def patterns(domain, decisions=True):
    """The generic views' URLs for domain. decisions=False: the domain routes Confirm
    and Roll back itself (network's sit under its status page, its Confirm checks the
    address the request arrived over)."""
    kwargs = {"domain": domain.name}
    found = [path("history/", history, kwargs, name=domain.url("history")),
             path("history/<int:number>/", revision, kwargs, name=domain.url("revision"))]
    if decisions:
        found += [path("confirm/", confirm, kwargs, name=domain.url("confirm")),
                  path("cancel/", cancel, kwargs, name=domain.url("cancel"))]
    if domain.rollback:
        found.append(path("history/<int:number>/rollback/", rollback, kwargs,
                          name=domain.url("rollback")))
    return found
