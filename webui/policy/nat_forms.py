"""Forms for the draft's nat section (one source NAT rule, one port forward) and its
settings, in the shape of forms.py: each turns its fields into the item's plain
structure (to_item) and back (initial_from) and names the field a problem path inside
the item belongs to (problem_fields). The policy engine stays the one place that
validates: these only parse what a text box holds."""
from django import forms

from tusklib.names import NAME_MAX

from .core import choices
from .core.constants import (
    CONFIRM_TIMEOUT_DEFAULT,
    LOG_DEFAULT_DENY_DEFAULT,
    LOG_RATE_DEFAULT,
    PORT_PROTOCOLS,
)
from .forms import ItemForm, _comment, _name, _port, _split

# The class choice of a port forward that makes one rather than naming one: no class can
# be called this (a name starts with a letter).
CREATE_CLASS = "+create"


def _one_port(text):
    """A port or a range from a text box; several words stay a list, so the engine says
    that it takes one."""
    parts = [_port(part) for part in _split(text)]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts


def _zone_choices(document):
    return [(z["name"], z["name"]) for z in document.get("zones") or []]


def _set_choices(document):
    return [(s["name"], s["name"]) for s in document.get("address_sets") or []]


class SourceNatForm(ItemForm):
    name = _name()
    comment = _comment()
    to_zone = forms.ChoiceField(label="Leaving through zone")
    source = forms.MultipleChoiceField(
        required=False, label="Source address sets",
        help_text="The inside addresses it translates (none: any address). Classes match "
                  "these original addresses: source NAT happens after them.")
    translate = forms.ChoiceField(label="Translate to", choices=[
        (choices.TRANSLATE_MASQUERADE, "masquerade: the address of the interface it leaves by"),
        (choices.TRANSLATE_ADDRESS, "a given address or range")])
    address = forms.CharField(required=False, label="Address",
                              help_text="Only for a given address: one address or a range a-b, "
                                        "of one family.")
    ports = forms.CharField(required=False, label="Source ports",
                            help_text="Optional, for TCP and UDP: a port or a range a-b the "
                                      "translated source ports come from.")
    problem_fields = {"name": "name", "comment": "comment", "to": "to_zone", "source": "source",
                      "translate": "translate", "address": "address", "ports": "ports"}

    def __init__(self, *args, document=None, **kwargs):
        super().__init__(*args, **kwargs)
        document = document or {}
        self.fields["to_zone"].choices = _zone_choices(document)
        self.fields["source"].choices = _set_choices(document)

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"], "to": data["to_zone"]}
        if data["source"]:
            item["source"] = list(data["source"])
        item["translate"] = data["translate"]
        if data["address"].strip():
            item["address"] = data["address"].strip()
        ports = _one_port(data["ports"])
        if ports is not None:
            item["ports"] = ports
        if data["comment"]:
            item["comment"] = data["comment"]
        return item

    @staticmethod
    def initial_from(item):
        return {"name": item.get("name", ""), "comment": item.get("comment", ""),
                "to_zone": item.get("to", ""), "source": item.get("source") or [],
                "translate": item.get("translate", choices.TRANSLATE_MASQUERADE),
                "address": item.get("address", ""), "ports": str(item.get("ports", ""))}


class ForwardForm(ItemForm):
    name = _name()
    comment = _comment()
    from_zone = forms.ChoiceField(label="Arriving through zone")
    address = forms.CharField(required=False, label="External address",
                              help_text="The address the clients connect to; empty: any "
                                        "address of the firewall's own.")
    protocol = forms.ChoiceField(choices=[(p, p) for p in PORT_PROTOCOLS])
    ports = forms.CharField(label="External ports",
                            help_text="Ports or ranges (8000-8010), separated by spaces or "
                                      "commas.")
    to_address = forms.CharField(label="Server address",
                                 help_text="Where the traffic goes: the server behind the "
                                           "firewall.")
    to_ports = forms.CharField(required=False, label="Server port(s)",
                               help_text="Empty: the same ports; one port for every external "
                                         "port; or a range as long as the (single) external "
                                         "range, mapped port by port.")
    hairpin = forms.BooleanField(required=False, label="Hairpin", help_text=(
        "Also for hosts of the other zones that use the external address (they are "
        "masqueraded, so the server answers through the firewall)."))
    admit = forms.ChoiceField(label="Class that admits it", help_text=(
        "Classes see the translated traffic: the server's address and port. "
        "\"Create a class for it\" adds an accepting class (with an address set for the "
        "server and a service for its ports, unless ones that hold exactly these exist) "
        "where no earlier class takes the traffic first."))
    new_class = forms.CharField(required=False, label="Name of the class to create",
                                max_length=NAME_MAX, help_text=(
                                    "Only when creating: the class, and the address set and "
                                    "service it needs, get this name; empty: the forward's "
                                    "name."))
    problem_fields = {"name": "name", "comment": "comment", "from": "from_zone",
                      "address": "address", "protocol": "protocol", "ports": "ports",
                      "to_address": "to_address", "to_ports": "to_ports",
                      "hairpin": "hairpin", "class": "admit"}

    def __init__(self, *args, document=None, **kwargs):
        super().__init__(*args, **kwargs)
        document = document or {}
        self.fields["from_zone"].choices = _zone_choices(document)
        self.fields["admit"].choices = [(CREATE_CLASS, "create a class for it")] + [
            (c["name"], _class_label(c)) for c in document.get("classes") or []]

    def creates_class(self):
        return self.cleaned_data["admit"] == CREATE_CLASS

    def class_name(self):
        """The class the forward names: the chosen one, or the one to create."""
        if self.creates_class():
            return self.cleaned_data["new_class"].strip() or self.cleaned_data["name"]
        return self.cleaned_data["admit"]

    def to_item(self):
        data = self.cleaned_data
        item = {"name": data["name"], "from": data["from_zone"]}
        if data["address"].strip():
            item["address"] = data["address"].strip()
        item["protocol"] = data["protocol"]
        item["ports"] = [_port(p) for p in _split(data["ports"])]
        item["to_address"] = data["to_address"].strip()
        to_ports = _one_port(data["to_ports"])
        if to_ports is not None:
            item["to_ports"] = to_ports
        if data["hairpin"]:
            item["hairpin"] = True
        item["class"] = self.class_name()
        if data["comment"]:
            item["comment"] = data["comment"]
        return item

    @staticmethod
    def initial_from(item):
        return {"name": item.get("name", ""), "comment": item.get("comment", ""),
                "from_zone": item.get("from", ""), "address": item.get("address", ""),
                "protocol": item.get("protocol", "tcp"),
                "ports": " ".join(map(str, item.get("ports", []))),
                "to_address": item.get("to_address", ""),
                "to_ports": str(item.get("to_ports", "")),
                "hairpin": bool(item.get("hairpin")),
                "admit": item.get("class") or CREATE_CLASS}


def _class_label(cls):
    return (f"{cls.get('name')} ({cls.get('from') or 'any'} → {cls.get('to') or 'any'}, "
            f"{cls.get('action')})")


class SettingsForm(ItemForm):
    confirm_timeout = forms.IntegerField(
        required=False, label="Confirm within (seconds)",
        help_text=f"How long an applied policy waits for Confirm before it rolls back by "
                  f"itself (empty: {CONFIRM_TIMEOUT_DEFAULT}).")
    log_default_deny = forms.BooleanField(
        required=False, label="Log the default deny",
        help_text="Log what no class accepts between zones (prefix tusk:drop:).")
    log_rate = forms.IntegerField(
        required=False, label="Log rate (messages a second)",
        help_text=f"For all log rules together, bursts of twice that (empty: "
                  f"{LOG_RATE_DEFAULT}). It decides only whether a packet is logged, never "
                  f"its verdict.")
    problem_fields = {"confirm_timeout": "confirm_timeout",
                      "log_default_deny": "log_default_deny", "log_rate": "log_rate"}

    def to_item(self):
        data = self.cleaned_data
        item = {}
        if data["confirm_timeout"] is not None:
            item["confirm_timeout"] = data["confirm_timeout"]
        item["log_default_deny"] = data["log_default_deny"]
        if data["log_rate"] is not None:
            item["log_rate"] = data["log_rate"]
        return item

    @staticmethod
    def initial_from(item):
        return {"confirm_timeout": item.get("confirm_timeout", CONFIRM_TIMEOUT_DEFAULT),
                "log_default_deny": LOG_DEFAULT_DENY_DEFAULT
                if item.get("log_default_deny") is None else item["log_default_deny"],
                "log_rate": item.get("log_rate", LOG_RATE_DEFAULT)}
