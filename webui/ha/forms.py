"""The HA page's form: this box's half of the pair. It only splits what its boxes hold
into ha.toml's structure (to_document) and back (initial_from); ha/core/config.py is the
one place that validates, and each of its problems lands next to its field."""
import re

from django import forms

from tusklib.problems import ProblemsFormMixin

from . import services
from .core.applier import CONFIRM_TIMEOUT_DEFAULT, CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from .core.config import (
    ADVERT_MS_MAX,
    ADVERT_MS_MIN,
    CLUSTER,
    CLUSTER_KEYS,
    PAIR,
    PRIMARY,
    PRIORITY,
    HaError,
)
from .core.peer import KEY_MAX, KEY_MIN, key_problem, new_key

SEGMENTS_HELP = ("One traffic segment per line: its interface, then the addresses the "
                 "pair's master holds there, with their prefix - e.g. "
                 "<code>eth1 198.51.100.1/24 2001:db8:100::1/64</code>.")


def segments_text(virtual):
    return "\n".join(" ".join([entry["interface"], *entry["addresses"]]) for entry in virtual)


def parse_segments(text):
    """'eth1 a/24 b/64' per line -> [{"interface", "addresses"}]; blank lines skipped."""
    found = []
    for line in (text or "").splitlines():
        words = [w for w in re.split(r"[\s,]+", line) if w]
        if words:
            found.append({"interface": words[0], "addresses": words[1:]})
    return found


PAIR_KEYS = ("enabled", "role", "vrid", "advert_ms", "preempt", "sync_interface",
             "sync_address", "peer_address")


class HaForm(ProblemsFormMixin, forms.Form):
    enabled = forms.BooleanField(required=False, initial=True, help_text=(
        "Off: this box runs alone (keepalived and conntrackd stopped), the rest kept."))
    mode = forms.ChoiceField(choices=[(PAIR, "pair: two boxes, the master holds the "
                                             "addresses"),
                                      (CLUSTER, "cluster: several boxes share the load")],
                             initial=PAIR, required=False, help_text=(
        "A cluster's boxes all carry traffic: the routers spread connections over them "
        "(equal-cost BGP with BFD, on Network &rarr; Routing) and every box shares its "
        "connections with the others over the sync link (docs/SCALE.md). A cluster has "
        "no role, VRRP, peer or virtual addresses: those fields are the pair's."))
    role = forms.ChoiceField(choices=[("", "-"), *((r, r) for r in PRIORITY)],
                             initial=PRIMARY, required=False, help_text=(
        f"Pair: the primary has VRRP priority {PRIORITY['primary']}, the secondary "
        f"{PRIORITY['secondary']}: configure one box of the pair as each."))
    vrid = forms.IntegerField(label="Virtual router id", initial=51, required=False,
                              help_text="Pair: 1-255, the same on both boxes, unique on "
                                        "their segments.")
    advert_ms = forms.IntegerField(label="Advertisement interval (ms)", initial=1000,
                                   required=False,
                                   help_text=f"VRRPv3: {ADVERT_MS_MIN}-{ADVERT_MS_MAX} ms, in "
                                   "steps of 10. The backup takes over after three missed.")
    preempt = forms.BooleanField(required=False, help_text=(
        "A primary that comes back takes the addresses back (a second, avoidable failover)."))
    sync_interface = forms.CharField(max_length=15, label="Sync interface", help_text=(
        "The dedicated link to the peer (or the cluster's other boxes): state sync runs "
        "over it, VRRP does not."))
    sync_address = forms.CharField(max_length=64, label="This box's sync address",
                                   help_text="With its prefix, e.g. 192.168.255.1/30 (a "
                                   "cluster: IPv4, e.g. 192.168.255.1/24).")
    peer_address = forms.CharField(max_length=64, label="The peer's sync address",
                                   required=False, help_text="Pair: on the same subnet, "
                                   "e.g. 192.168.255.2.")
    virtual = forms.CharField(label="Virtual addresses", required=False,
                              widget=forms.Textarea(attrs={"rows": 4}),
                              help_text=SEGMENTS_HELP)
    key = forms.CharField(label="Pair key", required=False, max_length=KEY_MAX,
                          widget=forms.PasswordInput(render_value=False))
    timeout = forms.IntegerField(label="Confirm within (s)", initial=CONFIRM_TIMEOUT_DEFAULT,
                                 min_value=CONFIRM_TIMEOUT_MIN, max_value=CONFIRM_TIMEOUT_MAX,
                                 help_text="Unless confirmed in time, the previous "
                                 "configuration comes back by itself.")

    problem_fields = {"ha.enabled": "enabled", "ha.mode": "mode", "ha.role": "role",
                      "ha.vrid": "vrid",
                      "ha.advert_ms": "advert_ms", "ha.preempt": "preempt",
                      "ha.sync_interface": "sync_interface", "ha.sync_address": "sync_address",
                      "ha.peer_address": "peer_address", "virtual": "virtual"}

    def __init__(self, *args, has_key=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.has_key = has_key
        self.fields["key"].help_text = (
            f"The same on both boxes, {KEY_MIN}-{KEY_MAX} characters: the two agents sign "
            "what they tell each other over the sync link with it. "
            + ("Empty: keep this box's key. " if has_key else "")
            + f"A new one, if you need it: <code>{new_key()}</code>")

    @staticmethod
    def initial_from(document):
        ha = document["ha"]
        return {**{key: ha[key] for key in PAIR_KEYS if key in ha},
                "mode": ha.get("mode", PAIR), "virtual": segments_text(document["virtual"])}

    def to_document(self):
        """ha.toml's structure of what was typed: a cluster's keys only for a cluster (the
        pair's role, VRRP and peer fields are not its own; virtual addresses typed there
        are refused by ha/core/config.py, named); a pair's field left empty is missing,
        and named so."""
        data = self.cleaned_data
        if data["mode"] == CLUSTER:
            ha = {key: data[key] for key in CLUSTER_KEYS}
        else:
            ha = {key: data[key] for key in PAIR_KEYS if data[key] not in (None, "")}
        return {"ha": ha, "virtual": parse_segments(data["virtual"])}

    def clean_key(self):
        key = self.cleaned_data["key"]
        if not key and not self.has_key and self.cleaned_data.get("mode") != CLUSTER:
            raise forms.ValidationError("This box has no pair key yet: give the one both "
                                        "boxes share.")
        reason = key_problem(key) if key else None
        if reason:
            raise forms.ValidationError(reason)
        return key or None

    def clean(self):
        data = super().clean()
        if not self.errors:
            try:   # the one check, the API's too (the key was checked above)
                services.check(self.to_document())
            except HaError as error:
                self.add_problems(error.problems)
        return data
