"""Agent side: mirror the HA revision store, its pending marker and the confirmed and
pending ha.toml into the database (commitkit/mirror.py), for the unprivileged web
process. Only ha.toml is copied: each revision's pair key stays in root's files."""
from commitkit import mirror

from .core.applier import CONFIG_NAME
from .core.config import TEXT_MAX
from .models import HaState, Revision

sync = mirror.TextMirror(HaState, Revision, CONFIG_NAME, TEXT_MAX).sync
