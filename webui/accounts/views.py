from django.contrib import messages
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import PasswordChangeForm, SetPasswordForm
from django.db import transaction
from django.http import HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from tusklib.problems import ServiceError

from . import audit, second_factor, services, tokens, totp
from .forms import ThrottledLoginForm, TokenForm, UserCreateForm, UserEditForm
from .models import AuditEntry, LoginSettings, Profile, Scope, Token
from .roles import is_admin, role_of


@method_decorator(login_not_required, name="dispatch")
class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = ThrottledLoginForm
    redirect_authenticated_user = True

    def form_valid(self, form):
        user = form.get_user()
        if totp.enabled(user):     # the password was right; the code finishes the login
            return second_factor.begin_login(self.request, user, self.get_success_url())
        response = super().form_valid(form)
        audit.record(self.request, "login")
        return response

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if any(e.code == "throttled" for e in form.non_field_errors().as_data()):
            response.status_code = 429
        return response


# the uploads that need a recent second factor of a person (a token is a credential of
# its own; api/auth.py)
STEP_UP_UPLOADS = ("/system/upgrade/", "/api/v1/system/upgrade")


@login_not_required
def upload_gate(request):
    """nginx's auth_request before it reads the body of /diag/upload/ (up to a gigabyte)
    or of an update bundle (the page's or the API's): 204 for an admin who may act (a
    person, or an admin token from where it is taken, within its rate), 401 for no login
    or a token that is not valid, 403 for anyone else - then nginx refuses the request
    without reading its body, and gunicorn never sees it. The view checks all of it
    again."""
    token = tokens.presented(request)
    if token is not None:
        if not request.headers.get("X-Original-URI", "").startswith("/api/"):
            return HttpResponse(status=403)      # the pages take sessions only
        try:
            found = tokens.check(token, audit.client_address(request))
        except tokens.Refused as refused:   # auth_request passes on 401 and 403 only
            return HttpResponse(status=401 if refused.status == 401 else 403)
        return HttpResponse(status=204 if found.scope == Scope.ADMIN else 403)
    if not request.user.is_authenticated:
        return HttpResponse(status=401)
    profile = getattr(request.user, "profile", None)
    if not is_admin(request.user) or (profile is not None and profile.must_change_password):
        return HttpResponse(status=403)
    if second_factor.needs_enrolment(request.user):
        return HttpResponse(status=403)
    # an update bundle needs a recent second factor (its page asked for it)
    if request.headers.get("X-Original-URI", "").startswith(STEP_UP_UPLOADS) and \
            totp.enabled(request.user) and not second_factor.fresh(request):
        return HttpResponse(status=403)
    return HttpResponse(status=204)


def password_change(request):
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            user = form.save()
            Profile.objects.update_or_create(user=user,
                                             defaults={"must_change_password": False})
            audit.record(request, "password change", user.get_username())
        update_session_auth_hash(request, user)
        messages.success(request, "Password changed.")
        return redirect("dashboard")
    must = getattr(getattr(request.user, "profile", None), "must_change_password", False)
    return render(request, "accounts/password_change.html", {"form": form, "must": must})


@second_factor.recent_second_factor
def users(request):
    people = get_user_model().objects.order_by("username").select_related(
        "profile", "second_factor")
    rows = [{"user": u, "role": role_of(u), "second_factor": bool(
        getattr(u, "second_factor", None) and u.second_factor.confirmed_at)} for u in people]
    return render(request, "accounts/users.html", {
        "rows": rows, "login_settings": LoginSettings.current()})


@second_factor.recent_second_factor
def user_create(request):
    form = UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        user = services.create_user(audit.Actor.of(request), data["username"], data["role"],
                                    data["password"])
        messages.success(request, f"User {user.get_username()} created; they choose their "
                                  "own password at the first login.")
        return redirect("users")
    return render(request, "accounts/user_form.html", {"form": form, "title": "New user"})


@second_factor.recent_second_factor
def user_edit(request, pk):
    user = get_object_or_404(get_user_model(), pk=pk)
    initial = {"role": role_of(user), "active": user.is_active}
    form = UserEditForm(request.POST or None, initial=initial)
    password_form = SetPasswordForm(user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.edit_user(audit.Actor.of(request), user, data["role"], data["active"])
        except ServiceError:
            form.add_error(None, "You cannot take away your own admin role or deactivate "
                                 "yourself; ask another admin.")
        else:
            messages.success(request, f"User {user.get_username()} saved.")
            return redirect("users")
    return render(request, "accounts/user_form.html",
                  {"form": form, "password_form": password_form, "edited": user,
                   "title": f"User {user.get_username()}"})


@second_factor.recent_second_factor
def user_password(request, pk):
    user = get_object_or_404(get_user_model(), pk=pk)
    form = SetPasswordForm(user, request.POST)
    if form.is_valid():
        with transaction.atomic():
            form.save()
            Profile.objects.update_or_create(user=user, defaults={"must_change_password": True})
            audit.record(request, "password reset", user.get_username())
        messages.success(request, f"New password set for {user.get_username()}; they must "
                                  "change it at the next login.")
        return redirect("users")
    edit = UserEditForm(initial={"role": role_of(user), "active": user.is_active})
    return render(request, "accounts/user_form.html",
                  {"form": edit, "password_form": form, "edited": user,
                   "title": f"User {user.get_username()}"}, status=400)


def audit_log(request):
    entries = AuditEntry.objects.all()
    action = request.GET.get("action", "")
    if action:
        entries = entries.filter(action=action)
    actions = AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct()
    return render(request, "accounts/audit.html",
                  {"entries": entries[:500], "actions": list(actions), "action": action})


def _tokens_page(request, form=None, created=None, status=200):
    response = render(request, "accounts/tokens.html", {
        "form": form or TokenForm(), "created": created, "now": timezone.now(),
        "tokens": Token.objects.select_related("created_by"),
        "api_url": request.build_absolute_uri("/api/v1/"),
        "openapi_url": "/api/v1/openapi.json"}, status=status)
    patch_cache_control(response, no_store=True)   # a new token is in it, once
    return response


def token_form(request, form_class, page, action):
    """A page that makes tokens (Tokens, Metrics): admins only, also to look - it is about
    credentials. page(request, form=None, created=None, status=200) draws it; a new
    token is shown once, in the answer to the form (no redirect: it never lands in a
    session or a message cookie)."""
    if not is_admin(request.user):
        return HttpResponseForbidden("This page is about credentials: it is for admins.")
    if request.method != "POST":
        return page(request)
    form = form_class(request.POST)
    if not form.is_valid():
        return page(request, form, status=400)
    data = form.cleaned_data
    with transaction.atomic():
        row, token = tokens.create(data["name"], data["scope"], request.user, data["days"],
                                   data["allowed_from"])
        audit.record(request, action, row.name, token=row.pk, scope=row.scope,
                     days=data["days"], allowed_from=row.allowed_from)
    return page(request, created={"row": row, "token": token}, status=201)


def token_revoke_of(request, rows, pk, action, back):
    """Revokes token pk of rows (a Token queryset) for an admin; then to back."""
    if not is_admin(request.user):
        return HttpResponseForbidden("This page is about credentials: it is for admins.")
    row = get_object_or_404(rows, pk=pk)
    if row.revoked_at is None:
        with transaction.atomic():
            Token.objects.filter(pk=row.pk).update(revoked_at=timezone.now())
            audit.record(request, action, row.name, token=row.pk)
        messages.success(request, f"Token {row.name} revoked: calls with it are refused now.")
    return redirect(reverse(back))


@second_factor.recent_second_factor
def tokens_page(request):
    return token_form(request, TokenForm, _tokens_page, "token create")


@require_POST
@second_factor.recent_second_factor
def token_revoke(request, pk):
    return token_revoke_of(request, Token.objects.all(), pk, "token revoke", "tokens")
