"""The Backup page: download the configuration as one JSON file; upload one, see
what restoring it would change, confirm. Admins only: the file holds the users'
password hashes (RoleMiddleware refuses a viewer's POST; every action is a POST)."""
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.second_factor import recent_second_factor
from network.core.errors import NetworkError
from policy.core.errors import PolicyError

from . import document as backups
from . import restore as restores
from . import services
from .forms import UploadForm, confirm_form
from .models import PendingRestore


def _page(request, form=None, problems=(), status=200):
    return render(request, "backup/backup.html", {
        "form": form or UploadForm(), "problems": problems,
        "not_included": backups.NOT_INCLUDED, "max_mib": backups.MAX_BYTES // 2**20,
        "pending": PendingRestore.objects.filter(user=request.user).only(
            "pk", "name", "uploaded_at").first()}, status=status)


def backup(request):
    return _page(request)


@require_POST
def download(request):
    try:
        name, data = services.download(audit.Actor.of(request))
    except backups.BackupError as error:
        messages.error(request, f"No backup was made: {error}")
        return redirect("backup")
    response = HttpResponse(data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_POST
def upload(request):
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, form, status=400)
    upload = form.cleaned_data["file"]
    data = upload.read(backups.MAX_BYTES + 1)
    try:
        pending = services.upload(audit.Actor.of(request), upload.name, data)
    except backups.BackupError as error:
        return _page(request, form, error.problems, status=400)
    return redirect("backup_restore", pk=pending.pk)


def _preview(request, pending, document, form=None, stale=False, status=200):
    changes = restores.plan(document)
    if form is None:
        form = confirm_form(document, token=changes["token"])
    return render(request, "backup/restore.html", {
        "pending": pending, "backup": document, "changes": changes, "form": form,
        "stale": stale}, status=status)


def _restored_message(pending, changes, apply_job, tuning_job, network, kept):
    users = changes["users"]
    text = (f"Restored {pending.name}: the draft is the backup's policy; users "
            f"{len(users['added'])} added, {len(users['updated'])} updated, "
            f"{len(users['removed'])} removed."
            + (f" Tuning is restored by job {tuning_job.pk} (Jobs page)." if tuning_job else "")
            + (" Confirm the policy once the apply has loaded it, or it rolls back."
               if apply_job else ""))
    if network is None:
        return text + (" The network was left as it is, as you chose." if kept else
                       " The backup has no network configuration: the network is as it was.")
    if network["policy_waits"]:
        text += (" The policy is not applied yet: its zones name links that only the "
                 "restored network has. Apply the network first, then the policy.")
    if not network["changed"]:
        return text + " The network draft already was the backup's."
    return format_html(
        '{} The network draft is the backup\'s {} configuration and is not applied: a '
        'network change can cut you off from this page, so it goes through <a href="{}">'
        "Network → Review and apply</a>, which rolls it back unless you confirm it.",
        text, network["source"], reverse("network_apply"))


@recent_second_factor
def restore(request, pk):
    """GET: what restoring the upload would change. POST: restore it."""
    pending = get_object_or_404(PendingRestore, pk=pk, user=request.user)
    try:  # checked again: the box may have changed since the upload
        document = backups.read(pending.text.encode(), request.user.get_username())
    except backups.BackupError as error:
        return render(request, "backup/restore.html", {
            "pending": pending, "problems": error.problems}, status=400)
    if request.method != "POST":
        return _preview(request, pending, document)
    form = confirm_form(document, request.POST)
    if not form.is_valid():
        return _preview(request, pending, document, form, status=400)
    data = form.cleaned_data
    try:
        changes, apply_job, tuning_job, network = restores.restore(
            audit.Actor.of(request), pending, data["token"], data.get("source", restores.DRAFT),
            data["apply"], data["ports"], data.get("keep_network", False))
    except restores.StaleRestore:
        return _preview(request, pending, document, stale=True, status=400)
    except (NetworkError, PolicyError) as error:  # the network does not fit this box
        for problem in error.problems:
            form.add_error(None, str(problem))
        return _preview(request, pending, document, form, status=400)
    restores.stay_signed_in(request)
    messages.success(request, _restored_message(
        pending, changes, apply_job, tuning_job, network,
        kept=bool(data.get("keep_network")) and document.get("network") is not None))
    if apply_job:
        return redirect(reverse("job", args=[apply_job.pk]) + "?next=policy_status")
    if tuning_job:
        return redirect(reverse("job", args=[tuning_job.pk]) + "?next=tuning")
    return redirect("backup")


@require_POST
def cancel(request, pk):
    get_object_or_404(PendingRestore, pk=pk, user=request.user).delete()
    messages.info(request, "The uploaded backup was discarded; nothing was restored.")
    return redirect("backup")
