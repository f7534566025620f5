"""Who calls the API and what they may do. A call comes with a bearer token
(accounts/tokens.py: scope, expiry, allow-list, rate) or with a dashboard session (an
admin acts as admin, anyone else reads; CSRF applies to sessions only, and only to calls
that change something). Each operation says the scope it needs (read < operate <
admin), and a caller below it is refused with 403 before the operation runs."""
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from ninja.errors import HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from accounts import tokens, totp
from accounts.audit import Actor, client_address
from accounts.models import SCOPE_ORDER, Scope
from accounts.roles import is_admin
from accounts.second_factor import fresh, needs_enrolment

REALM = "tusk api"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class TokenRefused(Exception):
    def __init__(self, refused):
        super().__init__(refused.message)
        self.refused = refused


@dataclass(frozen=True)
class Caller:
    """request.auth of every API operation."""

    user: Any
    scope: str
    token: Any = None          # the accounts.Token, or None for a session
    address: str | None = None

    def actor(self):
        return Actor(user=self.user, address=self.address,
                     token=self.token.name if self.token else "")

    def allows(self, needed):
        return SCOPE_ORDER.index(self.scope) >= SCOPE_ORDER.index(needed)


def _needing(caller, needed):
    if not caller.allows(needed):
        raise HttpError(403, f"This needs scope {needed}; the caller has {caller.scope}.")
    return caller


class Bearer(HttpBearer):
    """A token in Authorization: refused outright when it is not valid (no fall back to
    the session), the caller otherwise."""

    def __init__(self, needed):
        self.needed = needed
        super().__init__()

    def __call__(self, request):
        token = tokens.presented(request)
        if token is None:
            return None
        address = client_address(request)
        try:
            found = tokens.check(token, address)
        except tokens.Refused as refused:
            raise TokenRefused(refused) from None
        if found.scope == Scope.METRICS:
            raise HttpError(403, "A metrics token only scrapes /metrics.")
        return _needing(Caller(found.token.created_by, found.scope, found.token, address),
                        self.needed)

    def authenticate(self, request, token):   # __call__ does it all
        raise NotImplementedError


class Session(APIKeyCookie):
    """The dashboard's session: the browser's own calls (and a person trying the API)."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self, needed, step_up=False):
        self.needed, self.step_up = needed, step_up
        super().__init__(csrf=False)   # checked below, for a signed-in caller only

    def __call__(self, request):
        user = request.user
        if not user.is_authenticated:
            return None
        if request.method not in SAFE_METHODS and check_csrf(request) is not None:
            raise HttpError(403, "CSRF check failed: a session's call needs the CSRF token "
                                 "(X-CSRFToken); a program uses a token instead.")
        profile = getattr(user, "profile", None)
        if profile is not None and profile.must_change_password:
            raise HttpError(403, "Change your password in the dashboard first.")
        if needs_enrolment(user):
            raise HttpError(403, "Set up your second factor in the dashboard first.")
        scope = Scope.ADMIN if is_admin(user) else Scope.READ
        caller = _needing(Caller(user, scope, None, client_address(request)), self.needed)
        if self.step_up and totp.enabled(user) and not fresh(request):
            raise HttpError(403, "This needs a recent second factor: enter a code in the "
                                 "dashboard (any page that asks for one) and call again.")
        return caller

    def authenticate(self, request, key):     # __call__ does it all
        raise NotImplementedError


_ACCESS = {}


def needs(scope, step_up=False):
    """The auth= of an operation needing scope: a token, else a session - which, for the
    riskiest operations (step_up: users, upgrades, restore), must have entered a second
    factor's code recently, as the pages ask. A token is a credential of its own, made
    by an admin who entered a code to make it."""
    if (scope, step_up) not in _ACCESS:
        _ACCESS[scope, step_up] = [Bearer(scope), Session(scope, step_up)]
    return _ACCESS[scope, step_up]


READ, OPERATE, ADMIN = needs(Scope.READ), needs(Scope.OPERATE), needs(Scope.ADMIN)
ADMIN_STEP_UP = needs(Scope.ADMIN, step_up=True)
