"""The policy as a commit-confirm domain (commitkit/): its jobs policy.confirm and
policy.cancel, its history and revision pages, roll back to a revision."""
from commitkit.domain import Domain, register

from .models import Revision, TargetState

DOMAIN = register(Domain(
    name="policy", label="policy", revision_model=Revision, state_model=TargetState,
    status_url="policy_status", diff_field="ruleset",
    revision_template="policy/revision.html", header_template="policy/_history_header.html",
    heavy_fields=("policy_text", "ruleset", "listing"), rollback=True,
    context="policy.views.status_context"))
