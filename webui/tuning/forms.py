from django import forms

from .core import profile as profiles
from .core.errors import TuneError


class ProfileForm(forms.Form):
    """The profile to plan or apply: one that tusk-tune finds and can load. Listing and
    loading profiles only reads their files, so the web process does it itself; a
    broken file in /etc/tusk/tuning is named here, before any job is queued."""

    profile = forms.ChoiceField(label="Profile")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.problems = {}
        choices = []
        for name, path in profiles.available().items():
            try:
                summary = profiles.load(path).summary
            except TuneError as error:
                self.problems[name] = str(error)
                summary = "cannot be loaded"
            choices.append((name, f"{name}: {summary}" if summary else name))
        self.fields["profile"].choices = choices

    def clean_profile(self):
        name = self.cleaned_data["profile"]
        if name in self.problems:
            raise forms.ValidationError(self.problems[name])
        return name
