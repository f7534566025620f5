"""The Logs page's forms: the records' filter (GET), and for admins the storage bound
and the remote syslog receivers (POST), both checked whole by core/settings.py - the
check the agent runs again on the saved row."""
import ipaddress
from datetime import UTC

from django import forms

from tusklib.names import NAME_BODY
from tusklib.problems import ProblemsFormMixin

from .core import records
from .core.choices import PROTOCOLS, TRANSPORTS, VERDICTS
from .core.constants import (
    FILE_MB_MAX,
    FILE_MB_MIN,
    FILES_MAX,
    FILES_MIN,
    HOST_MAX,
    PORT_MAX,
    PORT_MIN,
    SYSLOG_PORT_DEFAULT,
    SYSLOG_TARGETS_MAX,
    TAIL_DEFAULT,
    TAIL_MAX,
)
from .core.settings import SettingsError, check

DEFAULT_DENY = "(default)"   # no class name starts with "(": the default deny's records
TIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]


class TimeInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self):
        super().__init__(format="%Y-%m-%dT%H:%M:%S")


class FilterForm(forms.Form):
    """Which records to show. zones: {name: frozenset of interfaces} of the confirmed
    policy; classes: its class names (offered, not required: a class since removed still
    has records)."""

    since = forms.DateTimeField(required=False, label="From (UTC)", input_formats=TIME_FORMATS,
                                widget=TimeInput())
    until = forms.DateTimeField(required=False, label="To (UTC)", input_formats=TIME_FORMATS,
                                widget=TimeInput(),
                                help_text="empty: up to now, and the list follows new records")
    cls = forms.RegexField(required=False, label="Class", max_length=40,
                           regex=rf"^(?:{NAME_BODY}|\(default\))\Z",
                           error_messages={"invalid": "a class name (lower case letters, "
                                           "digits, - and _) or (default) for the default deny"},
                           widget=forms.TextInput(attrs={"list": "log-classes"}))
    verdict = forms.ChoiceField(required=False, label="Verdict",
                                choices=[("", "any"), *[(v, v) for v in VERDICTS]])
    zone = forms.ChoiceField(required=False, label="Zone", help_text="in or out")
    address = forms.CharField(required=False, label="Address", max_length=50,
                              help_text="an address or a prefix, source or destination")
    port = forms.IntegerField(required=False, label="Port", min_value=PORT_MIN,
                              max_value=PORT_MAX, help_text="source or destination")
    protocol = forms.ChoiceField(required=False, label="Protocol",
                                 choices=[("", "any"), *[(p, p) for p in PROTOCOLS]])
    limit = forms.IntegerField(required=False, label="Records", min_value=1, max_value=TAIL_MAX,
                               initial=TAIL_DEFAULT)
    live = forms.BooleanField(required=False, label="Live", initial=True,
                              help_text="new records appear as they come")

    def __init__(self, *args, zones=None, classes=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.zones = zones or {}
        self.classes = classes
        self.fields["zone"].choices = [("", "any"), *[(z, z) for z in self.zones]]

    def clean_address(self):
        text = self.cleaned_data["address"].strip()
        if not text:
            return None
        try:
            return ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise forms.ValidationError(f"{text[:50]!r} is not an IP address or prefix") \
                from None

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            self.add_error("until", "before From")
        return cleaned

    def filter(self):
        """The records.Filter of the cleaned form (times are UTC)."""
        data = self.cleaned_data

        def seconds(moment):
            return moment.replace(tzinfo=moment.tzinfo or UTC).timestamp() if moment else None
        cls = data.get("cls") or None
        return records.Filter(
            since=seconds(data.get("since")), until=seconds(data.get("until")),
            cls="" if cls == DEFAULT_DENY else cls, verdict=data.get("verdict") or None,
            interfaces=self.zones.get(data.get("zone")) if data.get("zone") else None,
            address=data.get("address"), port=data.get("port"),
            protocol=PROTOCOLS.get(data.get("protocol")) if data.get("protocol") else None)

    @property
    def tail(self):
        return (self.cleaned_data.get("limit") if self.is_valid() else None) or TAIL_DEFAULT


class _SettingsForm(ProblemsFormMixin, forms.Form):
    """A part of the settings document; clean() checks the whole document with this part
    in it (core.settings.check) and leaves it in cleaned_data["document"]."""

    def __init__(self, *args, document=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.document = dict(document or {})

    def part(self, cleaned):
        raise NotImplementedError

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        document = {**self.document, **self.part(cleaned)}
        try:
            cleaned["settings"] = check(document)
        except SettingsError as error:
            self.add_problems(error)
        cleaned["document"] = document
        return cleaned


class StorageForm(_SettingsForm):
    """Ranges are the check's (FILES_MIN...): one place says what is allowed."""

    files = forms.IntegerField(label="Files", help_text=f"{FILES_MIN}-{FILES_MAX}: the "
                               "current one and the older ones kept")
    file_mb = forms.IntegerField(label="MB per file", help_text=f"{FILE_MB_MIN}-{FILE_MB_MAX}")
    problem_fields = {"files": "files", "file_mb": "file_mb"}

    def part(self, cleaned):
        return {"files": cleaned["files"], "file_mb": cleaned["file_mb"]}


def _port(text):
    text = text.strip()
    # ASCII digits only: "²".isdigit() is true too, and int() refuses it
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


class SyslogForm(_SettingsForm):
    """Up to SYSLOG_TARGETS_MAX receivers, one row each; a row without a host is none.
    The fields take text: the check names what is wrong with each (the port's range,
    the transport, the host), as it does in the agent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for row in range(1, SYSLOG_TARGETS_MAX + 1):
            self.fields[f"host_{row}"] = forms.CharField(
                required=False, max_length=HOST_MAX, label=f"Receiver {row}",
                help_text="an IP address or a host name" if row == 1 else "")
            self.fields[f"port_{row}"] = forms.CharField(
                required=False, max_length=10, label="Port", initial=SYSLOG_PORT_DEFAULT,
                widget=forms.NumberInput(attrs={"min": PORT_MIN, "max": PORT_MAX}))
            self.fields[f"transport_{row}"] = forms.CharField(
                required=False, max_length=10, label="Transport", initial="udp",
                widget=forms.Select(choices=[(t, t.upper()) for t in TRANSPORTS]))

    def rows(self):
        """[(host, port, transport) bound fields] for the template."""
        return [(self[f"host_{row}"], self[f"port_{row}"], self[f"transport_{row}"])
                for row in range(1, SYSLOG_TARGETS_MAX + 1)]

    @classmethod
    def initial_of(cls, document):
        initial = {}
        syslog = document.get("syslog") if isinstance(document, dict) else None
        for row, target in enumerate(syslog if isinstance(syslog, list) else [], 1):
            if isinstance(target, dict) and row <= SYSLOG_TARGETS_MAX:
                for key in ("host", "port", "transport"):
                    if key in target:
                        initial[f"{key}_{row}"] = target[key]
        return initial

    def part(self, cleaned):
        targets, self.problem_fields = [], {}
        for row in range(1, SYSLOG_TARGETS_MAX + 1):
            host = cleaned.get(f"host_{row}", "").strip()
            if not host:
                continue
            index = len(targets)
            for key in ("host", "port", "transport"):
                self.problem_fields[f"syslog[{index}].{key}"] = f"{key}_{row}"
            self.problem_fields[f"syslog[{index}]"] = f"host_{row}"
            targets.append({"host": host,
                            "port": _port(cleaned.get(f"port_{row}", "")) or SYSLOG_PORT_DEFAULT,
                            "transport": cleaned.get(f"transport_{row}") or "udp"})
        return {"syslog": targets}
