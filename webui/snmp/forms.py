"""The SNMP page's form. It only splits what its boxes hold into snmp.toml's structure
(to_document) and back (initial_from); snmp/core/config.py is the one place that
validates, and each of its problems lands next to its field. A passphrase box left empty
keeps the user's passphrase in force (the page never has it: the agent keeps it)."""
import re

from django import forms

from tusklib.problems import ProblemsFormMixin

from . import services
from .core.applier import CONFIRM_TIMEOUT_DEFAULT, CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from .core.config import (
    AUTH,
    NAME_MAX,
    PASSPHRASE_MAX,
    PASSPHRASE_MIN,
    TEXT_LENGTH,
    USERS_MAX,
    SnmpError,
)

SLOTS_SHOWN = 3        # empty user rows beyond the configured ones, up to USERS_MAX


def prefixes_text(items):
    return "\n".join(items)


def parse_prefixes(text):
    return [word for word in re.split(r"[\s,]+", text or "") if word]


def _password(label, help_text=""):
    return forms.CharField(label=label, required=False, max_length=PASSPHRASE_MAX * 2,
                           strip=False, help_text=help_text,
                           widget=forms.PasswordInput(render_value=False))


class SnmpForm(ProblemsFormMixin, forms.Form):
    enabled = forms.BooleanField(required=False, help_text=(
        "Off: snmpd stopped and UDP 161 closed; the users are kept."))
    location = forms.CharField(required=False, max_length=TEXT_LENGTH, label="Location",
                               help_text="sysLocation: one line of printable ASCII.")
    contact = forms.CharField(required=False, max_length=TEXT_LENGTH, label="Contact",
                              help_text="sysContact, e.g. noc@example.net.")
    allow = forms.CharField(required=False, label="Managers' prefixes",
                            widget=forms.Textarea(attrs={"rows": 3}), help_text=(
        "One prefix per line, e.g. 192.0.2.0/24: the host table admits SNMP (UDP 161) "
        "from these alone. 0.0.0.0/0 and ::/0 let anyone try."))
    community_name = _password("Read-only community (SNMPv2c)", (
        "Optional, 8-32 characters. SNMPv2c sends it in clear: prefer the users above. "
        "Empty: keep the one in force (if any)."))
    community_allow = forms.CharField(required=False, label="Community's prefixes",
                                      widget=forms.Textarea(attrs={"rows": 2}), help_text=(
        "The community is taken only from these (inside the managers' prefixes). Empty: "
        "no community."))
    timeout = forms.IntegerField(label="Confirm within (s)", initial=CONFIRM_TIMEOUT_DEFAULT,
                                 min_value=CONFIRM_TIMEOUT_MIN, max_value=CONFIRM_TIMEOUT_MAX,
                                 help_text="Unless confirmed in time, the previous "
                                 "configuration comes back by itself.")

    def __init__(self, *args, users=(), **kwargs):
        """users: the configured users' names and auth (passphrases never come here)."""
        super().__init__(*args, **kwargs)
        self.slots = min(USERS_MAX, len(users) + SLOTS_SHOWN)
        keep = " Empty: keep this user's passphrase."
        for slot in range(self.slots):
            known = slot < len(users)
            self.fields[f"user{slot}_name"] = forms.CharField(
                label=f"User {slot + 1}", required=False, max_length=NAME_MAX * 2,
                help_text="SNMPv3, always authPriv; empty: no user here.")
            self.fields[f"user{slot}_auth"] = forms.ChoiceField(
                label="Authentication", choices=[(a, f"HMAC-{a}") for a in AUTH],
                initial=AUTH[0], required=False)
            self.fields[f"user{slot}_auth_passphrase"] = _password(
                "Authentication passphrase",
                f"{PASSPHRASE_MIN}-{PASSPHRASE_MAX} characters." + (keep if known else ""))
            self.fields[f"user{slot}_privacy_passphrase"] = _password(
                "Privacy passphrase (AES-128)",
                f"{PASSPHRASE_MIN}-{PASSPHRASE_MAX} characters, not the authentication one."
                + (keep if known else ""))
        self.problem_fields = {"snmp.enabled": "enabled", "snmp.location": "location",
                               "snmp.contact": "contact", "snmp.allow": "allow",
                               "community.name": "community_name",
                               "community.allow": "community_allow"}

    def user_rows(self):
        """Each slot's bound fields, for the template's table."""
        return [[self[f"user{slot}_{key}"] for key in ("name", "auth", "auth_passphrase",
                                                         "privacy_passphrase")]
                for slot in range(self.slots)]

    @staticmethod
    def initial_from(document):
        snmp = document["snmp"]
        initial = {"enabled": snmp["enabled"], "location": snmp["location"],
                   "contact": snmp["contact"], "allow": prefixes_text(snmp["allow"])}
        for slot, user in enumerate(document["user"]):
            initial[f"user{slot}_name"] = user["name"]
            initial[f"user{slot}_auth"] = user["auth"]
        if "community" in document:
            initial["community_allow"] = prefixes_text(document["community"]["allow"])
        return initial

    def to_document(self):
        """snmp.toml's structure of what was typed; a user's row with nothing in it is no
        user, a passphrase left empty is left out (kept)."""
        data = self.cleaned_data
        users = []
        for slot in range(self.slots):
            row = {key: data.get(f"user{slot}_{key}") or "" for key in
                   ("name", "auth", "auth_passphrase", "privacy_passphrase")}
            if not any(row[key] for key in ("name", "auth_passphrase", "privacy_passphrase")):
                continue
            index = len(users)
            for key in row:
                self.problem_fields[f"user[{index}].{key}"] = f"user{slot}_{key}"
            users.append({key: value for key, value in row.items()
                          if value or key in ("name",)} | {"privacy": "AES"})
        self.problem_fields["user"] = f"user{0}_name" if self.slots else None
        document = {"snmp": {"enabled": data["enabled"], "location": data["location"],
                             "contact": data["contact"],
                             "allow": parse_prefixes(data["allow"])},
                    "user": users}
        community = parse_prefixes(data["community_allow"])
        if community:
            document["community"] = {"allow": community}
            if data["community_name"]:
                document["community"]["name"] = data["community_name"]
        return document

    def clean(self):
        data = super().clean()
        if not self.errors:
            try:   # the one check, the API's too
                services.check(self.to_document())
            except SnmpError as error:
                self.add_problems(error.problems)
        return data
