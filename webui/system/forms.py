from django import forms
from django.conf import settings

from appliance import consolepw

from . import bundles


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


class BundleForm(forms.Form):
    """An update bundle (docs/UPGRADES.md). The file itself was already streamed into
    upgrade_dir by views.BundleReceiver; RAUC checks its signature in the agent job."""

    bundle = forms.FileField(label="Update bundle (.raucb)")

    def clean_bundle(self):
        upload = self.cleaned_data["bundle"]
        if not getattr(upload, "stored_as", None):
            raise forms.ValidationError("the upload did not arrive whole: send it again")
        if not upload.name.endswith(bundles.SUFFIX):
            raise forms.ValidationError(f"not an update bundle: its name must end in "
                                        f"{bundles.SUFFIX}")
        if upload.size > settings.TUSK.bundle_max_mb * 1_000_000:
            raise forms.ValidationError(f"{upload.size} bytes: more than the "
                                        f"{settings.TUSK.bundle_max_mb} MB a bundle may have")
        return upload
