"""The Flows page's forms: its settings (admins), and a connection as a row's buttons
post it, checked by core/flowref.py - the check the agent runs again on the job."""
from django import forms

from tusklib.problems import ProblemsFormMixin

from .core import flowref, hook
from .models import FlowSettings


class SettingsForm(forms.ModelForm):
    class Meta:
        model = FlowSettings
        fields = ["elephant_mbps", "rows", "capture_seconds"]
        labels = {"elephant_mbps": "Elephant above (Mbit/s)", "rows": "Flows listed",
                  "capture_seconds": "Capture length (seconds)"}
        help_texts = {
            "elephant_mbps": "A flow moving at least this much (both directions together) "
                             "stands out.",
            "capture_seconds": "How long Capture this flow and Diagnose capture."}


class FlowForm(ProblemsFormMixin, forms.Form):
    """The connection: its original tuple, zone and conntrack id (hidden fields)."""

    id = forms.IntegerField(widget=forms.HiddenInput)
    family = forms.IntegerField(widget=forms.HiddenInput)
    proto = forms.IntegerField(widget=forms.HiddenInput)
    src = forms.CharField(widget=forms.HiddenInput, max_length=64)
    dst = forms.CharField(widget=forms.HiddenInput, max_length=64)
    sport = forms.IntegerField(widget=forms.HiddenInput)
    dport = forms.IntegerField(widget=forms.HiddenInput)
    zone = forms.IntegerField(widget=forms.HiddenInput, required=False)
    problem_fields = {f"flow.{name}": name for name in flowref.FIELDS}

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            data["flow"] = flowref.flow_ref({
                name: data[name] for name in flowref.FIELDS if data.get(name) is not None})
        except flowref.FlowError as error:
            self.add_problems(error)
        return data


class BlockForm(ProblemsFormMixin, forms.Form):
    """The IDS hook's block from the Flows page: a prefix for a time, announced as a BGP
    black-hole route (RFC 7999) when it is one host's and asked for."""

    prefix = forms.CharField(max_length=64, help_text="A host (203.0.113.66/32) or a "
                                                      "network; either end of a connection.")
    ttl = forms.IntegerField(initial=hook.TTL[2], label="For (seconds)",
                             help_text=f"{hook.TTL[0]}-{hook.TTL[1]}: it ends by itself.")
    reason = forms.CharField(required=False, max_length=hook.REASON_MAX)
    announce = forms.BooleanField(required=False, label="Announce as a black-hole route",
                                  help_text=(
        "One host only: also sent as a BGP black-hole route (RFC 7999) to the neighbours "
        "that take them, so that the upstream drops its traffic too, for as long as the "
        "block lasts."))
    problem_fields = {"prefix": "prefix", "ttl": "ttl", "reason": "reason",
                      "announce": "announce"}

    def match(self):
        match = {key: self.cleaned_data[key] for key in ("prefix", "ttl", "reason")}
        return {**match, "announce": True} if self.cleaned_data["announce"] else match


class CaptureForm(FlowForm):
    seconds = forms.IntegerField(widget=forms.HiddenInput)
    problem_fields = {**FlowForm.problem_fields, "seconds": "seconds"}

    def clean(self):
        data = super().clean()
        if "seconds" in data:
            try:
                flowref.capture_seconds(data["seconds"])
            except flowref.FlowError as error:
                self.add_problems(error)
        return data
