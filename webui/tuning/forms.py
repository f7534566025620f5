from django import forms

from tusklib.problems import ProblemsFormMixin

from .core import profile as profiles


class ProfileForm(ProblemsFormMixin, forms.Form):
    """The profile to plan or apply: one that tusk-tune finds and can load. Listing and
    loading profiles only reads their files, so the web process does it itself; a
    broken file in /etc/tusk/tuning is named here, before any job is queued."""

    profile = forms.ChoiceField(label="Profile")
    # a profile's problems name its file, section and key: all of them belong to the choice
    problem_fields = {"": "profile"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        found = profiles.catalogue()
        self.broken = {name: info["error"] for name, info in found.items() if "error" in info}
        summaries = {name: info.get("summary", "cannot be loaded") for name, info in found.items()}
        self.fields["profile"].choices = [
            (name, f"{name}: {summary}" if summary else name)
            for name, summary in summaries.items()]

    def clean(self):
        data = super().clean()
        if data.get("profile") in self.broken:
            self.add_problems(self.broken[data["profile"]])
        return data
