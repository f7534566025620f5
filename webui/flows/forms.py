"""The Flows page's forms: its settings (admins), and a connection as a row's buttons
post it, checked by core/flowref.py - the check the agent runs again on the job."""
from django import forms

from tusklib.problems import ProblemsFormMixin

from .core import export, flowref, hook
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


class ExportForm(ProblemsFormMixin, forms.Form):
    """Flow export: the protocol, the active timeout and up to COLLECTORS_MAX collectors,
    one row each (a row without an address is none). The fields take text: the check -
    the agent's and the API's too - names what is wrong with each."""

    protocol = forms.ChoiceField(label="Protocol", choices=[
        ("ipfix", "IPFIX (RFC 7011)"), ("netflow9", "NetFlow version 9 (RFC 3954)")])
    active_timeout = forms.CharField(
        label="Active timeout (seconds)", max_length=10,
        widget=forms.NumberInput(attrs={"min": export.ACTIVE_TIMEOUT[0],
                                        "max": export.ACTIVE_TIMEOUT[1]}),
        help_text=f"{export.ACTIVE_TIMEOUT[0]}-{export.ACTIVE_TIMEOUT[1]}: a connection that "
                  "lasts sends a record this often, so an elephant shows while it runs")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for row in range(1, export.COLLECTORS_MAX + 1):
            self.fields[f"address_{row}"] = forms.CharField(
                required=False, max_length=64, label=f"Collector {row}",
                help_text="an IP address" if row == 1 else "")
            self.fields[f"port_{row}"] = forms.CharField(
                required=False, max_length=10, label="Port",
                widget=forms.NumberInput(attrs={"min": export.PORT_MIN,
                                                "max": export.PORT_MAX}),
                help_text="empty: 4739 for IPFIX, 2055 for NetFlow v9" if row == 1 else "")

    def rows(self):
        return [(self[f"address_{row}"], self[f"port_{row}"])
                for row in range(1, export.COLLECTORS_MAX + 1)]

    @classmethod
    def initial_of(cls, document):
        initial = {"protocol": document.get("protocol", "ipfix"),
                   "active_timeout": document.get("active_timeout", export.ACTIVE_TIMEOUT[2])}
        collectors = document.get("collectors")
        for row, item in enumerate(collectors if isinstance(collectors, list) else [], 1):
            if isinstance(item, dict) and row <= export.COLLECTORS_MAX:
                initial[f"address_{row}"] = item.get("address", "")
                initial[f"port_{row}"] = item.get("port", "")
        return initial

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        self.problem_fields = {"protocol": "protocol", "active_timeout": "active_timeout",
                               "collectors": None}
        collectors = []
        for row in range(1, export.COLLECTORS_MAX + 1):
            address = cleaned.get(f"address_{row}", "").strip()
            if not address:
                continue
            index = len(collectors)
            self.problem_fields[f"collectors[{index}]"] = f"address_{row}"
            self.problem_fields[f"collectors[{index}].port"] = f"port_{row}"
            port = _number(cleaned.get(f"port_{row}", ""))
            collectors.append({"address": address, **({"port": port} if port != "" else {})})
        document = {"protocol": cleaned["protocol"],
                    "active_timeout": _number(cleaned["active_timeout"]),
                    "collectors": collectors}
        try:
            cleaned["settings"] = export.check(document)
        except export.ExportError as error:
            self.add_problems(error)
        return cleaned


def _number(text):
    text = text.strip()
    # ASCII digits only: "²".isdigit() is true too, and int() refuses it
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text
