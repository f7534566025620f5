"""Every page is behind a login; a viewer cannot change anything, on any URL."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.middleware import OPEN_TO_VIEWERS
from accounts.models import AuditEntry, Profile

PUBLIC = {"login", "healthz", "upload_gate",
          "network_confirm",   # the one-time link: its token is the proof (network/views.py)
          "metrics_scrape"}    # a scrape token is the proof (metrics/views.py)
SAMPLE_KWARGS = {"section": "zones", "index": 0, "pk": 1, "number": 1, "direction": "up",
                 "key": "globus"}


def all_routes(resolver=None, prefix=""):
    """Every page's route. Not the REST API's: it authenticates each call itself and
    answers 401/403 in JSON; tests/web/test_api.py holds every one of its operations
    against every kind of caller."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "api":
                continue
            yield from all_routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield entry.name, prefix + str(entry.pattern)


def url_of(route):
    url = "/" + route
    for key, value in SAMPLE_KWARGS.items():
        for kind in ("int", "str"):
            url = url.replace(f"<{kind}:{key}>", str(value))
    assert "<" not in url, f"no sample value for {route}"
    return url


ROUTES = sorted(set(all_routes()))
# every route but the public ones; of those, every one a viewer may not post to
PROTECTED = [(name, route) for name, route in ROUTES if name not in PUBLIC]
CHANGING = [(name, route) for name, route in PROTECTED if name not in OPEN_TO_VIEWERS]


def test_the_url_list_is_complete_enough():
    names = {name for name, _ in ROUTES}
    assert {"policy_apply", "policy_confirm", "policy_item_delete", "user_create",
            "tuning_plan", "tuning_apply", "tuning_verify", "tuning_rollback"} <= names
    assert PUBLIC | OPEN_TO_VIEWERS <= names      # the exceptions name real routes


@pytest.mark.django_db
@pytest.mark.parametrize("name,route", PROTECTED)
def test_anonymous_users_are_sent_to_login(client, name, route):
    response = client.get(url_of(route))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
@pytest.mark.parametrize("name,route", CHANGING)
def test_a_viewer_cannot_post_anywhere(viewer_client, name, route):
    before = AuditEntry.objects.count()
    response = viewer_client.post(url_of(route), {"version": 1, "name": "x"})
    assert response.status_code == 403, f"{name}: {response.status_code}"
    assert AuditEntry.objects.count() == before


@pytest.mark.django_db
def test_a_viewer_sees_pages_but_no_change_buttons(viewer_client):
    response = viewer_client.get("/policy/zones/")
    assert response.status_code == 200
    assert b"Add zone" not in response.content
    assert b"Delete" not in response.content


@pytest.mark.django_db
def test_htmx_requests_get_the_fragment_and_others_the_page(admin_client):
    page = admin_client.get("/policy/")
    fragment = admin_client.get("/policy/", HTTP_HX_REQUEST="true")
    assert b"<html" in page.content and b"htmx.min.js" in page.content
    assert b"<html" not in fragment.content and b"Zones" in fragment.content


@pytest.mark.django_db
def test_a_user_with_a_chosen_password_must_change_it_first(client, admin_user):
    Profile.objects.filter(user=admin_user).update(must_change_password=True)
    client.force_login(admin_user)
    assert client.get("/policy/")["Location"] == "/accounts/password/"
    response = client.post("/accounts/password/", {
        "old_password": "correct horse battery", "new_password1": "another fine passphrase",
        "new_password2": "another fine passphrase"})
    assert response.status_code == 302
    assert client.get("/policy/").status_code == 200
    assert AuditEntry.objects.filter(action="password change", username="alice").exists()


def test_healthz_answers_without_login(client, db):
    response = client.get("/healthz/")
    assert response.status_code == 200 and response.content == b"ok\n"


class CountingUploadHandler(FileUploadHandler):
    """Counts the multipart parts Django parses, and keeps nothing."""
    parts = 0

    def new_file(self, *args, **kwargs):
        type(self).parts += 1
        super().new_file(*args, **kwargs)

    def receive_data_chunk(self, raw_data, start):
        return None

    def file_complete(self, file_size):
        return None


@pytest.mark.django_db
@override_settings(FILE_UPLOAD_HANDLERS=["test_access.CountingUploadHandler"])
def test_no_body_is_parsed_before_the_login_and_role_checks(admin_user, viewer_user):
    """An anonymous client with a CSRF cookie (anyone gets one from the login page), and a
    viewer, post a file: refused before Django parses a byte of the multipart body."""
    for who, refusal in ((None, 302), (viewer_user, 403), (admin_user, None)):
        client = Client(enforce_csrf_checks=True)
        client.get("/accounts/login/")
        if who:
            client.force_login(who)
        token = client.cookies["csrftoken"].value
        CountingUploadHandler.parts = 0
        response = client.post("/diag/upload/", {
            "csrfmiddlewaretoken": token, "file": SimpleUploadedFile("x.pcap", b"x" * 5000)})
        if refusal:
            assert response.status_code == refusal, who
            assert CountingUploadHandler.parts == 0, f"{who}: the body was parsed"
        else:   # the admin's reaches the form, which refuses the junk by its field
            assert response.status_code == 400
            assert CountingUploadHandler.parts == 1


@pytest.mark.django_db
def test_the_upload_gate_lets_only_admins_who_may_act_send_a_large_body(client, admin_user,
                                                                       viewer_user):
    """nginx asks it (auth_request) before it reads the body of /diag/upload/."""
    assert client.get("/accounts/upload-gate/").status_code == 401
    client.force_login(viewer_user)
    assert client.get("/accounts/upload-gate/").status_code == 403
    client.force_login(admin_user)
    assert client.get("/accounts/upload-gate/").status_code == 204
    Profile.objects.filter(user=admin_user).update(must_change_password=True)
    assert client.get("/accounts/upload-gate/").status_code == 403
    admin_user.is_active = False
    admin_user.save()
    assert client.get("/accounts/upload-gate/").status_code == 401
