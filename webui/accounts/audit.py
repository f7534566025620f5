"""The audit log: who did what, from where. A front end (a view, later the API) records
through the Actor it acts for, so a service records the same whoever calls it."""
import ipaddress
from dataclasses import dataclass
from typing import Any

from .models import AuditEntry


def client_address(request):
    return request.META.get("REMOTE_ADDR") or None


def local_address(request):
    """The box's address the request came in on, as nginx says (X-Tusk-Local-Addr); None
    without nginx. A change that moves the management address is confirmed only over
    the new one (network/services.py confirm)."""
    try:
        return str(ipaddress.ip_address(request.META.get("HTTP_X_TUSK_LOCAL_ADDR", "")))
    except ValueError:
        return None


@dataclass(frozen=True)
class Actor:
    """Who asks for an operation: the user (None: nobody signed in), the address the
    request came from and the token it came with (its name; "" for a person)."""

    user: Any
    address: str | None = None
    token: str = ""

    @classmethod
    def of(cls, request):
        user = request.user if request.user.is_authenticated else None
        return cls(user=user, address=client_address(request))


def record_for(actor, action, target="", **detail):
    user = actor.user
    return AuditEntry.objects.create(
        user=user, username=user.get_username() if user else detail.pop("username", ""),
        address=actor.address, token=actor.token, action=action, target=str(target)[:255],
        detail=detail)


def record(request, action, target="", **detail):
    return record_for(Actor.of(request), action, target, **detail)
