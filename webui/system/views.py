"""The System page. Console: whether a console password is set (anyone signed in may
see that), and for admins the form that sets or clears it through the agent job
system.console_password (the web user may not write /etc/tusk)."""
import os

from django.conf import settings
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import audit
from appliance import consolepw
from jobs import queue
from jobs.models import Job

from .forms import ConsolePasswordForm

KIND = "system.console_password"


def _page(request, form=None, status=200):
    return render(request, "system/system.html", {
        "form": form or ConsolePasswordForm(),
        "console_password": os.path.exists(consolepw.path_beside(settings.TUSK.path)),
        "busy": Job.objects.filter(kind=KIND, state__in=(Job.State.QUEUED,
                                                         Job.State.RUNNING)).first(),
    }, status=status)


def system(request):
    return _page(request)


def _queue(request, value, action):
    with transaction.atomic():
        job = queue.enqueue(KIND, {"hash": value}, request.user)
        audit.record(request, action, "console", job=job.pk)
    return redirect(reverse("job", args=[job.pk]) + "?next=system")


@require_POST
def set_console_password(request):
    form = ConsolePasswordForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    return _queue(request, form.job_argument(), "console password set")


@require_POST
def clear_console_password(request):
    return _queue(request, consolepw.CLEAR, "console password clear")
