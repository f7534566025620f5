"""The SNMP page: snmpd running or not and the counters it answers with (the agent's
snmp.status, polled by htmx), a pending change's countdown with Confirm and Roll back,
the form (admins), and TUSK-MIB for the managers to load."""
import os

from django.http import FileResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from accounts.audit import Actor
from accounts.roles import is_admin
from commitkit.views import live_state

from . import services
from .forms import SnmpForm
from .models import SnmpState

STALE_SECONDS = 30
MIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "TUSK-MIB.txt")


def snapshot():
    """The agent's last snmp.status and the configuration's state (SnmpState)."""
    return live_state(services.status(), SnmpState, STALE_SECONDS)


def page(request):
    state = snapshot()
    current = services.current(state["config"])
    form = None
    if is_admin(request.user):
        document = services.current_document(state["config"])
        form = SnmpForm(request.POST or None, initial=SnmpForm.initial_from(document),
                        users=document["user"])
        if request.method == "POST" and form.is_valid():
            queued = services.apply(Actor.of(request), form.to_document(),
                                    form.cleaned_data["timeout"])
            return redirect(reverse("job", args=[queued.job]) + "?next=snmp")
    template = "snmp/_status.html" if request.headers.get("HX-Request") else "snmp/snmp.html"
    return render(request, template, {"state": state, "form": form, "current": current,
                                      "is_admin": is_admin(request.user)},
                  status=400 if form is not None and form.errors else 200)


def mib(request):
    return FileResponse(open(MIB, "rb"), content_type="text/plain; charset=us-ascii",
                        as_attachment=True, filename="TUSK-MIB.txt")
