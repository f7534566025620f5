from django import forms

from . import document as backups
from .restore import CONFIRMED, DRAFT


class UploadForm(forms.Form):
    file = forms.FileField(label="Backup file", help_text=(
        f"A file the Download button made (JSON, at most {backups.MAX_BYTES // 2**20} MiB). "
        "Nothing changes until you have seen what it would change and confirmed."))

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > backups.MAX_BYTES:
            raise forms.ValidationError(
                f"{upload.size} bytes: a backup is at most {backups.MAX_BYTES // 2**20} MiB")
        return upload


class ConfirmForm(forms.Form):
    token = forms.CharField(widget=forms.HiddenInput)
    source = forms.ChoiceField(label="The draft becomes", widget=forms.RadioSelect, choices=[
        (DRAFT, "the backup's draft"), (CONFIRMED, "the backup's confirmed revision")],
        initial=DRAFT)
    apply = forms.BooleanField(required=False, initial=True, label="Apply it now",
                               help_text="Queues the normal apply of the restored draft: "
                                         "confirm it on the Policy page, or it rolls back.")

    def __init__(self, *args, confirmed=None, **kwargs):
        super().__init__(*args, **kwargs)
        if confirmed:
            self.fields["source"].choices = [
                (DRAFT, "the backup's draft"),
                (CONFIRMED, f"the policy of the backup's confirmed revision "
                            f"{confirmed['revision']}")]
        else:
            del self.fields["source"]
