"""The Self-test page: Allman's middlebox measurement (transaction delay, feedback time,
bulk transfer, failures) through the firewall and around it. The agent measures; the
web process queues the job, shows past runs and the result table, and offers the
responder for download (hardware mode)."""
from django.conf import settings
from django.db import transaction
from django.http import FileResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts import audit
from jobs import queue

from .core import responder as core_responder
from .core import table
from .forms import SelfTestForm, run_fields
from .models import SelfTest

LISTED = 50


def lab_mode():
    return bool(settings.TUSK.selftest_client_netns)


def _page(request, form=None, status=200):
    runs = list(SelfTest.objects.select_related("job")[:LISTED])
    latest = next((r for r in runs if r.result), None)
    config = settings.TUSK
    return render(request, "selftest/selftest.html", {
        "form": form or SelfTestForm(lab=lab_mode()), "runs": runs, "lab": lab_mode(),
        "busy": any(r.active for r in runs), "latest": latest,
        "rows": table.rows(latest.result) if latest else [],
        "config": config}, status=status)


def selftest(request):
    return _page(request)


@require_POST
def start(request):
    lab = lab_mode()
    form = SelfTestForm(request.POST, lab=lab)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    data = form.cleaned_data
    fields = run_fields(settings.TUSK, lab, data)
    with transaction.atomic():
        test = SelfTest.objects.create(params=data["params"], created_by=request.user, **fields)
        test.job = queue.enqueue("selftest.run", {"selftest": test.pk}, request.user)
        test.save(update_fields=["job"])
        audit.record(request, "self-test start", f"self-test {test.pk}", **fields,
                     **data["params"])
    return redirect("selftest")


def run(request, pk):
    found = get_object_or_404(SelfTest.objects.select_related("job"), pk=pk)
    return render(request, "selftest/run.html", {
        "run": found, "rows": table.rows(found.result) if found.result else [],
        "text": table.format_table(found.result) if found.result else ""})


def responder(request):
    """responder.py as it is: one stdlib file for the hosts of a hardware self-test."""
    return FileResponse(open(core_responder.__file__, "rb"), as_attachment=True,
                        filename="responder.py", content_type="text/x-python")
