import ipaddress

from django.http import HttpResponseForbidden
from django.shortcuts import redirect

from .roles import is_admin
from .second_factor import needs_enrolment

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# URL names any signed-in user may post to
OPEN_TO_VIEWERS = {"login", "logout", "password_change", "second_factor", "confirm_code",
                   "login_code"}
# URL names reachable while a password must be changed (the upload gate answers 403 itself;
# the metrics scrape, login_not_required, takes its scrape token and never the session)
BEFORE_PASSWORD_CHANGE = {"login", "logout", "password_change", "upload_gate", "metrics_scrape"}
# and while an admin must set up a second factor first (LoginSettings)
BEFORE_SECOND_FACTOR = BEFORE_PASSWORD_CHANGE | {"second_factor", "confirm_code", "login_code"}


class ClientAddressMiddleware:
    """REMOTE_ADDR from nginx's X-Real-IP, for the login throttle and the audit log.
    gunicorn listens on a unix socket only nginx may connect to (tusk-web.socket), where
    REMOTE_ADDR is empty; nginx sets the header to its TCP peer, replacing whatever the
    client sent. A request with a REMOTE_ADDR of its own did not come through that socket,
    so its header is not believed."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.META.get("REMOTE_ADDR"):
            try:
                address = str(ipaddress.ip_address(request.META.get("HTTP_X_REAL_IP", "")))
            except ValueError:
                address = ""
            request.META["REMOTE_ADDR"] = address
        return self.get_response(request)


class RoleMiddleware:
    """Viewers cannot change anything: any mutating request from a non-admin is
    refused here, whatever the view does. A user with a password someone else chose
    is sent to the password change first."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        user = request.user
        if not user.is_authenticated:
            return None
        if request.resolver_match.namespace == "api":
            return None     # the API checks every call's scope itself (api/auth.py)
        name = request.resolver_match.url_name
        profile = getattr(user, "profile", None)
        if profile is not None and profile.must_change_password and \
                name not in BEFORE_PASSWORD_CHANGE and name is not None:
            return redirect("password_change")
        if name not in BEFORE_SECOND_FACTOR and name is not None and needs_enrolment(user):
            return redirect("second_factor")
        if request.method not in SAFE_METHODS and name not in OPEN_TO_VIEWERS \
                and not is_admin(user):
            return HttpResponseForbidden("Your role (viewer) cannot change anything.")
        return None
