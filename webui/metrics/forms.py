from django import forms

from .constants import TOKEN_NAME_MAX


class TokenForm(forms.Form):
    name = forms.RegexField(
        regex=r"^[A-Za-z0-9][A-Za-z0-9 _.:@/-]*\Z", max_length=TOKEN_NAME_MAX,
        help_text="Who scrapes with it, e.g. prometheus.example.net.",
        error_messages={"invalid": "Letters, digits, spaces and . _ : @ / - only, starting "
                                   "with a letter or digit."})
