"""Login throttling. Failures within LOGIN_FAILURE_WINDOW seconds are counted three ways,
and while any count is at its limit a login is refused without checking the password:
- per user name and client, LOGIN_FAILURES_ALLOWED: whoever guesses from one place stops
  there, and the same name from another client is not locked out (a lock per name alone
  let anyone lock the real admin out with five wrong passwords);
- per client, four times as many, whatever the names;
- per user name over all clients, twenty times as many: a bound on guessing one
  password from many clients. Reaching it takes over twenty of them and then locks
  the name out everywhere until the window passes or the console unlocks it - the price
  of a bound at all; below it, guessing stays hopeless for a ten-character password.

A client is its address as nginx saw it (accounts/middleware.py ClientAddressMiddleware),
an IPv6 one by its /64: a single host is routinely given a whole /64 and may take any
address in it, so counting single IPv6 addresses gave it endless fresh allowances. An
IPv4-mapped IPv6 address is its IPv4 address; IPv4 addresses count one by one (behind a
NAT many people share one). None (no nginx in front, a test) counts as one client.

The decision and the record are one step (reserve): under PostgreSQL advisory locks on the
user name and on the client's network, the failures are counted and, if the attempt is
allowed, it is recorded as a failure at once - before its password is checked - and the
locks are let go when that commits. A right password then deletes the record
(succeeded). So guesses sent in parallel, each in its own gunicorn worker and database
connection, queue for the count one by one, and no more of them reach the password check
than the limits allow; counting first and recording after the check let every guess
that arrived while the first was being checked through. The locks cover exactly what the
counts share: two attempts with neither the name nor the network in common touch no
common count and do not wait for each other. Advisory locks, because a row lock cannot
lock rows that are not there yet (the next failure), and a serializable transaction
would need retrying; they are transaction-scoped, so nothing outlives a crashed worker.
The password check itself runs outside any lock and transaction."""
import ipaddress
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import LoginFailure

PER_ADDRESS, PER_NAME = 4, 20   # times LOGIN_FAILURES_ALLOWED

# pg_advisory_xact_lock(class, key): two 32-bit keys, a key space apart from the one-key
# form; the classes keep names and networks apart, so taking the name's lock first and
# the network's second can never deadlock. The key is the first 32 bits of an MD5 of the
# name as PostgreSQL upper-cases it - as username__iexact compares (UPPER(...) = UPPER(...)),
# so names counted together are locked together. Two names sharing a key only wait for
# each other a moment.
NAME_LOCK, NETWORK_LOCK = 0x7475736B, 0x7475736C
_LOCK_NAME = "SELECT pg_advisory_xact_lock(%s, ('x' || left(md5(upper(%s)), 8))::bit(32)::int)"
_LOCK_NETWORK = "SELECT pg_advisory_xact_lock(%s, ('x' || left(md5(%s), 8))::bit(32)::int)"


def network_of(address):
    """What a client address is counted as: 192.0.2.1/32, 2001:db8:1::/64 for any address
    of that /64, 192.0.2.1/32 for ::ffff:192.0.2.1; None for no address."""
    if not address:
        return None
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ipaddress.ip_network((ip, 32 if ip.version == 4 else 64), strict=False))


def _since():
    return timezone.now() - timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)


def _from(rows, network):
    return rows.filter(network=network) if network else rows.filter(network__isnull=True)


def _wait(username, network):
    """Seconds until a login may be tried again, 0 if it may now."""
    allowed = settings.LOGIN_FAILURES_ALLOWED
    recent = LoginFailure.objects.filter(at__gte=_since())
    name = recent.filter(username__iexact=username)
    limits = [(_from(name, network), allowed), (name, allowed * PER_NAME)]
    if network:
        limits.append((recent.filter(network=network), allowed * PER_ADDRESS))
    waits = []
    for rows, limit in limits:
        times = list(rows.order_by("-at").values_list("at", flat=True)[:limit])
        if len(times) >= limit:
            oldest = times[-1]
            waits.append((oldest + timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)
                          - timezone.now()).total_seconds())
    return max([0] + [int(w) + 1 for w in waits if w > 0])


def reserve(username, address):
    """Before a password is checked: the seconds to wait if any limit is reached (nothing
    is recorded then, and the password must not be checked), else 0 - and the attempt is
    already recorded as a failure, committed, for succeeded() to delete if it was not."""
    username, network = username[:150], network_of(address)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_LOCK_NAME, [NAME_LOCK, username])
            if network:
                cursor.execute(_LOCK_NETWORK, [NETWORK_LOCK, network])
        wait = _wait(username, network)
        if not wait:
            LoginFailure.objects.create(username=username, address=address, network=network)
    if not wait:
        LoginFailure.objects.filter(at__lt=_since()).delete()
    return wait


def succeeded(username, address):
    """The password was right: forgets this client's failures for the name (the attempt's
    own reservation among them); other clients' guesses still count."""
    _from(LoginFailure.objects.filter(username__iexact=username[:150]),
          network_of(address)).delete()
