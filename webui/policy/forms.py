"""Forms for one item of the draft. Each turns its fields into the item's plain
structure (to_item) and back (initial_from), and names the form field that a
policy-engine problem path inside the item belongs to (problem_fields). The policy
engine stays the one place that validates: forms only parse what a text box holds."""
import re

from django import forms

from tusklib.names import NAME_MAX
from tusklib.problems import ProblemsFormMixin

from .core import choices
from .core.constants import (
    COMMENT_MAX,
    CONFIRM_TIMEOUT_MAX,
    CONFIRM_TIMEOUT_MIN,
    POLICY_MAX_BYTES,
    PORT_PROTOCOLS,
    PORTLESS_PROTOCOLS,
)


def _split(text):
    return [part for part in re.split(r"[\s,]+", text or "") if part]


def _port(value):
    """A port typed: its number, or the text for the engine to name what is wrong with it
    (ASCII digits only: "²".isdigit() is true too, and int() refuses it; nine at most:
    int() refuses 5000)."""
    return int(value) if value.isascii() and value.isdigit() and len(value) < 10 else value


class ItemForm(ProblemsFormMixin, forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)


def _name():
    return forms.CharField(max_length=NAME_MAX)


def _comment():
    return forms.CharField(required=False, max_length=COMMENT_MAX)


class ZoneForm(ItemForm):
    name = _name()
    interfaces = forms.CharField(help_text="Interface names, separated by spaces or commas.")
    bridged = forms.BooleanField(required=False, label="Bridged", help_text=(
        "The interfaces are ports of a transparent bridge (Network → Bridges): the zone's "
        "classes filter the bridge's frames, between bridged zones only - no NAT, fast "
        "path, path-MTU clamp or reject there."))
    vlans = forms.CharField(required=False, label="VLANs", help_text=(
        "For a bridged zone on a VLAN-aware bridge: VLAN ids separated by spaces or commas "
        "- the zone is those VLANs' frames on its ports, and other zones may take the "
        "ports' other VLANs. Empty: every frame of the ports."))
    comment = _comment()
    problem_fields = {"name": "name", "interfaces": "interfaces", "bridged": "bridged",
                      "vlans": "vlans", "comment": "comment"}

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"], "interfaces": _split(data["interfaces"])}
        if data["bridged"]:
            item["bridged"] = True
        if _split(data["vlans"]):
            item["vlans"] = [_port(vid) for vid in _split(data["vlans"])]
        if data["comment"]:
            item["comment"] = data["comment"]
        return item

    @staticmethod
    def initial_from(item):
        return {"name": item.get("name", ""), "interfaces": " ".join(item.get("interfaces", [])),
                "bridged": item.get("bridged") is True,
                "vlans": " ".join(map(str, item.get("vlans", []))),
                "comment": item.get("comment", "")}


class AddressSetForm(ItemForm):
    name = _name()
    entries = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}),
                              help_text="Hosts, prefixes or ranges (a-b), IPv4 or IPv6, one "
                                        "per line or separated by spaces.")
    comment = _comment()
    problem_fields = {"name": "name", "entries": "entries", "comment": "comment"}

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"], "entries": _split(data["entries"])}
        if data["comment"]:
            item["comment"] = data["comment"]
        return item

    @staticmethod
    def initial_from(item):
        return {"name": item.get("name", ""),
                "entries": "\n".join(map(str, item.get("entries", []))),
                "comment": item.get("comment", "")}


class ServiceForm(ItemForm):
    name = _name()
    protocol = forms.ChoiceField(choices=[(p, p) for p in PORT_PROTOCOLS + PORTLESS_PROTOCOLS])
    ports = forms.CharField(required=False, help_text="Ports or ranges (8000-8010), separated "
                                                      "by spaces or commas.")
    comment = _comment()
    problem_fields = {"name": "name", "protocol": "protocol", "ports": "ports",
                      "comment": "comment"}

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"], "protocol": data["protocol"]}
        ports = [_port(p) for p in _split(data["ports"])]
        if ports:
            item["ports"] = ports
        if data["comment"]:
            item["comment"] = data["comment"]
        return item

    @staticmethod
    def initial_from(item):
        return {"name": item.get("name", ""), "protocol": item.get("protocol", "tcp"),
                "ports": " ".join(map(str, item.get("ports", []))),
                "comment": item.get("comment", "")}


ANY = ""


class ClassForm(ItemForm):
    name = _name()
    comment = _comment()
    from_zone = forms.ChoiceField(required=False, label="From zone")
    to_zone = forms.ChoiceField(required=False, label="To zone")
    source = forms.MultipleChoiceField(required=False, label="Source address sets")
    destination = forms.MultipleChoiceField(required=False, label="Destination address sets")
    services = forms.MultipleChoiceField(required=False)
    action = forms.ChoiceField(choices=[(v, v) for v in choices.VERDICTS])
    mss_mode = forms.ChoiceField(label="TCP MSS", choices=[
        (choices.MSS_NONE, "leave alone"), (choices.MSS_FIXED, "clamp to a fixed value"),
        (choices.MSS_PMTU, "clamp to path MTU")])
    mss_value = forms.IntegerField(required=False, label="MSS value")
    strip_window_scale = forms.BooleanField(required=False, label="Strip window scale")
    strip_sack_permitted = forms.BooleanField(required=False, label="Strip SACK-permitted")
    strip_timestamps = forms.BooleanField(required=False, label="Strip timestamps")
    seqrand = forms.ChoiceField(label="Sequence randomisation", choices=[
        (choices.SEQRAND_NONE, "off"), (choices.SEQRAND_INITIATOR, "initiator's direction"),
        (choices.SEQRAND_BOTH, "both directions")])
    fastpath = forms.ChoiceField(required=False, label="Flowtable fast path", choices=[
        ("", "default: auto for TCP the class accepts and tracks"),
        (choices.FASTPATH_AUTO, "auto: elephants, once past the size below"),
        (choices.FASTPATH_ALWAYS, "always: every connection, TCP and UDP"),
        (choices.FASTPATH_NEVER, "never: the slow path only")])
    fastpath_after = forms.CharField(required=False, max_length=32, label="Promote after",
                                     help_text="bytes of a connection, both directions, "
                                     "before auto promotes it: e.g. 1 MB (the default), "
                                     "512 KiB, 0 for at once")
    hardware = forms.BooleanField(required=False, label="Hardware may carry it", help_text=(
        "Its fast-path connections go to the NIC where every interface of its zones can "
        "offload flows (checked at apply); never with sequence randomisation."))
    notrack = forms.BooleanField(required=False, label="No connection tracking (stateless)")
    log = forms.BooleanField(required=False, label="Log", help_text=(
        "Log the class's packets before its verdict: the first packet of each connection "
        "(later ones are accepted as established before any class), every packet of a "
        "notrack class. All log rules share the settings' log rate."))
    problem_fields = {
        "name": "name", "comment": "comment", "from": "from_zone", "to": "to_zone",
        "source": "source", "destination": "destination", "services": "services",
        "action": "action", "mss": "mss_mode", "mss.value": "mss_value",
        "tcp_options.window_scale": "strip_window_scale",
        "tcp_options.sack_permitted": "strip_sack_permitted",
        "tcp_options.timestamps": "strip_timestamps", "tcp_options": "strip_window_scale",
        "seqrand": "seqrand", "fastpath": "fastpath", "fastpath_after": "fastpath_after",
        "hardware": "hardware", "notrack": "notrack", "log": "log"}

    def __init__(self, *args, document=None, **kwargs):
        super().__init__(*args, **kwargs)
        document = document or {}
        zones = [(ANY, "any")] + [(z["name"], z["name"]) for z in document.get("zones") or []]
        sets = [(s["name"], s["name"]) for s in document.get("address_sets") or []]
        services = [(s["name"], s["name"]) for s in document.get("services") or []]
        self.fields["from_zone"].choices = zones
        self.fields["to_zone"].choices = zones
        self.fields["source"].choices = sets
        self.fields["destination"].choices = sets
        self.fields["services"].choices = services

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"]}
        if data["comment"]:
            item["comment"] = data["comment"]
        for key, field in (("from", "from_zone"), ("to", "to_zone")):
            if data[field]:
                item[key] = data[field]
        for key in ("source", "destination", "services"):
            if data[key]:
                item[key] = list(data[key])
        item["action"] = data["action"]
        if data["mss_mode"] != choices.MSS_NONE or data["mss_value"] is not None:
            item["mss"] = {"mode": data["mss_mode"]}
            if data["mss_value"] is not None:
                item["mss"]["value"] = data["mss_value"]
        stripped = {key: choices.OPTION_STRIP for key in choices.TCP_OPTIONS
                    if data[f"strip_{key}"]}
        if stripped:
            item["tcp_options"] = stripped
        if data["seqrand"] != choices.SEQRAND_NONE:
            item["seqrand"] = data["seqrand"]
        if data["fastpath"]:
            item["fastpath"] = data["fastpath"]
        after = data["fastpath_after"].strip()
        if after:     # the policy's own check says what is wrong with it
            item["fastpath_after"] = int(after) if after.isascii() and after.isdigit() else after
        for key in ("hardware", "notrack", "log"):
            if data[key]:
                item[key] = True
        return item

    @staticmethod
    def initial_from(item):
        mss = item.get("mss") or {}
        options = item.get("tcp_options") or {}
        initial = {
            "name": item.get("name", ""), "comment": item.get("comment", ""),
            "from_zone": item.get("from") or ANY, "to_zone": item.get("to") or ANY,
            "source": item.get("source") or [], "destination": item.get("destination") or [],
            "services": item.get("services") or [], "action": item.get("action", "accept"),
            "mss_mode": mss.get("mode", choices.MSS_NONE), "mss_value": mss.get("value"),
            "seqrand": item.get("seqrand", choices.SEQRAND_NONE),
            "fastpath": fastpath_text(item.get("fastpath")),
            "fastpath_after": str(item.get("fastpath_after", "")),
            "hardware": item.get("hardware") is True,
            "notrack": bool(item.get("notrack")),
            "log": bool(item.get("log")),
        }
        for key in choices.TCP_OPTIONS:
            initial[f"strip_{key}"] = options.get(key) == choices.OPTION_STRIP
        return initial


def fastpath_text(value):
    """A document's fastpath as the form shows it: true and false as always and never
    (policies before auto), absent as the default."""
    if isinstance(value, bool):
        return choices.FASTPATH_ALWAYS if value else choices.FASTPATH_NEVER
    return value if value in choices.FASTPATH_MODES else ""


FORMS = {"zones": ZoneForm, "address_sets": AddressSetForm, "services": ServiceForm,
         "classes": ClassForm}
TITLES = {"zones": ("Zones", "zone"), "address_sets": ("Address sets", "address set"),
          "services": ("Services", "service"), "classes": ("Traffic classes", "class")}


class ImportForm(forms.Form):
    file = forms.FileField(required=False, help_text="A Tusk policy file (YAML).")
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 12}),
                           label="or paste it")

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload:
            if upload.size > POLICY_MAX_BYTES:
                raise forms.ValidationError(
                    f"The file is larger than {POLICY_MAX_BYTES >> 20} MiB.")
            try:
                cleaned["policy_text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("file", "The file is not UTF-8 text.")
        elif cleaned.get("text", "").strip():
            cleaned["policy_text"] = cleaned["text"]
        else:
            raise forms.ValidationError("Choose a file or paste a policy.")
        return cleaned


class ApplyForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)
    timeout = forms.IntegerField(min_value=CONFIRM_TIMEOUT_MIN, max_value=CONFIRM_TIMEOUT_MAX,
                                 required=False,
                                 label="Confirm within (seconds)",
                                 help_text="Unconfirmed, the firewall rolls back by itself. "
                                           "Empty: the policy's setting.")


class PresetForm(ItemForm):
    """A preset's services into the draft, and optionally a class accepting them
    (core/presets.py): the engine checks the whole draft as it would anything typed."""
    class_name = forms.CharField(required=False, max_length=NAME_MAX, label="Class", help_text=(
        "A class accepting the preset's services, placed last (after your other "
        "classes: move it up if one of them takes the traffic first). Empty: the "
        "services only."))
    from_zone = forms.ChoiceField(required=False, label="From zone")
    to_zone = forms.ChoiceField(required=False, label="To zone")
    problem_fields = {"name": "class_name", "from": "from_zone", "to": "to_zone"}

    def __init__(self, *args, document=None, **kwargs):
        super().__init__(*args, **kwargs)
        zones = [(ANY, "any")] + [(z["name"], z["name"]) for z in (document or {}).get(
            "zones") or [] if isinstance(z, dict) and isinstance(z.get("name"), str)]
        self.fields["from_zone"].choices = self.fields["to_zone"].choices = zones
