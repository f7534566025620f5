"""Bearer tokens (accounts.Token), the one way a program acts on Tusk: the REST API's
clients, an IDS hook, a Prometheus scrape. A token is `secrets.token_urlsafe(32)` (256
random bits), shown once when made and kept only as its SHA-256 - a slow password hash
guards guessable secrets, and these cannot be guessed.

check() is the one decision on a presented token, in this order: known, not revoked, not
expired, its maker still an active user (else 401, the same answer whatever the reason);
from an address its allow-list takes (else 403); within its rate (else 429, with the
seconds to wait). The rate is a fixed window per token counted in its own row by one
UPDATE ... RETURNING, so every gunicorn worker counts the same calls, and the same
statement records the last use. The scope it acts with is its own, capped by what its
maker's role allows now: a token an admin made reads only once that admin is a viewer."""
import hashlib
import ipaddress
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from .models import Role, Scope, Token
from .roles import role_of

TOKEN_BYTES = 32
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.:@/-]*\Z"
NAME_MAX = 64
ALLOWED_FROM_MAX = 32            # networks in one token's allow-list
WINDOW = 60                      # seconds of the rate limit's window
_BEARER = re.compile(r"Bearer +(\S+)", re.IGNORECASE)


class Refused(Exception):
    """A presented token refused: status 401 (not valid), 403 (not from here) or 429 (too
    many calls; retry_after seconds)."""

    def __init__(self, status, message, retry_after=None, missing=False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.missing = missing

    def headers(self, realm):
        """The answer's headers (RFC 6750's challenge on a 401, Retry-After on a 429)."""
        if self.status == 401:
            error = "" if self.missing else ', error="invalid_token"'
            return {"WWW-Authenticate": f'Bearer realm="{realm}"{error}'}
        if self.retry_after:
            return {"Retry-After": str(self.retry_after)}
        return {}


@dataclass(frozen=True)
class Presented:
    """A token that passed check(): its row and the scope it acts with now."""

    token: Token
    scope: str


def sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


def create(name, scope, user, days, allowed_from=()):
    """(the new Token, the token itself): the caller shows it once."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    row = Token.objects.create(name=name, scope=scope, sha256=sha256(token), created_by=user,
                               expires_at=timezone.now() + timedelta(days=days),
                               allowed_from=[str(net) for net in allowed_from])
    return row, token


def presented(request):
    """The token in the request's Authorization header: None without one, "" when it is
    not a Bearer token of the right shape."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    match = _BEARER.fullmatch(header.strip())
    token = match.group(1) if match else ""
    return token if TOKEN_PATTERN.fullmatch(token) else ""


def calls_per_window():
    return getattr(settings, "TOKEN_CALLS_PER_MINUTE", 1200)


def cap(scope, user):
    """scope, no more than user's role allows now: an admin's anything, anyone else's
    read at most (metrics stays metrics)."""
    if role_of(user) == Role.ADMIN or scope == Scope.METRICS:
        return scope
    return Scope.READ


def allowed_here(row, address):
    if not row.allowed_from:
        return True
    if not address:
        return False
    try:
        where = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(where, ipaddress.IPv6Address) and where.ipv4_mapped:
        where = where.ipv4_mapped
    return any(where in ipaddress.ip_network(net) for net in row.allowed_from)


_COUNT = """
UPDATE {table} SET
    window_calls = CASE WHEN window_start IS NULL OR window_start <= %(since)s
                        THEN 1 ELSE window_calls + 1 END,
    window_start = CASE WHEN window_start IS NULL OR window_start <= %(since)s
                        THEN %(now)s ELSE window_start END,
    last_used_at = %(now)s, last_used_from = %(address)s
WHERE id = %(id)s RETURNING window_calls, window_start"""


def _count(row, address, now):
    """Counts the call in the token's window and records its use -> (calls, start)."""
    with connection.cursor() as cursor:
        cursor.execute(_COUNT.format(table=connection.ops.quote_name(Token._meta.db_table)),
                       {"since": now - timedelta(seconds=WINDOW), "now": now,
                        "address": address or None, "id": row.pk})
        return cursor.fetchone()


def check(token, address, now=None):
    """The Presented token, or Refused."""
    now = now or timezone.now()
    if token is None:
        raise Refused(401, "A token is needed: Authorization: Bearer <token>.", missing=True)
    row = None
    if token:
        row = Token.objects.select_related("created_by__profile").filter(
            sha256=sha256(token), revoked_at__isnull=True, expires_at__gt=now).first()
    if row is None or row.created_by is None or not row.created_by.is_active:
        raise Refused(401, "This token is not valid (unknown, expired or revoked).")
    if not allowed_here(row, address):
        raise Refused(403, f"This token is not taken from {address or 'an unknown address'}.")
    calls, start = _count(row, address, now)
    if calls > calls_per_window():
        wait = max(1, int((start + timedelta(seconds=WINDOW) - now).total_seconds()) + 1)
        raise Refused(429, f"Too many calls with this token: at most {calls_per_window()} "
                           f"a minute.", retry_after=wait)
    return Presented(row, cap(row.scope, row.created_by))
