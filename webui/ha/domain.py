"""This box's half of the HA pair as a commit-confirm domain (commitkit/): its jobs
ha.confirm and ha.cancel, its history and revision pages."""
from commitkit.domain import Domain, register

from .models import HaState, Revision

DOMAIN = register(Domain(
    name="ha", label="HA pair configuration", revision_model=Revision,
    state_model=HaState, status_url="ha", diff_field="text",
    revision_template="ha/revision.html", header_template="ha/_history_header.html",
    heavy_fields=("text",)))
