from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from . import audit, throttle
from .models import Role


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
