"""The Logs page: the firewall's log records, newest first, filtered, following new ones
(htmx polls the same URL while no end time is set); each record's class links to the
class on the policy pages, and its interfaces show their zone in the confirmed policy.
Admins set the storage bound and the remote syslog receivers; the agent applies them.

The web process reads the log files itself: the log directory is root's, group of the
web user, 2750 (core/storage.py), like the capture directory it may read what the agent
and ulogd put there - but it can write nothing there, and it opens only the log files'
own names, as regular files linked nowhere else, never through a link."""

from django.conf import settings
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.roles import is_admin
from jobs import queue
from jobs.models import Job, PeriodicState
from policy import draft as drafts

from . import services
from .contracts import Forwarding, Kept
from .core import paths, storage
from .core.constants import (
    APPLY_JOB,
    FORWARDER_TASK,
    KEEP_TASK,
    LIVE_POLL_SECONDS,
    SCAN_BYTES,
)
from .core.settings import SettingsError, check
from .forms import DEFAULT_DENY, StorageForm, SyslogForm
from .models import LogSettings


def _class_links(number, classes):
    """{class name: URL}: its page in the draft if the draft has it, else the page of
    the confirmed revision (number) that has it."""
    _, document = drafts.current()
    links = {item.get("name"): reverse("policy_item", args=["classes", index])
             for index, item in enumerate(drafts.items(document, "classes"))}
    if number:
        revision = reverse("policy_revision", args=[number])
        links = {name: revision for name in classes} | links
    return links


def _where(interface, zone_of):
    if not interface:
        return "-"
    zone = zone_of.get(interface)
    return format_html("{} <span class=\"muted\">{}</span>", zone, interface) if zone \
        else interface


def _endpoint(address, port):
    if port is None:
        return address
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


BADGES = {"accept": "ok", "drop": "bad", "reject": "warn"}


def rows(found, zones, links):
    """The records' table rows, built here rather than in a template loop (policy/views.py
    says why). Every value from a record is escaped."""
    zone_of = {}
    for zone, interfaces in zones.items():
        for interface in interfaces:
            zone_of.setdefault(interface, zone)
    out = []
    for record in found:
        if record.cls:
            link = links.get(record.cls)
            cls = format_html('<a href="{}">{}</a>', link, record.cls) if link else record.cls
        else:
            cls = mark_safe('<span class="muted">default deny</span>')
        detail = " ".join(part for part in (record.tcp_flags, record.icmp and f"ICMP {record.icmp}",
                                            record.length and f"{record.length} B") if part)
        out.append(format_html(
            '<tr class="record" data-verdict="{}" data-class="{}"><td>{}</td>'
            '<td><span class="badge {}">{}</span></td><td>{}</td><td>{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            record.verdict, record.cls, record.when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            BADGES[record.verdict], record.verdict, cls, _where(record.interface_in, zone_of),
            _where(record.interface_out, zone_of), record.protocol_name,
            _endpoint(record.source, record.source_port),
            _endpoint(record.destination, record.destination_port), detail))
    return mark_safe("\n".join(out))


def _document():
    return LogSettings.objects.filter(pk=1).values_list("document", flat=True).first() or {}


def _status():
    """What the agent last found: the log's size and writer, the forwarder's state, and
    the last settings job."""
    # the rows are the web user's to write: one not of its contract's shape is no report
    kept = PeriodicState.read(KEEP_TASK, Kept)
    forwarding = PeriodicState.read(FORWARDER_TASK, Forwarding)
    return {"kept": kept, "kept_mb": storage.megabytes(kept.total if kept else 0),
            "forwarding": forwarding,
            "apply": Job.objects.filter(kind=APPLY_JOB).order_by("-id").first()}


def _page(request, storage_form=None, syslog_form=None, status=200):
    number, zones, classes = services.confirmed()
    data = request.GET if request.method == "GET" else {}
    live = not data or data.get("live") == "on"
    result = services.search(data, zones, classes)
    form, found, error = result.form, result.search, result.error
    if form.errors:
        status = 400
    live = live and not (form.is_bound and form.is_valid() and form.cleaned_data.get("until"))
    document = _document()
    try:
        current = check(document)
        refused = ""
    except SettingsError as exc:
        current, refused = None, str(exc)
    admin = is_admin(request.user)
    context = {
        "form": form, "found": found, "error": error, "live": live, "poll": LIVE_POLL_SECONDS,
        "rows": rows(found.records, zones, _class_links(number, classes)) if found else "",
        "classes": [*classes, DEFAULT_DENY], "revision": number, "is_admin": admin,
        "scan_mb": storage.megabytes(SCAN_BYTES), "settings": current, "refused": refused,
        "log_dir": paths.log_dir(settings.TUSK), **_status(),
    }
    if admin:
        context["storage_form"] = storage_form or StorageForm(
            initial={"files": current.files, "file_mb": current.file_mb} if current else {},
            document=document)
        context["syslog_form"] = syslog_form or SyslogForm(
            initial=SyslogForm.initial_of(document), document=document)
    return render(request, "logs/index.html", context, status=status)


def index(request):
    return _page(request)


def _save(request, form, action):
    """Saves the checked document, audits it and queues the agent's apply, in one
    transaction."""
    settings_ = form.cleaned_data["settings"]
    with transaction.atomic():
        row, _ = LogSettings.objects.select_for_update().get_or_create(pk=1)
        row.document, row.updated_by = settings_.as_dict(), request.user
        row.save()
        job = queue.enqueue(APPLY_JOB, {}, request.user)
        audit.record(request, action, "logs", job=job.pk, **settings_.as_dict())
    return redirect(reverse("logs") + "#settings")


@require_POST
def storage_settings(request):
    form = StorageForm(request.POST, document=_document())
    if not form.is_valid():
        return _page(request, storage_form=form, status=400)
    return _save(request, form, "log storage settings")


@require_POST
def syslog_settings(request):
    form = SyslogForm(request.POST, document=_document())
    if not form.is_valid():
        return _page(request, syslog_form=form, status=400)
    return _save(request, form, "log syslog settings")
