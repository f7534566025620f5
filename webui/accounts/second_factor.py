"""The second factor's pages (accounts/totp.py does the codes): the login's second step,
the step-up before the riskiest actions, a person's own enrolment, and the rule that
admins must have one when an admin says so.

The login's second step: a right password with a second factor on logs nobody in yet;
the session remembers who (for five minutes, five codes) and the code page finishes the
login. Wrong codes count as failed logins (accounts/throttle.py), so guessing a code is
throttled as guessing a password is.

The step-up (recent_second_factor): the users, tokens, upgrade and restore pages want a
code entered within the last ten minutes by anyone who has a second factor on; without
one they lead to the code page and back."""
import time
from functools import wraps
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import login as auth_login
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from . import audit, throttle, totp
from .models import LoginSettings, SecondFactor
from .roles import is_admin

PENDING = "second_factor_pending"     # session: the login waiting for its code
VERIFIED = "second_factor_at"         # session: when a code was last entered
PENDING_SECONDS = 300
PENDING_TRIES = 5
FRESH_SECONDS = 600


class CodeForm(forms.Form):
    code = forms.CharField(max_length=32, strip=True, label="Code",
                           help_text="The 6 digits your authenticator app shows, or one of "
                                     "your recovery codes.",
                           widget=forms.TextInput(attrs={"autocomplete": "one-time-code",
                                                         "inputmode": "text",
                                                         "autofocus": True}))


def _safe_next(request, default):
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, {request.get_host()},
                                       require_https=request.is_secure()):
        return target
    return default


def begin_login(request, user, next_url):
    """Instead of logging user in: remember the login for its code. -> the redirect"""
    request.session.cycle_key()
    request.session[PENDING] = {"user": user.pk, "backend": user.backend,
                                "at": time.time(), "next": next_url, "tries": 0}
    return redirect("login_code")


def fresh(request):
    return time.time() - request.session.get(VERIFIED, 0) <= FRESH_SECONDS


def needs_enrolment(user):
    """An admin without a second factor while admins must have one."""
    return is_admin(user) and LoginSettings.current().admins_need_second_factor and \
        not totp.enabled(user)


def step_up(request):
    """To the code page, and back to this page (a GET) or the page that posted."""
    if request.method == "POST":
        messages.warning(request, "Enter a code first, then do it again: this action "
                                  "needs a recent second factor.")
    back = request.get_full_path() if request.method == "GET" else \
        request.headers.get("Referer", "") or request.path
    return redirect(f"{reverse('confirm_code')}?{urlencode({'next': back})}")


def recent_second_factor(view):
    """The view, for a person who entered a code within FRESH_SECONDS (or has no second
    factor); others go to the code page first, and back."""
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if totp.enabled(request.user) and not fresh(request):
            return step_up(request)
        return view(request, *args, **kwargs)
    return wrapped


@login_not_required
def login_code(request):
    """The login's second step."""
    pending = request.session.get(PENDING)
    user = None
    if pending and time.time() - pending.get("at", 0) <= PENDING_SECONDS:
        user = get_user_model().objects.filter(pk=pending.get("user"), is_active=True).first()
    if user is None:
        request.session.pop(PENDING, None)
        messages.error(request, "Log in again: the code was not entered in time.")
        return redirect("login")
    form = CodeForm(request.POST or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        address = audit.client_address(request)
        wait = throttle.reserve(user.get_username(), address)
        how = None if wait else totp.check(user, form.cleaned_data["code"])
        if how:
            throttle.succeeded(user.get_username(), address)
            del request.session[PENDING]
            auth_login(request, user, backend=pending["backend"])
            request.session[VERIFIED] = time.time()
            audit.record(request, "login", second_factor=how)
            return redirect(pending["next"] or reverse("dashboard"))
        pending["tries"] = pending.get("tries", 0) + 1
        request.session[PENDING] = pending
        if wait:
            form.add_error("code", f"Too many failed logins. Try again in "
                                   f"{max(wait // 60, 1)} minute(s).")
            status = 429
        elif pending["tries"] >= PENDING_TRIES:
            del request.session[PENDING]
            messages.error(request, "Too many wrong codes: log in again.")
            return redirect("login")
        else:
            form.add_error("code", "This code is wrong or was used already.")
            status = 400
    return render(request, "accounts/login_code.html", {"form": form}, status=status)


def confirm_code(request):
    """The step-up: a code again, then on to ?next=."""
    target = _safe_next(request, reverse("dashboard"))
    if not totp.enabled(request.user):
        return redirect(target)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        how = totp.check(request.user, form.cleaned_data["code"])
        if how:
            request.session[VERIFIED] = time.time()
            audit.record(request, "second factor step-up", second_factor=how)
            return redirect(target)
        form.add_error("code", "This code is wrong or was used already.")
    return render(request, "accounts/confirm_code.html", {"form": form, "next": target},
                  status=400 if form.errors else 200)


def _own_page(request, codes=None, status=200):
    factor = SecondFactor.objects.filter(user=request.user).first()
    pending = factor is not None and bool(factor.pending_secret)
    context = {"factor": factor, "enabled": totp.enabled(request.user), "codes": codes,
               "form": CodeForm(), "required": needs_enrolment(request.user) or (
                   is_admin(request.user) and
                   LoginSettings.current().admins_need_second_factor),
               "left": totp.recovery_codes_left(request.user)}
    if pending:
        uri = totp.uri(factor, request.get_host().split(":")[0])
        context.update(secret=factor.pending_secret, qr=totp.qr_svg(uri))
    response = render(request, "accounts/second_factor.html", context, status=status)
    patch_cache_control(response, no_store=True)   # a secret or recovery codes, once
    return response


def second_factor(request):
    """A person's own second factor: set it up (a QR code, then a code of it), new
    recovery codes, turn it off."""
    if request.method != "POST":
        return _own_page(request)
    action = request.POST.get("action")
    if action in ("begin", "recovery", "off") and totp.enabled(request.user) and \
            not fresh(request):
        return step_up(request)
    if action == "begin":
        totp.begin(request.user)
        return _own_page(request)
    if action == "confirm":
        form = CodeForm(request.POST)
        codes = totp.confirm(request.user, form.cleaned_data["code"]) if form.is_valid() \
            else None
        if codes is None:
            messages.error(request, "That code does not match the new secret: scan the QR "
                                    "code again or check the phone's clock.")
            return _own_page(request, status=400)
        request.session[VERIFIED] = time.time()
        audit.record(request, "second factor on", request.user.get_username())
        return _own_page(request, codes=codes, status=201)
    if action == "recovery" and totp.enabled(request.user):
        with transaction.atomic():
            codes = totp.new_recovery_codes(request.user)
            audit.record(request, "second factor recovery codes", request.user.get_username())
        return _own_page(request, codes=codes, status=201)
    if action == "off":
        if is_admin(request.user) and LoginSettings.current().admins_need_second_factor:
            messages.error(request, "Admins must have a second factor: it stays on.")
            return _own_page(request, status=400)
        with transaction.atomic():
            totp.turn_off(request.user)
            audit.record(request, "second factor off", request.user.get_username())
        messages.success(request, "Second factor off: the password alone logs you in.")
        return redirect("second_factor")
    return _own_page(request, status=400)


@require_POST
@recent_second_factor
def login_settings(request):
    """Admins only (RoleMiddleware): whether admins must have a second factor."""
    need = request.POST.get("admins_need_second_factor") == "on"
    if need and not totp.enabled(request.user):
        messages.error(request, "Set up your own second factor first.")
        return redirect("users")
    with transaction.atomic():
        LoginSettings.objects.update_or_create(pk=1, defaults={
            "admins_need_second_factor": need, "updated_by": request.user})
        audit.record(request, "login settings", admins_need_second_factor=need)
    messages.success(request, "Admins must now use a second factor." if need else
                     "Admins may now choose whether to use a second factor.")
    return redirect("users")


@require_POST
@recent_second_factor
def reset_second_factor(request, pk):
    """An admin turns another person's second factor off (a lost phone, no codes left):
    they log in with the password and may set up a new one."""
    user = get_user_model().objects.filter(pk=pk).first()
    if user is not None:
        with transaction.atomic():
            totp.turn_off(user)
            audit.record(request, "second factor reset", user.get_username())
        messages.success(request, f"Second factor of {user.get_username()} turned off.")
    return redirect("users")
