"""The High availability page: this box's role, daemons and state sync live (the agent's
ha.status, polled by htmx), a pending change's countdown with Confirm and Roll back, the
maintenance "Fail over now", and the form for this box's half of the pair."""
import dataclasses
import time

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.roles import is_admin
from jobs import queue
from jobs.models import PeriodicState

from .agent_jobs import STATUS
from .contracts import HaStatus
from .core.config import HaError, parse, to_document
from .forms import HaForm

STALE_SECONDS = 30      # an ha.status older than this: the agent is not reporting


def snapshot():
    """The agent's last ha.status, with what the page derives from it."""
    status = PeriodicState.read(STATUS, HaStatus)
    found = dataclasses.asdict(status) if status is not None else {}
    pending = found.get("pending") or None
    seconds_left = None
    if isinstance(pending, dict) and isinstance(pending.get("deadline"), (int, float)):
        seconds_left = max(0, int(pending["deadline"] - time.time()))
    at = found.get("at")
    return {**found, "pending": pending, "seconds_left": seconds_left,
            "reported": isinstance(at, (int, float)),
            "stale": not isinstance(at, (int, float)) or time.time() - at > STALE_SECONDS}


def _document(text):
    """ha.toml's text as the form's document, or None (none, or not readable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return to_document(parse(text))
    except HaError:
        return None


def page(request):
    state = snapshot()
    current = _document(state.get("pending_text")) or _document(state.get("confirmed_text"))
    form = None
    if is_admin(request.user):
        initial = HaForm.initial_from(current) if current else None
        form = HaForm(request.POST or None, initial=initial,
                      has_key=bool(state.get("has_key")))
        if request.method == "POST" and form.is_valid():
            document = form.to_document()
            args = {"document": document, "timeout": form.cleaned_data["timeout"]}
            if form.cleaned_data["key"]:
                args["key"] = form.cleaned_data["key"]
            job = queue.enqueue("ha.apply", args, request.user)
            audit.record(request, "ha apply", document["ha"]["role"], job=job.pk)
            return redirect(reverse("job", args=[job.pk]) + "?next=ha")
    template = "ha/_status.html" if request.headers.get("HX-Request") else "ha/ha.html"
    return render(request, template, {"state": state, "form": form, "current": current,
                                      "is_admin": is_admin(request.user)})


def _decision(request, kind, what):
    job = queue.enqueue(kind, {}, request.user)
    audit.record(request, what, "", job=job.pk)
    return redirect(reverse("job", args=[job.pk]) + "?next=ha")


@require_POST
def confirm(request):
    return _decision(request, "ha.confirm", "ha confirm")


@require_POST
def cancel(request):
    return _decision(request, "ha.cancel", "ha roll back")


@require_POST
def failover(request):
    if snapshot().get("role") != "MASTER":
        messages.error(request, "Only the master hands the addresses over: this box is not "
                                "the master now.")
        return redirect("ha")
    return _decision(request, "ha.failover", "ha fail over")
