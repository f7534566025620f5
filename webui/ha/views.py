"""The High availability page: this box's role, daemons and state sync live (the agent's
ha.status, polled by htmx), a pending change's countdown with Confirm and Roll back, the
maintenance "Fail over now", and the form for this box's half of the pair."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.audit import Actor
from accounts.roles import is_admin
from commitkit.views import live_state
from tusklib.problems import ServiceError

from . import services
from .forms import HaForm
from .models import HaState

STALE_SECONDS = 30      # an ha.status older than this: the agent is not reporting


def snapshot():
    """The agent's last ha.status with what the page derives from it, and the
    configuration's state (HaState): confirmed and pending ha.toml, the countdown."""
    return live_state(services.status(), HaState, STALE_SECONDS)


def page(request):
    state = snapshot()
    config = state["config"]
    current = services.current_document(config)
    form = None
    if is_admin(request.user):
        initial = HaForm.initial_from(current) if current else None
        form = HaForm(request.POST or None, initial=initial,
                      has_key=bool(state.get("has_key")))
        if request.method == "POST" and form.is_valid():
            queued = services.apply(Actor.of(request), form.to_document(),
                                    form.cleaned_data["timeout"], form.cleaned_data["key"])
            return redirect(reverse("job", args=[queued.job]) + "?next=ha")
    template = "ha/_status.html" if request.headers.get("HX-Request") else "ha/ha.html"
    return render(request, template, {"state": state, "form": form, "current": current,
                                      "is_admin": is_admin(request.user)})


@require_POST
def failover(request):
    try:
        queued = services.fail_over(Actor.of(request), snapshot().get("role"))
    except ServiceError:
        messages.error(request, "Only the master hands the addresses over: this box is not "
                                "the master now.")
        return redirect("ha")
    return redirect(reverse("job", args=[queued.job]) + "?next=ha")
