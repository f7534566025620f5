"""Users, tools, apply and the TLS settings: bad input named, nothing half-saved."""
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model

from accounts.models import AuditEntry, Profile
from jobs import queue
from jobs.models import Job, PeriodicState
from lab.paths import ROOT
from policy import draft as drafts


def test_an_admin_creates_a_viewer_who_must_choose_a_password(admin_client, client):
    response = admin_client.post("/accounts/users/new/", {
        "username": "vera", "role": "viewer", "password": "a long first passphrase"})
    assert response.status_code == 302
    profile = Profile.objects.get(user__username="vera")
    assert (profile.role, profile.must_change_password) == ("viewer", True)
    assert AuditEntry.objects.filter(action="user create", target="vera",
                                     username="alice").exists()
    assert client.login(username="vera", password="a long first passphrase")
    assert client.get("/")["Location"] == "/accounts/password/"


@pytest.mark.parametrize("fields,field,message", [
    ({"username": "alice", "role": "viewer", "password": "a long first passphrase"},
     "username", "already exists"),
    ({"username": "bad name", "role": "viewer", "password": "a long first passphrase"},
     "username", "Letters, digits"),
    ({"username": "vera", "role": "viewer", "password": "short"}, "password", "too short"),
    ({"username": "vera", "role": "root", "password": "a long first passphrase"}, "role",
     "Select a valid choice"),
])
def test_bad_user_input_is_named_and_nothing_is_created(admin_client, fields, field, message):
    before = get_user_model().objects.count()
    response = admin_client.post("/accounts/users/new/", fields)
    assert response.status_code == 200
    assert message in str(response.context["form"].errors[field])
    assert get_user_model().objects.count() == before


def test_an_admin_cannot_demote_themselves(admin_client, admin_user):
    response = admin_client.post(f"/accounts/users/{admin_user.pk}/", {"role": "viewer",
                                                                       "active": "on"})
    assert "cannot take away your own admin role" in response.content.decode()
    assert Profile.objects.get(user=admin_user).role == "admin"


def test_the_audit_log_lists_changes(admin_client):
    admin_client.post("/accounts/users/new/", {"username": "vera", "role": "viewer",
                                               "password": "a long first passphrase"})
    page = admin_client.get("/accounts/audit/").content.decode()
    assert "user create" in page and "vera" in page


def test_the_window_calculator(admin_client):
    page = admin_client.get("/tools/", {"bandwidth": "10000", "rtt": "50", "window": "65535"},
                            HTTP_HX_REQUEST="true").content.decode()
    assert "62500000 bytes" in page and 'id="shift">10<' in page
    assert "10.5 Mbit/s" in page


def test_the_pcie_calculator_says_when_a_slot_is_too_narrow(admin_client):
    page = admin_client.get("/tools/", {"generation": "2", "lanes": "1", "ports": "2",
                                        "port_gbps": "10"}).content.decode()
    assert "Too narrow" in page


def test_calculator_input_errors_name_the_field(admin_client):
    response = admin_client.get("/tools/", {"bandwidth": "-5", "rtt": "50"})
    assert response.status_code == 400
    assert "Path bandwidth (Mbit/s): Ensure this value is greater than or equal to" in \
        response.content.decode()


def test_apply_refuses_a_timeout_out_of_range_and_queues_nothing(admin_client):
    version = drafts.get().version
    response = admin_client.post("/policy/apply/", {"version": version, "timeout": "5"})
    assert response.status_code == 400
    assert "greater than or equal to 10" in str(response.context["form"].errors["timeout"])
    assert not Job.objects.filter(kind="policy.apply").exists()


def test_apply_queues_the_draft_for_the_agent(admin_client):
    admin_client.post("/policy/import/", {"text": "zones:\n  - {name: lan, interfaces: [eth1]}\n"})
    version = drafts.get().version
    response = admin_client.post("/policy/apply/", {"version": version, "timeout": "30"})
    job = Job.objects.get(kind="policy.apply")
    assert response["Location"] == f"/jobs/{job.pk}/?next=policy_status"
    assert "name: lan" in job.args["policy_text"] and job.args["timeout"] == 30
    assert job.created_by.username == "alice" and job.state == "queued"


def test_a_jobs_page_says_what_a_succeeded_job_did(admin_client):
    """The result's message (an upgrade: the release and slot it went into) under the
    state, once the job succeeded - not before, not for a failure."""
    job = queue.enqueue("system.upgrade", {"name": "x.raucb"})
    Job.objects.filter(pk=job.pk).update(
        state="running", result={"message": "release 2 is installed in slot B"})
    assert 'id="job-result"' not in admin_client.get(f"/jobs/{job.pk}/").content.decode()
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    page = admin_client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<p id="job-result" class="ok">release 2 is installed in slot B</p>' in page


@pytest.mark.parametrize("helper", [False, True])
def test_the_pages_say_whether_the_kernel_has_seqrand_as_the_agent_found(admin_client, helper):
    """What the agent's start-up hook policy.capabilities returned."""
    PeriodicState.objects.create(name="policy.capabilities",
                                 result={"seqrand helper": helper, "flowtable": False})
    page = admin_client.get("/policy/classes/new/").content.decode()
    assert ("Unavailable on this firewall: its kernel has no seqrand helper" in page) != helper
    page = admin_client.get("/dashboard/live/").content.decode()
    assert ("The kernel has the seqrand helper" in page) == helper
    assert ('id="seqrand-unavailable"' in page) != helper


@pytest.mark.parametrize("name, row", [
    ("policy.capabilities", ["seqrand helper"]),
    ("policy.capabilities", {"seqrand helper": "yes"}),
    ("dashboard.web_check", {"at": 1e12, "status": 200}),
    ("dashboard.web_check", {"url": "http://x/", "at": "now", "status": 200, "ms": 1}),
    ("dashboard.web_check", "not a table"),
])
def test_a_forged_agent_row_reads_as_nothing_reported(admin_client, name, row):
    """The rows are the web user's to write: one not of its contract's shape
    (tusklib/contracts.py) is no report on the pages that read it - never a traceback."""
    PeriodicState.objects.create(name=name, result=row)
    for url in ("/policy/classes/new/", "/dashboard/live/", "/dashboard/health/", "/"):
        assert admin_client.get(url).status_code == 200, url
    page = admin_client.get("/dashboard/health/").content.decode()
    assert "checked by the agent" not in page


def test_tls_gives_secure_cookies_and_hsts(tmp_path):
    (tmp_path / "secret").write_text("x" * 50)
    config = tmp_path / "tusk.toml"
    config.write_text((ROOT / "tests" / "web" / "tusk-test.toml").read_text()
                      .replace('secret_key_file = "test-secret-key"',
                               'secret_key_file = "secret"\ntls = true'))
    code = """
import django; django.setup()
from django.conf import settings
from django.test import Client
response = Client().get("/healthz/", secure=True, headers={"host": "localhost"})
print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE)
print(response["Strict-Transport-Security"])
print(Client().get("/accounts/login/", headers={"host": "localhost"}).status_code)
print(Client().get("/healthz/", headers={"host": "localhost"}).status_code)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "webui",
                            env=dict(os.environ, TUSK_CONFIG=str(config),
                                     DJANGO_SETTINGS_MODULE="tusk.settings"),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    secure, hsts, plain, health = result.stdout.split("\n")[:4]
    assert secure == "True True"
    assert hsts.startswith("max-age=31536000")
    assert plain == "301"  # plain HTTP is sent to HTTPS
    assert health == "200"  # but for the agent's check on nginx's loopback listener
