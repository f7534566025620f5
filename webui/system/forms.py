from django import forms

from appliance import consolepw


class ConsolePasswordForm(forms.Form):
    """A new console password, typed twice; the hash is made here, in the web process,
    so that the password itself never reaches the job queue."""

    password1 = forms.CharField(label="New console password", strip=False, max_length=128,
                                min_length=consolepw.MIN_LENGTH, widget=forms.PasswordInput(
                                    attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(label="The same again", strip=False, max_length=128,
                                widget=forms.PasswordInput(
                                    attrs={"autocomplete": "new-password"}))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("password1") and cleaned.get("password1") != cleaned.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return cleaned

    def job_argument(self):
        """What the job carries; checked like the agent checks it (one code path)."""
        encoded = consolepw.make(self.cleaned_data["password1"])
        problem = consolepw.argument_problem(encoded)
        if problem:
            raise ValueError(problem)
        return encoded
