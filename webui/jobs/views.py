from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse

from . import registry
from .models import Job, PeriodicState

# Pages a finished job may lead back to (?next=...): URL names only, never URLs
NEXT = {"policy_status", "policy_history", "dashboard", "tuning", "diag", "system",
        "network_status", "ha"}


def job(request, pk):
    """A job's progress bar; htmx polls the same URL for the fragment until it is done,
    then goes on to ?next=. A job that succeeded before its page was first loaded (a
    quick one, a slow browser) goes on at once: no poll is left to say it is done."""
    found = get_object_or_404(Job, pk=pk)
    handler = registry.get(found.kind)
    next_name = request.GET.get("next", "")
    try:
        next_url = reverse(next_name) if next_name in NEXT else ""
    except NoReverseMatch:
        next_url = ""
    if found.state == Job.State.SUCCEEDED and next_url:
        # done: on to where the operator was going, from htmx's poll or a page load
        if not request.headers.get("HX-Request"):
            return redirect(next_url)
        response = HttpResponse()
        response["HX-Redirect"] = next_url
        return response
    return render(request, "jobs/job.html", {
        "job": found, "title": handler.title if handler else found.kind,
        "next_url": next_url, "next_name": next_name})


def jobs(request):
    """The jobs, and below them what the agent does on its own (PeriodicState)."""
    return render(request, "jobs/list.html", {
        "jobs": Job.objects.select_related("created_by")[:200],
        "tasks": PeriodicState.objects.all()})
