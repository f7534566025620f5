"""People's second factor (issue 38; accounts/totp.py, accounts/second_factor.py) against
the real database: enrolment by a code of the new secret, the login's second step (a
wrong, reused or late code refused, a recovery code once), the step-up before users,
tokens, upgrades and restores, admins made to enrol when an admin says so, and the ways
back in for someone who lost the phone. Codes are computed by pyotp from the secret, as
an authenticator app does."""
import re
import time

import pyotp
import pytest
from django.core.management import call_command
from django.test import Client
from tuskweb import make_user

from accounts import tokens, totp
from accounts.models import AuditEntry, LoginSettings, SecondFactor
from accounts.second_factor import PENDING, VERIFIED

PASSWORD = "correct horse battery"


def enrol(client):
    """Sets up the signed-in user's second factor. -> (secret, recovery codes)"""
    page = client.post("/accounts/second-factor/", {"action": "begin"})
    assert page.status_code == 200
    html = page.content.decode()
    secret = re.search(r'<code id="secret">([A-Z2-7]+)</code>', html).group(1)
    assert '<svg' in html and 'style=' not in html.split('id="qr"')[1].split("</div>")[0]
    wrong = client.post("/accounts/second-factor/", {"action": "confirm", "code": "12345x"})
    assert wrong.status_code == 400 and not totp.enabled(wrong.wsgi_request.user)
    done = client.post("/accounts/second-factor/", {"action": "confirm",
                                                     "code": pyotp.TOTP(secret).now()})
    assert done.status_code == 201 and "no-store" in done["Cache-Control"]
    codes = re.search(r'<pre id="codes">(.*?)</pre>', done.content.decode(), re.S).group(1)
    return secret, codes.split()


def log_in(username, password=PASSWORD):
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response


def other_code(secret):
    """A six-digit code that is none of the codes around now."""
    near = {pyotp.TOTP(secret).at(time.time() + shift) for shift in (-30, 0, 30)}
    return next(f"{n:06d}" for n in range(1000000) if f"{n:06d}" not in near)


def next_code(secret):
    """The code of the next 30 s step: taken now (the window is a step either side), and
    after any code of this step - no waiting for the clock."""
    return pyotp.TOTP(secret).at(time.time() + totp.STEP)


def test_enrol_then_log_in_with_a_code_never_twice_and_a_recovery_code_once(db):
    user = make_user("tess", "viewer")
    client, _ = log_in("tess")
    secret, codes = enrol(client)
    assert len(codes) == 10 and len(set(codes)) == 10
    factor = SecondFactor.objects.get(user=user)
    assert factor.secret == secret and not factor.pending_secret
    assert AuditEntry.objects.filter(action="second factor on", target="tess").exists()

    client, response = log_in("tess")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/code/"
    assert client.get("/")["Location"].startswith("/accounts/login/")   # not logged in yet
    wrong = client.post("/accounts/login/code/", {"code": other_code(secret)})
    assert wrong.status_code == 400 and "wrong or was used" in wrong.content.decode()
    used = client.post("/accounts/login/code/", {"code": pyotp.TOTP(secret).at(
        factor.last_step * totp.STEP)})
    assert used.status_code == 400       # the enrolment's own code is spent
    by_recovery = client.post("/accounts/login/code/", {"code": codes[0].upper()})
    assert by_recovery.status_code == 302 and client.get("/").status_code == 200
    assert AuditEntry.objects.filter(action="login", user=user).latest("pk").detail == \
        {"second_factor": "recovery code"}

    client, _ = log_in("tess")
    assert client.post("/accounts/login/code/", {"code": codes[0]}).status_code == 400
    code = next_code(secret)
    assert client.post("/accounts/login/code/", {"code": code}).status_code == 302
    again, _ = log_in("tess")
    assert again.post("/accounts/login/code/", {"code": code}).status_code == 400
    assert totp.recovery_codes_left(user) == 9


def test_five_wrong_codes_end_the_login_and_count_as_failed_logins(db):
    make_user("tess", "viewer")
    client, _ = log_in("tess")
    secret, _ = enrol(client)
    client, _ = log_in("tess")
    for _ in range(4):
        assert client.post("/accounts/login/code/",
                           {"code": other_code(secret)}).status_code == 400
    fifth = client.post("/accounts/login/code/", {"code": other_code(secret)})
    assert fifth.status_code == 302 and fifth["Location"] == "/accounts/login/"
    assert client.post("/accounts/login/code/", {"code": pyotp.TOTP(secret).now()})[
        "Location"] == "/accounts/login/"        # that login is gone: the password again
    assert not client.session.get("_auth_user_id")
    # the wrong codes were failed logins (LOGIN_FAILURES_ALLOWED, 5): the throttle now
    # refuses even the right password, before it is checked
    assert log_in("tess")[1].status_code == 429


def test_a_late_code_step_is_refused(db):
    make_user("tess", "viewer")
    client, _ = log_in("tess")
    secret, _ = enrol(client)
    client, _ = log_in("tess")
    session = client.session
    pending = session[PENDING]
    pending["at"] -= 301
    session[PENDING] = pending
    session.save()
    late = client.post("/accounts/login/code/", {"code": pyotp.TOTP(secret).now()})
    assert late.status_code == 302 and late["Location"] == "/accounts/login/"


def test_users_tokens_upgrades_and_restores_need_a_recent_code(db):
    admin = make_user("alice", "admin")
    client = Client()
    client.force_login(admin)
    secret, _ = enrol(client)        # a code was just entered: fresh
    assert client.get("/accounts/users/").status_code == 200
    session = client.session
    session[VERIFIED] = time.time() - 601
    session.save()
    for path in ("/accounts/users/", "/accounts/tokens/", "/accounts/users/new/",
                 "/metrics/tokens/"):
        response = client.get(path)
        assert response.status_code == 302 and \
            response["Location"].startswith("/accounts/code/?next="), path
    refused = client.post("/accounts/tokens/", {"name": "x", "scope": "read", "days": 1})
    assert refused.status_code == 302 and not AuditEntry.objects.filter(
        action="token create").exists()
    gate = client.get("/accounts/upload-gate/", HTTP_X_ORIGINAL_URI="/system/upgrade/")
    assert gate.status_code == 403
    assert client.get("/accounts/upload-gate/",
                      HTTP_X_ORIGINAL_URI="/diag/upload/").status_code == 204
    back = client.post("/accounts/code/", {"code": next_code(secret),
                                            "next": "/accounts/tokens/"})
    assert back.status_code == 302 and back["Location"] == "/accounts/tokens/"
    assert client.post("/accounts/tokens/", {"name": "x", "scope": "read",
                                             "days": 1}).status_code == 201
    assert client.get("/accounts/upload-gate/",
                      HTTP_X_ORIGINAL_URI="/system/upgrade/").status_code == 204
    offsite = client.post("/accounts/code/", {"code": "x", "next": "https://evil.example/"})
    assert offsite.status_code == 400


def test_the_apis_riskiest_calls_over_a_session_need_a_recent_code_and_a_token_none(db):
    """The same step-up through the API for a person's session (users, an update bundle,
    a restore); a token, made by an admin who entered a code, is a credential of its
    own. Reads and the rest need no fresh code."""
    admin = make_user("alice", "admin")
    client = Client()
    client.force_login(admin)
    secret, _ = enrol(client)
    _, token = tokens.create("ci", "admin", admin, 1)
    session = client.session
    session[VERIFIED] = time.time() - 601
    session.save()
    calls = [("get", "/api/v1/users"), ("post", "/api/v1/users"),
             ("patch", "/api/v1/users/alice"), ("post", "/api/v1/system/upgrade"),
             ("post", "/api/v1/backup/restores/1/restore")]
    def call(caller, method, path, **headers):
        if method == "get":
            return caller.get(path, **headers)
        return getattr(caller, method)(path, "{}", content_type="application/json", **headers)

    for method, path in calls:
        refused = call(client, method, path)
        assert refused.status_code == 403, path
        assert "recent second factor" in refused.json()["problems"][0]["message"], path
        by_token = call(Client(), method, path, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert by_token.status_code not in (401, 403), (path, by_token.content)
    assert client.get("/api/v1/system").status_code == 200
    assert client.get("/api/v1/backup").status_code == 200
    # nginx's gate before an API bundle's body: the same step-up for a session
    gate = client.get("/accounts/upload-gate/", HTTP_X_ORIGINAL_URI="/api/v1/system/upgrade")
    assert gate.status_code == 403
    assert client.post("/accounts/code/", {"code": next_code(secret),
                                            "next": "/"}).status_code == 302
    assert client.get("/accounts/upload-gate/",
                      HTTP_X_ORIGINAL_URI="/api/v1/system/upgrade").status_code == 204
    assert client.get("/api/v1/users").status_code == 200


def test_admins_must_enrol_when_an_admin_says_so(db):
    alice, bob = make_user("alice", "admin"), make_user("bob", "admin")
    viewer = make_user("victor", "viewer")
    client = Client()
    client.force_login(alice)
    refused = client.post("/accounts/login-settings/", {"admins_need_second_factor": "on"})
    assert refused.status_code == 302 and not LoginSettings.current().admins_need_second_factor
    enrol(client)
    client.post("/accounts/login-settings/", {"admins_need_second_factor": "on"})
    assert LoginSettings.current().admins_need_second_factor
    off = client.post("/accounts/second-factor/", {"action": "off"})
    assert off.status_code == 400 and totp.enabled(alice)    # required: it stays on

    other = Client()
    other.force_login(bob)
    for path in ("/", "/policy/", "/accounts/users/"):
        assert other.get(path)["Location"] == "/accounts/second-factor/", path
    assert other.get("/accounts/second-factor/").status_code == 200
    api = other.get("/api/v1/policy")
    assert api.status_code == 403 and "second factor" in api.json()["problems"][0]["message"]
    reader = Client()
    reader.force_login(viewer)
    assert reader.get("/").status_code == 200                 # viewers are not made to


def test_the_way_back_in_without_the_phone(db):
    alice, bob = make_user("alice", "admin"), make_user("bob", "admin")
    client = Client()
    client.force_login(bob)
    enrol(client)
    admin = Client()
    admin.force_login(alice)
    assert admin.post(f"/accounts/users/{bob.pk}/second-factor/reset/").status_code == 302
    assert not totp.enabled(bob)
    assert AuditEntry.objects.filter(action="second factor reset", target="bob").exists()
    enrol(client)
    call_command("tusk_admin", reset_second_factor="bob")
    assert not totp.enabled(bob)
    with pytest.raises(SystemExit):
        call_command("tusk_admin", reset_second_factor="nobody")
