"""The Flows page's forms: its settings (admins), and a connection as a row's buttons
post it, checked by core/flowref.py - the check the agent runs again on the job."""
from django import forms

from tusklib.problems import ProblemsFormMixin

from .core import flowref
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
