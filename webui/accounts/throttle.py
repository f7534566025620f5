"""Login throttling. Failures within LOGIN_FAILURE_WINDOW seconds are counted three ways,
and while any count is at its limit a login is refused without checking the password:
- per user name and client address, LOGIN_FAILURES_ALLOWED: whoever guesses from one
  place stops there, and the same name from another address is not locked out (a lock
  per name alone let anyone lock the real admin out with five wrong passwords);
- per client address, four times as many, whatever the names;
- per user name over all addresses, twenty times as many: a bound on guessing one
  password from many addresses. Reaching it takes over twenty addresses and then locks
  the name out everywhere until the window passes or the console unlocks it - the price
  of a bound at all; below it, guessing stays hopeless for a ten-character password.
The address is the one nginx saw (accounts/middleware.py ClientAddressMiddleware); None
(no nginx in front, a test) counts as one address."""
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import LoginFailure

PER_ADDRESS, PER_NAME = 4, 20   # times LOGIN_FAILURES_ALLOWED


def _since():
    return timezone.now() - timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)


def _from(rows, address):
    return rows.filter(address=address) if address else rows.filter(address__isnull=True)


def blocked_for(username, address):
    """Seconds until a login may be tried again, 0 if it may now."""
    allowed = settings.LOGIN_FAILURES_ALLOWED
    recent = LoginFailure.objects.filter(at__gte=_since())
    name = recent.filter(username__iexact=username)
    limits = [(_from(name, address), allowed), (name, allowed * PER_NAME)]
    if address:
        limits.append((recent.filter(address=address), allowed * PER_ADDRESS))
    waits = []
    for rows, limit in limits:
        times = list(rows.order_by("-at").values_list("at", flat=True)[:limit])
        if len(times) >= limit:
            oldest = times[-1]
            waits.append((oldest + timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)
                          - timezone.now()).total_seconds())
    return max([0] + [int(w) + 1 for w in waits if w > 0])


def failed(username, address):
    LoginFailure.objects.create(username=username[:150], address=address)
    LoginFailure.objects.filter(at__lt=_since()).delete()


def succeeded(username, address):
    """Clears this address's failures for the name; other addresses' guesses still count."""
    _from(LoginFailure.objects.filter(username__iexact=username), address).delete()
