"""Login throttling: after LOGIN_FAILURES_ALLOWED failures for one user name within
LOGIN_FAILURE_WINDOW seconds - or four times as many from one address - further
attempts are refused, without checking the password, until the window has passed."""
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import LoginFailure


def _since():
    return timezone.now() - timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)


def blocked_for(username, address):
    """Seconds until a login may be tried again, 0 if it may now."""
    allowed = settings.LOGIN_FAILURES_ALLOWED
    recent = LoginFailure.objects.filter(at__gte=_since())
    waits = []
    for rows, limit in ((recent.filter(username__iexact=username), allowed),
                        (recent.filter(address=address) if address else None, allowed * 4)):
        if rows is None:
            continue
        times = list(rows.order_by("-at").values_list("at", flat=True)[:limit])
        if len(times) >= limit:
            oldest = times[-1]
            waits.append((oldest + timedelta(seconds=settings.LOGIN_FAILURE_WINDOW)
                          - timezone.now()).total_seconds())
    return max([0] + [int(w) + 1 for w in waits if w > 0])


def failed(username, address):
    LoginFailure.objects.create(username=username[:150], address=address)
    LoginFailure.objects.filter(at__lt=_since()).delete()


def succeeded(username):
    LoginFailure.objects.filter(username__iexact=username).delete()
