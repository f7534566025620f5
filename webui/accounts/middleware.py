from django.http import HttpResponseForbidden
from django.shortcuts import redirect

from .roles import is_admin

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# URL names any signed-in user may post to
OPEN_TO_VIEWERS = {"login", "logout", "password_change"}
# URL names reachable while a password must be changed
BEFORE_PASSWORD_CHANGE = {"login", "logout", "password_change"}


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
        name = request.resolver_match.url_name
        profile = getattr(user, "profile", None)
        if profile is not None and profile.must_change_password and \
                name not in BEFORE_PASSWORD_CHANGE and name is not None:
            return redirect("password_change")
        if request.method not in SAFE_METHODS and name not in OPEN_TO_VIEWERS \
                and not is_admin(user):
            return HttpResponseForbidden("Your role (viewer) cannot change anything.")
        return None
