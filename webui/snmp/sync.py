"""Agent side: mirror the SNMP revision store, its pending marker and the confirmed and
pending snmp.toml - each redacted: no passphrase, no community - into the database
(commitkit/mirror.py), for the unprivileged web process."""
from commitkit import mirror

from .core.applier import CONFIG_NAME
from .core.config import TEXT_MAX, redacted
from .models import Revision, SnmpState

sync = mirror.TextMirror(SnmpState, Revision, CONFIG_NAME, TEXT_MAX, shown=redacted).sync
