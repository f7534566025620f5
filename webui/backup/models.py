from django.conf import settings
from django.db import models


class PendingRestore(models.Model):
    """An uploaded backup that passed every check, waiting for its uploader to
    confirm the preview. The file's own bytes are kept (and checked again on
    confirm); a new upload or the restore itself deletes it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    name = models.CharField(max_length=200)   # the uploaded file's name
    text = models.TextField()                 # the file, as uploaded
    sha256 = models.CharField(max_length=64)
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-uploaded_at", "-id"]

    def __str__(self):
        return f"pending restore {self.pk} of {self.name}"
