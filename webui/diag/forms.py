"""The capture form (checked by diag/core/capture.py's validate, which names each bad
field) and the upload form."""
from django import forms
from django.conf import settings

from tusklib.problems import ProblemsFormMixin

from .core import capture as core

MAGICS = (b"\x0a\x0d\x0d\x0a", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
          b"\xa1\xb2\x3c\x4d", b"\x34\xcd\xb2\xa1")


def _number(name, label, help_text=""):
    low, high, default = core.LIMITS[name]
    return forms.IntegerField(label=label, min_value=low, max_value=high, initial=default,
                              help_text=help_text)


class CaptureForm(ProblemsFormMixin, forms.Form):
    interfaces = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, label="Interfaces",
        help_text="Both sides of the firewall at once show what it changes.")
    filter = forms.CharField(required=False, max_length=core.FILTER_MAX, label="Filter (BPF)",
                             help_text="e.g. <code>tcp port 5201</code>; checked before the start")
    max_packets = _number("max_packets", "Stop after packets")
    max_mb = _number("max_mb", "Stop after MB",
                     "With a ring buffer: the most recent MB are kept.")
    max_seconds = _number("max_seconds", "Stop after seconds")
    snaplen = _number("snaplen", "Snap length (bytes per packet)",
                      "256 keeps every header for the health report; up to 262144.")
    ring_files = _number("ring_files", "Ring buffer files (0: off)")
    format = forms.ChoiceField(choices=[(f, f) for f in core.FORMATS], initial="pcapng",
                               label="Format", help_text="pcap holds one interface.")
    # validate()'s problems name the fields of Spec, which are this form's
    problem_fields = {name: name for name in ("interfaces", "filter", "format", *core.LIMITS)}

    def __init__(self, *args, interfaces=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.known = set(interfaces)
        self.fields["interfaces"].choices = [(i, i) for i in sorted(interfaces)]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        spec = core.Spec(interfaces=tuple(data["interfaces"]), filter=data["filter"],
                         max_packets=data["max_packets"], max_mb=data["max_mb"],
                         max_seconds=data["max_seconds"], snaplen=data["snaplen"],
                         ring_files=data["ring_files"], format=data["format"])
        try:
            core.validate(spec, self.known, settings.TUSK.capture_quota_mb)
        except core.SpecError as error:
            self.add_problems(error)
            return data
        data["spec"] = spec
        return data


class UploadForm(forms.Form):
    file = forms.FileField(label="pcap or pcapng file")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = min(settings.TUSK.upload_max_mb, settings.TUSK.capture_quota_mb)
        if upload.size > limit * 1_000_000:
            raise forms.ValidationError(f"{upload.size} bytes: more than the {limit} MB "
                                        "an upload may have")
        head = upload.read(4)
        upload.seek(0)
        if head not in MAGICS:
            raise forms.ValidationError(f"not a pcap or pcapng file (it starts with {head.hex()})")
        return upload
