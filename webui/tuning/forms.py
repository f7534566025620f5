from django import forms

from .core import profile as profiles


class ProfileForm(forms.Form):
    """The profile to plan or apply: one that tusk-tune finds and can load. Listing and
    loading profiles only reads their files, so the web process does it itself; a
    broken file in /etc/tusk/tuning is named here, before any job is queued."""

    profile = forms.ChoiceField(label="Profile")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        found = profiles.catalogue()
        self.problems = {name: info["error"] for name, info in found.items() if "error" in info}
        summaries = {name: info.get("summary", "cannot be loaded") for name, info in found.items()}
        self.fields["profile"].choices = [
            (name, f"{name}: {summary}" if summary else name)
            for name, summary in summaries.items()]

    def clean_profile(self):
        name = self.cleaned_data["profile"]
        if name in self.problems:
            raise forms.ValidationError(self.problems[name])
        return name
