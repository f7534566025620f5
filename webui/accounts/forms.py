import ipaddress
import re

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from . import audit, throttle, tokens
from .models import Role, Scope, Token


class ThrottledLoginForm(AuthenticationForm):
    """The login, throttled (accounts/throttle.py): the attempt is counted and recorded as a
    failure before the password is checked, and forgotten only when the password was right.
    A post that checks no password (one left out) neither counts nor clears anything."""

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()   # as AuthenticationForm: no password is checked
        address = audit.client_address(self.request) if self.request else None
        wait = throttle.reserve(username, address)
        if wait:
            raise ValidationError(
                f"Too many failed logins. Try again in {max(wait // 60, 1)} minute(s).",
                code="throttled")
        cleaned = super().clean()   # a wrong password raises: the reservation stays counted
        throttle.succeeded(username, address)
        return cleaned


class UserCreateForm(forms.Form):
    username = forms.RegexField(regex=r"^[A-Za-z0-9_.-]{1,150}\Z", max_length=150,
                                error_messages={"invalid": "Letters, digits and . _ - only."})
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)
    password = forms.CharField(widget=forms.PasswordInput, strip=False,
                               help_text="A first password; the user must change it at the "
                                         "first login.")

    def clean_username(self):
        username = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise ValidationError(f"A user named {username} already exists.")
        return username

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("username") and cleaned.get("password"):
            user = get_user_model()(username=cleaned["username"])
            try:
                validate_password(cleaned["password"], user)
            except ValidationError as error:
                self.add_error("password", error)
        return cleaned


class UserEditForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
    active = forms.BooleanField(required=False, help_text="An inactive user cannot log in.")


class TokenForm(forms.Form):
    """A new token (accounts/tokens.py): its name (the audit log's), scope, lifetime and
    the networks it is taken from."""

    name = forms.RegexField(
        regex=tokens.NAME_PATTERN, max_length=tokens.NAME_MAX,
        help_text="What uses it, e.g. terraform-ci or suricata-hook; the audit log names it.",
        error_messages={"invalid": "Letters, digits, spaces and . _ : @ / - only, starting "
                                   "with a letter or digit."})
    scope = forms.ChoiceField(choices=Scope.choices, initial=Scope.READ)
    days = forms.IntegerField(min_value=1, max_value=730, initial=90, label="Expires in (days)")
    allowed_from = forms.CharField(
        required=False, label="Allowed from",
        help_text="Addresses or networks (CIDR) it is taken from, separated by spaces or "
                  "commas; empty: anywhere.")

    def clean_name(self):
        name = self.cleaned_data["name"]
        if Token.objects.filter(name=name, revoked_at__isnull=True).exists():
            raise ValidationError(f"A valid token named {name} exists: revoke it first or "
                                  "choose another name.")
        return name

    def clean_allowed_from(self):
        words = [word for word in re.split(r"[\s,]+", self.cleaned_data["allowed_from"])
                 if word]
        if len(words) > tokens.ALLOWED_FROM_MAX:
            raise ValidationError(f"At most {tokens.ALLOWED_FROM_MAX} networks.")
        networks = []
        for word in words:
            try:
                networks.append(ipaddress.ip_network(word, strict=True))
            except ValueError:
                raise ValidationError(f"{word} is not an address or a network in CIDR "
                                      "notation (host bits clear).") from None
        return networks


class ScrapeTokenForm(TokenForm):
    """The Metrics page's: a scrape token (scope metrics) for a year, from anywhere."""

    SCOPE, DAYS = Scope.METRICS, 365

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in ("scope", "days", "allowed_from"):
            del self.fields[field]
        self.fields["name"].help_text = "Who scrapes with it, e.g. prometheus.example.net."

    def clean(self):
        cleaned = super().clean()
        cleaned.update(scope=self.SCOPE, days=self.DAYS, allowed_from=[])
        return cleaned
