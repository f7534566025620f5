"""Scrape tokens: `secrets.token_urlsafe(32)` (256 random bits), shown once when made and
kept only as their SHA-256 - a slow password hash guards guessable secrets, and these
cannot be guessed. A scrape presents one as `Authorization: Bearer <token>`; a missing,
malformed, unknown or revoked token gets the same 401 whatever the reason (but missing,
which says a token is needed)."""
import hashlib
import re
import secrets

from django.utils import timezone

from .constants import TOKEN_BYTES, TOKEN_PATTERN
from .models import ScrapeToken

_BEARER = re.compile(r"Bearer +(\S+)", re.IGNORECASE)


def sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


def create(name, user):
    """(the new ScrapeToken, the token itself): the caller shows it once."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    row = ScrapeToken.objects.create(name=name, sha256=sha256(token), created_by=user)
    return row, token


def presented(request):
    """The token in the request's Authorization header: None without one, "" when it is
    not a Bearer token of the right shape."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    match = _BEARER.fullmatch(header.strip())
    token = match.group(1) if match else ""
    return token if re.fullmatch(TOKEN_PATTERN, token) else ""


def valid(token):
    """The unrevoked ScrapeToken this token is, or None."""
    if not token:
        return None
    return ScrapeToken.objects.filter(sha256=sha256(token), revoked_at__isnull=True).first()


def used(row, address):
    ScrapeToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now(),
                                                  last_used_from=address or None)
