"""The network configuration as a commit-confirm domain (commitkit/): its job
network.cancel and the decide() its own network.confirm is built on, its history and
revision pages. Confirm and Roll back sit under the status page (urls.py): a confirm of
a change that moves the management address must arrive over the new one."""
from commitkit.domain import Domain, register

from .models import NetworkState, Revision

DOMAIN = register(Domain(
    name="network", label="network configuration", revision_model=Revision,
    state_model=NetworkState, status_url="network_status", diff_field="text",
    revision_template="network/revision.html",
    header_template="network/_history_header.html", heavy_fields=("text", "applied"),
    context="network.views.status_context", shown="network.core.normalise.redacted"))
