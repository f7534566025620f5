"""The SNMP agent as a commit-confirm domain (commitkit/): its jobs snmp.confirm and
snmp.cancel, its history and revision pages."""
from commitkit.domain import Domain, register

from .models import Revision, SnmpState

DOMAIN = register(Domain(
    name="snmp", label="SNMP configuration", revision_model=Revision,
    state_model=SnmpState, status_url="snmp", diff_field="text",
    revision_template="snmp/revision.html", header_template="snmp/_history_header.html",
    heavy_fields=("text",)))
