"""The System page. Console: whether a console password is set (anyone signed in may
see that), and for admins the form that sets or clears it through the agent job
system.console_password (the web user may not write /etc/tusk). Upgrades: the two
system slots and what happened to them (appliance/slots.py writes it), and for admins
the upload of an update bundle - streamed into upgrade_dir, then the agent job
system.upgrade checks and installs it - and the reboot into it (docs/UPGRADES.md)."""
import os

from django.conf import settings
from django.contrib import messages
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopFutureHandlers, StopUpload
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.second_factor import recent_second_factor
from appliance import consolepw
from jobs import queue
from jobs.models import Job
from tusklib.problems import ServiceError

from . import services
from .forms import BundleForm, ConsolePasswordForm

KIND = "system.console_password"
ACTIVE = services.ACTIVE


def _page(request, form=None, status=200, upgrade_form=None):
    slots = services.state_file("slots.json") or {}
    waiting = slots.get("next") and slots.get("booted") and slots["next"] != slots["booted"]
    return render(request, "system/system.html", {
        "form": form or ConsolePasswordForm(),
        "console_password": os.path.exists(consolepw.path_beside(settings.TUSK.path)),
        "busy": Job.objects.filter(kind=KIND, state__in=ACTIVE).first(),
        "slots": slots, "slot_list": sorted((slots.get("slots") or {}).items()),
        "health": services.state_file("health.json"), "events": services.events(),
        "upgrade_form": upgrade_form or BundleForm(),
        "upgrading": services.upgrading(), "last_upgrade": services.last_upgrade(),
        "waiting": waiting, "bundle_max_mb": settings.TUSK.bundle_max_mb,
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


class ReceivedBundle(UploadedFile):
    """The bundle as BundleReceiver stored it: its name in upgrade_dir, its size."""

    def __init__(self, name, size, stored_as):
        super().__init__(file=None, name=name, size=size)
        self.stored_as = stored_as


class BundleReceiver(FileUploadHandler):
    """Streams the form's bundle field straight into upgrade_dir as
    incoming-<16 hex>.raucb - never into /tmp, which is RAM on the appliance - and stops
    storing past bundle_max_mb (too_big). discard() removes what it stored unless the
    view took it (taken)."""

    def __init__(self, request=None):
        super().__init__(request)
        self.handle = self.stored = None
        self.size, self.too_big, self.taken = 0, False, False

    def new_file(self, field_name, file_name, *args, **kwargs):
        super().new_file(field_name, file_name, *args, **kwargs)
        if field_name != "bundle" or self.stored:
            return
        self.stored, self.handle = services.incoming()
        raise StopFutureHandlers()

    def receive_data_chunk(self, raw_data, start):
        if self.handle is None:
            return None
        self.size += len(raw_data)
        if self.size > services.limit_bytes():
            self.too_big = True
            self.discard()
            raise StopUpload(connection_reset=False)
        self.handle.write(raw_data)
        return None

    def file_complete(self, file_size):
        if self.handle is None:
            return None
        self.handle.close()
        self.handle = None
        return ReceivedBundle(self.file_name, self.size, self.stored)

    def upload_interrupted(self):
        self.discard()

    def discard(self):
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        if self.stored and not self.taken:
            services.discard(self.stored)
            self.stored = None


@csrf_exempt
@recent_second_factor
def upload_bundle(request):
    """POST /system/upgrade/. nginx asked upload_gate (an admin) before it read the body;
    the CSRF check runs after the handler below is set (it reads the body)."""
    receiver = BundleReceiver(request)
    request.upload_handlers = [receiver]
    try:
        return _upload_bundle(request, receiver)
    except ServiceError as error:      # no upgrade directory to receive it in
        messages.error(request, f"The bundle was not taken: {error.problems[0].message}")
        return _page(request, status=409)
    finally:
        receiver.discard()


@csrf_protect
@require_POST
def _upload_bundle(request, receiver):
    form = BundleForm(request.POST, request.FILES)
    valid = form.is_valid()
    if receiver.too_big:
        form.add_error("bundle", str(services.BundleTooLarge()))
        valid = False
    if not valid:
        return _page(request, upgrade_form=form, status=400)
    upload = form.cleaned_data["bundle"]
    receiver.taken = True     # the service keeps it or removes it
    try:
        queued = services.upgrade(audit.Actor.of(request), upload.name, upload.stored_as,
                                  upload.size)
    except ServiceError as error:
        form.add_error("bundle", error.problems[0].message)
        return _page(request, upgrade_form=form, status=409)
    return redirect(reverse("job", args=[queued.job]) + "?next=system")


@require_POST
def reboot(request):
    try:
        queued = services.reboot(audit.Actor.of(request))
    except ServiceError:
        return _page(request, status=409)
    return redirect(reverse("job", args=[queued.job]) + "?next=system")
