"""The REST API (issue 38, docs/API.md) through Django's test client: its OpenAPI document
is the committed one; every operation against every kind of caller (a token of each
scope, a revoked, expired, misplaced or metrics token, a viewer's and an admin's session,
nobody) is allowed exactly as the scope allows; the policy document's version guards
every write (ETag, If-Match, 409, 428) and its problems come back with their paths;
every change is audited with the token's name; the rate limit holds across calls."""
import json
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from accounts import tokens
from accounts.models import AuditEntry, Scope, Token
from api.main import document
from jobs.models import Job
from policy import draft as drafts

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
ZONES = {"version": 1, "zones": [{"name": "inside", "interfaces": ["eth1"]},
                                 {"name": "outside", "interfaces": ["eth2"]}],
         "address_sets": [], "services": [], "classes": []}

# What each operation needs, written here independently of the code: a new operation
# fails test_every_operation_is_classified until it is added.
NEEDS = {
    ("get", "/api/v1/policy"): Scope.READ,
    ("put", "/api/v1/policy"): Scope.ADMIN,
    ("post", "/api/v1/policy/apply"): Scope.ADMIN,
    ("post", "/api/v1/policy/check"): Scope.READ,
    ("get", "/api/v1/policy/state"): Scope.READ,
    ("get", "/api/v1/policy/revisions"): Scope.READ,
    ("get", "/api/v1/policy/revisions/{number}"): Scope.READ,
    ("get", "/api/v1/policy/revisions/{number}/diff"): Scope.READ,
    ("post", "/api/v1/policy/confirm"): Scope.OPERATE,
    ("post", "/api/v1/policy/cancel"): Scope.OPERATE,
    ("post", "/api/v1/policy/rollback"): Scope.ADMIN,
    ("get", "/api/v1/jobs"): Scope.READ,
    ("get", "/api/v1/jobs/{job_id}"): Scope.READ,
    ("get", "/api/v1/network"): Scope.READ,
    ("put", "/api/v1/network"): Scope.ADMIN,
    ("post", "/api/v1/network/apply"): Scope.ADMIN,
    ("post", "/api/v1/network/confirm"): Scope.OPERATE,
    ("post", "/api/v1/network/cancel"): Scope.OPERATE,
    ("get", "/api/v1/network/state"): Scope.READ,
    ("get", "/api/v1/network/revisions"): Scope.READ,
    ("get", "/api/v1/network/revisions/{number}"): Scope.READ,
    ("get", "/api/v1/network/revisions/{number}/diff"): Scope.READ,
    ("get", "/api/v1/ha"): Scope.READ,
    ("post", "/api/v1/ha/apply"): Scope.ADMIN,
    ("post", "/api/v1/ha/failover"): Scope.OPERATE,
    ("post", "/api/v1/ha/confirm"): Scope.OPERATE,
    ("post", "/api/v1/ha/cancel"): Scope.OPERATE,
    ("get", "/api/v1/ha/state"): Scope.READ,
    ("get", "/api/v1/ha/revisions"): Scope.READ,
    ("get", "/api/v1/ha/revisions/{number}"): Scope.READ,
    ("get", "/api/v1/ha/revisions/{number}/diff"): Scope.READ,
    ("get", "/api/v1/flows"): Scope.READ,
    ("get", "/api/v1/logs"): Scope.READ,
    ("get", "/api/v1/captures"): Scope.READ,
    ("post", "/api/v1/captures"): Scope.OPERATE,
    ("get", "/api/v1/captures/{capture_id}"): Scope.READ,
    ("post", "/api/v1/captures/{capture_id}/stop"): Scope.OPERATE,
    ("post", "/api/v1/captures/{capture_id}/analyze"): Scope.OPERATE,
    ("delete", "/api/v1/captures/{capture_id}"): Scope.OPERATE,
    ("get", "/api/v1/captures/{capture_id}/download"): Scope.OPERATE,
    ("get", "/api/v1/reports/{report_id}"): Scope.READ,
    ("get", "/api/v1/users"): Scope.ADMIN,
    ("post", "/api/v1/users"): Scope.ADMIN,
    ("patch", "/api/v1/users/{username}"): Scope.ADMIN,
    ("get", "/api/v1/audit"): Scope.READ,
    ("post", "/api/v1/flows/drop"): Scope.OPERATE,
    ("post", "/api/v1/flows/capture"): Scope.OPERATE,
    ("post", "/api/v1/flows/block"): Scope.OPERATE,
    ("post", "/api/v1/flows/bypass"): Scope.OPERATE,
    ("get", "/api/v1/flows/hooks"): Scope.READ,
    ("get", "/api/v1/flows/export"): Scope.READ,
    ("put", "/api/v1/flows/export"): Scope.ADMIN,
    ("get", "/api/v1/snmp"): Scope.READ,
    ("post", "/api/v1/snmp/apply"): Scope.ADMIN,
    ("post", "/api/v1/snmp/confirm"): Scope.OPERATE,
    ("post", "/api/v1/snmp/cancel"): Scope.OPERATE,
    ("get", "/api/v1/snmp/state"): Scope.READ,
    ("get", "/api/v1/snmp/revisions"): Scope.READ,
    ("get", "/api/v1/snmp/revisions/{number}"): Scope.READ,
    ("get", "/api/v1/snmp/revisions/{number}/diff"): Scope.READ,
    ("get", "/api/v1/tuning"): Scope.READ,
    ("post", "/api/v1/tuning/plan"): Scope.OPERATE,
    ("post", "/api/v1/tuning/verify"): Scope.OPERATE,
    ("post", "/api/v1/tuning/apply"): Scope.ADMIN,
    ("post", "/api/v1/tuning/rollback"): Scope.ADMIN,
    ("get", "/api/v1/system"): Scope.READ,
    ("post", "/api/v1/system/upgrade"): Scope.ADMIN,
    ("post", "/api/v1/system/reboot"): Scope.ADMIN,
    ("get", "/api/v1/backup"): Scope.ADMIN,
    ("post", "/api/v1/backup/restores"): Scope.ADMIN,
    ("get", "/api/v1/backup/restores/{restore_id}"): Scope.ADMIN,
    ("delete", "/api/v1/backup/restores/{restore_id}"): Scope.ADMIN,
    ("post", "/api/v1/backup/restores/{restore_id}/restore"): Scope.ADMIN,
}
ORDER = [Scope.READ, Scope.OPERATE, Scope.ADMIN]


def bearer(token):
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def make_token(user, scope, days=30, allowed_from=()):
    return tokens.create(f"{scope}-token", scope, user, days, allowed_from)[1]


def problems(response):
    body = response.json()
    assert set(body) == {"problems"}, body
    return body["problems"]


def test_the_openapi_document_is_the_committed_one_and_served():
    assert DOCS.read_text() == document(), \
        "docs/openapi.json is not the API's document: run `make openapi` and commit it"
    served = Client().get("/api/v1/openapi.json")
    assert served.status_code == 200
    assert served.json()["openapi"] == "3.1.0"
    assert served.json() == json.loads(DOCS.read_text())


def test_every_operation_is_classified():
    paths = json.loads(document())["paths"]
    found = {(method, path) for path, operations in paths.items() for method in operations}
    assert found == set(NEEDS)


def _call(client, method, path, headers):
    url = re.sub(r"\{[a-z_]+\}", "1", path).replace("users/1", "users/alice")
    body = {"put": (json.dumps(ZONES), "application/json")}.get(method)
    extra = {"HTTP_IF_MATCH": '"1"'} if method == "put" else {}
    if body:
        return getattr(client, method)(url, body[0], content_type=body[1], **headers, **extra)
    if method in ("post", "patch"):
        return getattr(client, method)(url, "{}", content_type="application/json", **headers)
    return getattr(client, method)(url, **headers)


def _allowed(response):
    assert response.status_code < 500, response.content
    return response.status_code not in (401, 403)


@pytest.mark.parametrize("operation", sorted(NEEDS), ids=lambda o: f"{o[0]} {o[1]}")
def test_each_caller_is_allowed_exactly_what_its_scope_allows(operation, admin_user,
                                                             viewer_user):
    method, path = operation
    needed = NEEDS[operation]
    client = Client()
    for scope in ORDER:
        token = make_token(admin_user, scope)
        allowed = _allowed(_call(client, method, path, bearer(token)))
        assert allowed == (ORDER.index(scope) >= ORDER.index(needed)), (scope, operation)
    # a token acts as its maker may now: an admin's admin token, once its maker is a
    # viewer, reads only
    demoted = make_token(viewer_user, Scope.ADMIN)
    assert _allowed(_call(client, method, path, bearer(demoted))) == (needed == Scope.READ)
    refused = {
        "nobody": ({}, 401),
        "malformed": ({"HTTP_AUTHORIZATION": "Bearer nope"}, 401),
        "unknown": (bearer("A" * 43), 401),
        "metrics": (bearer(make_token(admin_user, Scope.METRICS)), 403),
        "elsewhere": (bearer(make_token(admin_user, Scope.ADMIN,
                                        allowed_from=["192.0.2.0/24"])), 403),
    }
    revoked = make_token(admin_user, Scope.ADMIN)
    Token.objects.filter(sha256=tokens.sha256(revoked)).update(revoked_at=timezone.now())
    expired = make_token(admin_user, Scope.ADMIN)
    Token.objects.filter(sha256=tokens.sha256(expired)).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    refused |= {"revoked": (bearer(revoked), 401), "expired": (bearer(expired), 401)}
    for name, (headers, status) in refused.items():
        response = _call(client, method, path, headers)
        assert response.status_code == status, (name, response.content)
        assert problems(response)[0]["message"], name
        if status == 401:
            assert response["WWW-Authenticate"].startswith('Bearer realm="tusk api"')
    # sessions: an admin's does everything (with the CSRF token), a viewer's reads
    viewer = Client()
    viewer.force_login(viewer_user)
    assert _allowed(_call(viewer, method, path, {})) == (needed == Scope.READ)
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(admin_user)
    if method == "get":
        assert _allowed(_call(admin, method, path, {}))
    else:
        without = _call(admin, method, path, {})
        assert without.status_code == 403 and "CSRF" in problems(without)[0]["message"]
        admin.get("/accounts/tokens/")      # sets the CSRF cookie
        csrf = {"HTTP_X_CSRFTOKEN": admin.cookies["csrftoken"].value}
        assert _allowed(_call(admin, method, path, csrf))


def test_a_token_from_its_allowed_network_is_taken(admin_user):
    token = make_token(admin_user, Scope.READ, allowed_from=["192.0.2.0/24", "2001:db8::/32"])
    for address, status in (("192.0.2.9", 200), ("::ffff:192.0.2.9", 200),
                            ("2001:db8::1", 200), ("198.51.100.1", 403)):
        response = Client(REMOTE_ADDR=address).get("/api/v1/policy", **bearer(token))
        assert response.status_code == status, address
    row = Token.objects.get(sha256=tokens.sha256(token))
    assert row.last_used_from == "2001:db8::1"   # a refused address is not a use


def test_the_policy_document_is_written_at_its_version_only(admin_user):
    token = bearer(make_token(admin_user, Scope.ADMIN))
    client = Client(REMOTE_ADDR="192.0.2.7")
    read = client.get("/api/v1/policy", **token)
    version = drafts.get().version
    assert read.status_code == 200 and read["ETag"] == f'"{version}"'
    put = client.put("/api/v1/policy", json.dumps(ZONES), content_type="application/json",
                     HTTP_IF_MATCH=read["ETag"], **token)
    assert put.status_code == 200, put.content
    assert put["ETag"] == f'"{version + 1}"' and put.json()["zones"] == ZONES["zones"]
    entry = AuditEntry.objects.latest("pk")
    assert (entry.action, entry.token, entry.user, entry.address) == \
        ("policy draft replaced", "admin-token", admin_user, "192.0.2.7")

    stale = client.put("/api/v1/policy", json.dumps(ZONES), content_type="application/json",
                       HTTP_IF_MATCH=read["ETag"], **token)
    assert stale.status_code == 409 and problems(stale)[0]["code"] == "STALE"
    missing = client.put("/api/v1/policy", json.dumps(ZONES),
                         content_type="application/json", **token)
    assert missing.status_code == 428 and "If-Match" in problems(missing)[0]["message"]

    bad = {**ZONES, "classes": [{"name": "x", "from": "inside", "to": "nowhere",
                                 "action": "accept"}]}
    refused = client.put("/api/v1/policy", json.dumps(bad), content_type="application/json",
                         HTTP_IF_MATCH=put["ETag"], **token)
    assert refused.status_code == 422
    assert any(p["path"].startswith("classes[0]") and p["code"] == "REFERENCE"
               for p in problems(refused)), refused.content
    for body, kind in (("{not json", "application/json"), ("[1, 2]", "application/json"),
                       ("x: [", "application/yaml"), ("zones: []", "text/plain")):
        answer = client.put("/api/v1/policy", body, content_type=kind,
                            HTTP_IF_MATCH=put["ETag"], **token)
        assert answer.status_code == 422 and problems(answer)[0]["code"] == "SYNTAX", body
    assert drafts.get().version == version + 1

    # the policy file itself, as YAML: what a git repository of policies holds
    as_yaml = client.put("/api/v1/policy", yaml.safe_dump({**ZONES, "zones": ZONES["zones"][:1]}),
                         content_type="application/yaml", HTTP_IF_MATCH=put["ETag"], **token)
    assert as_yaml.status_code == 200 and len(drafts.get().document["zones"]) == 1


def test_a_document_is_checked_without_being_saved(admin_user):
    token = bearer(make_token(admin_user, Scope.READ))
    client = Client()
    version = drafts.get().version
    good = client.post("/api/v1/policy/check", yaml.safe_dump(ZONES),
                       content_type="application/yaml", **token)
    assert good.status_code == 200 and good.json() == {"valid": True}
    bad = {**ZONES, "zones": [{"name": "inside", "interfaces": ["eth1"]}] * 2}
    refused = client.post("/api/v1/policy/check", json.dumps(bad),
                          content_type="application/json", **token)
    assert refused.status_code == 422 and problems(refused)[0]["code"] == "DUPLICATE"
    assert drafts.get().version == version and not AuditEntry.objects.exists()


def test_apply_answers_202_with_the_job_and_refuses_a_stale_version(admin_user):
    token = bearer(make_token(admin_user, Scope.ADMIN))
    client = Client()
    version = drafts.get().version
    stale = client.post("/api/v1/policy/apply", {"version": version + 5},
                        content_type="application/json", **token)
    assert stale.status_code == 409 and not Job.objects.exists()
    invalid = client.post("/api/v1/policy/apply", {"version": version, "timeout": 5},
                          content_type="application/json", **token)
    assert invalid.status_code == 422 and problems(invalid)[0]["path"] == "timeout"
    applied = client.post("/api/v1/policy/apply", {"version": version, "timeout": 60},
                          content_type="application/json", **token)
    assert applied.status_code == 202, applied.content
    job = applied.json()
    assert applied["Location"] == f"/api/v1/jobs/{job['id']}" == job["url"]
    assert (job["kind"], job["state"], job["created_by"]) == ("policy.apply", "queued",
                                                              "alice")
    assert Job.objects.get(pk=job["id"]).args["timeout"] == 60
    assert client.get(job["url"], **token).json()["id"] == job["id"]
    assert AuditEntry.objects.filter(action="policy apply", token="admin-token").exists()
    missing = client.get("/api/v1/jobs/99999", **token)
    assert missing.status_code == 404 and problems(missing)[0]["code"] == "NOT_FOUND"


def test_a_token_is_limited_to_its_calls_a_minute(admin_user, settings):
    settings.TOKEN_CALLS_PER_MINUTE = 3
    token = bearer(make_token(admin_user, Scope.READ))
    client = Client()
    assert [client.get("/api/v1/jobs", **token).status_code for _ in range(4)] == \
        [200, 200, 200, 429]
    limited = client.get("/api/v1/jobs", **token)
    assert limited.status_code == 429 and 1 <= int(limited["Retry-After"]) <= 61
    # the window passes: calls are taken again
    Token.objects.update(window_start=timezone.now() - timedelta(seconds=61))
    assert client.get("/api/v1/jobs", **token).status_code == 200


def test_the_tokens_page_makes_a_token_shown_once_and_revokes_it(admin_client, viewer_user):
    viewer = Client()
    viewer.force_login(viewer_user)
    assert viewer.get("/accounts/tokens/").status_code == 403
    made = admin_client.post("/accounts/tokens/", {
        "name": "terraform-ci", "scope": "operate", "days": 7,
        "allowed_from": "192.0.2.0/24, 2001:db8::/48"})
    assert made.status_code == 201
    token = re.search(r'<pre id="token-value">([^<]+)</pre>', made.content.decode()).group(1)
    row = Token.objects.get(name="terraform-ci")
    assert row.sha256 == tokens.sha256(token) and token not in json.dumps(
        list(Token.objects.values_list("sha256", "name")))
    assert (row.scope, row.allowed_from) == ("operate", ["192.0.2.0/24", "2001:db8::/48"])
    assert timedelta(days=6) < row.expires_at - timezone.now() <= timedelta(days=7)
    assert token not in admin_client.get("/accounts/tokens/").content.decode()
    again = admin_client.post("/accounts/tokens/", {"name": "terraform-ci", "scope": "read",
                                                    "days": 7})
    assert again.status_code == 400 and "exists" in again.content.decode()
    for bad in ({"allowed_from": "192.0.2.1/24"}, {"allowed_from": "example.net"},
                {"days": 0}, {"days": 731}, {"scope": "root"}):
        answer = admin_client.post("/accounts/tokens/", {"name": "x", "scope": "read",
                                                         "days": 7, **bad})
        assert answer.status_code == 400, bad
    admin_client.post(f"/accounts/tokens/{row.pk}/revoke/")
    assert Token.objects.get(pk=row.pk).revoked_at is not None
    assert Client(REMOTE_ADDR="192.0.2.1").get("/api/v1/jobs", **bearer(token)).status_code \
        == 401
    assert [e.action for e in AuditEntry.objects.order_by("pk")] == \
        ["token create", "token revoke"]


def _done(client, job, token, seconds=90):
    """The job's resource once the agent has finished it."""
    deadline = timezone.now() + timedelta(seconds=seconds)
    while timezone.now() < deadline:
        found = client.get(job["url"], **token).json()
        if found["done"]:
            return found
        time.sleep(0.3)
    raise AssertionError(f"job {job['id']} not done in {seconds} s: {found}")


def _state(client, token, want, seconds=60):
    deadline = timezone.now() + timedelta(seconds=seconds)
    while timezone.now() < deadline:
        state = client.get("/api/v1/policy/state", **token).json()
        if all(state[key] == value for key, value in want.items()):
            return state
        time.sleep(0.3)
    raise AssertionError(f"policy state never {want}: {state}")


def test_config_as_code_apply_confirm_and_an_unconfirmed_apply_rolls_back(agent, admin_user):
    """Against the real agent: PUT the policy, apply it, confirm it (an operate token
    may); apply a change and confirm nothing: the agent rolls it back by itself at the
    deadline, and the history says so."""
    admin = bearer(make_token(admin_user, Scope.ADMIN))
    operator = bearer(tokens.create("nightly", Scope.OPERATE, admin_user, 1)[1])
    client = Client()
    etag = client.get("/api/v1/policy", **admin)["ETag"]
    put = client.put("/api/v1/policy", json.dumps(ZONES), content_type="application/json",
                     HTTP_IF_MATCH=etag, **admin)
    version = int(put["ETag"].strip('"'))
    applied = client.post("/api/v1/policy/apply", {"version": version, "timeout": 120},
                          content_type="application/json", **admin)
    assert applied.status_code == 202
    job = _done(client, applied.json(), admin)
    assert job["state"] == "succeeded", job
    assert job["outcome"] == "pending" and job["deadline"] and job["revision"]
    first = job["revision"]
    _state(client, admin, {"pending": first})
    confirmed = client.post("/api/v1/policy/confirm", **operator)
    assert confirmed.status_code == 202
    assert _done(client, confirmed.json(), admin)["state"] == "succeeded"
    _state(client, admin, {"confirmed": first, "pending": None})

    changed = {**ZONES, "zones": ZONES["zones"][:1]}
    put = client.put("/api/v1/policy", json.dumps(changed), content_type="application/json",
                     HTTP_IF_MATCH=put["ETag"], **admin)
    applied = client.post("/api/v1/policy/apply",
                          {"version": int(put["ETag"].strip('"')), "timeout": 10},
                          content_type="application/json", **admin)
    job = _done(client, applied.json(), admin)
    assert job["state"] == "succeeded" and job["outcome"] == "pending"
    second = job["revision"]

    def outcomes():
        return {row["number"]: row["outcome"]
                for row in client.get("/api/v1/policy/revisions", **admin).json()}
    # the state it is about: the second revision rolled back by the agent at its deadline
    # (not a state row that has not caught up with the apply yet)
    deadline = time.monotonic() + 60
    while "rolled back" not in outcomes().get(second, "") and time.monotonic() < deadline:
        time.sleep(0.5)
    history = outcomes()
    assert history[first] == "confirmed" and "rolled back" in history[second], history
    _state(client, admin, {"confirmed": first, "pending": None})
    diff = client.get(f"/api/v1/policy/revisions/{second}/diff", **admin).json()
    assert diff["previous"] == first and diff["diff"]
    assert AuditEntry.objects.filter(action="policy confirm", token="nightly").exists()


def test_the_network_and_ha_documents_are_checked_as_their_pages_check_them(admin_user):
    """network.toml's and ha.toml's structures through the API: the same checks as the
    Network pages and the HA form (box/verify.py: the pair's links against the network),
    every problem with its path, nothing queued when refused."""
    from habox import HA_KEY, ha_document
    from test_policy_network import CONFIRMED  # eth1 manages the box, eth2(.100) traffic

    from network.models import NetworkState
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=CONFIRMED)
    token = bearer(make_token(admin_user, Scope.ADMIN))
    client = Client()
    read = client.get("/api/v1/network", **token)
    assert read.status_code == 200 and read.json()["vlans"][0]["name"] == "eth2.100"
    bad = {**read.json(), "vlans": [{"name": "eth2.100", "link": "eth9", "id": 100}]}
    refused = client.put("/api/v1/network", json.dumps(bad), content_type="application/json",
                         HTTP_IF_MATCH=read["ETag"], **token)
    assert refused.status_code == 422 and all(p["path"] for p in problems(refused))
    stale = client.put("/api/v1/network", json.dumps(read.json()),
                       content_type="application/json", HTTP_IF_MATCH='"999"', **token)
    assert stale.status_code == 409
    saved = client.put("/api/v1/network", json.dumps(read.json()),
                       content_type="application/json", HTTP_IF_MATCH=read["ETag"], **token)
    assert saved.status_code == 200 and saved["ETag"] != read["ETag"]

    on_management = {**ha_document(sync_interface="eth1"),
                     "virtual": [{"interface": "eth2", "addresses": ["198.51.100.1/24"]}]}
    refused = client.post("/api/v1/ha/apply", {"document": on_management, "key": HA_KEY},
                          content_type="application/json", **token)
    assert refused.status_code == 422
    assert any(p["path"] == "ha.sync_interface" and "management port" in p["message"]
               for p in problems(refused)), refused.content
    nokey = client.post("/api/v1/ha/apply", {"document": {
        **on_management, "ha": {**on_management["ha"], "sync_interface": "eth2.100"}}},
        content_type="application/json", **token)
    assert nokey.status_code == 422 and [p["path"] for p in problems(nokey)] == ["key"]
    assert not Job.objects.exists()
    good = {**on_management, "ha": {**on_management["ha"], "sync_interface": "eth2.100"}}
    applied = client.post("/api/v1/ha/apply", {"document": good, "key": HA_KEY,
                                               "timeout": 300},
                          content_type="application/json", **token)
    assert applied.status_code == 202, applied.content
    job = Job.objects.get(pk=applied.json()["id"])
    assert (job.kind, job.args["timeout"], job.args["key"]) == ("ha.apply", 300, HA_KEY)
    assert HA_KEY not in json.dumps(client.get("/api/v1/ha", **token).json())
    failover = client.post("/api/v1/ha/failover", **token)
    assert failover.status_code == 409 and problems(failover)[0]["path"] == "role"
    # a cluster's box (docs/SCALE.md) needs no pair key, but routing the network lacks:
    # refused at ha.mode, nothing queued
    cluster = {"ha": {"enabled": True, "mode": "cluster", "sync_interface": "eth2.100",
                      "sync_address": "192.168.255.3/24"}}
    refused = client.post("/api/v1/ha/apply", {"document": cluster},
                          content_type="application/json", **token)
    assert refused.status_code == 422
    assert [p["path"] for p in problems(refused)] == ["ha.mode"], refused.content
    assert "BGP" in problems(refused)[0]["message"] and Job.objects.count() == 1


def test_tuning_runs_only_a_profile_that_loads(admin_user):
    token = bearer(make_token(admin_user, Scope.OPERATE))
    client = Client()
    listed = client.get("/api/v1/tuning", **token).json()
    assert "throughput" in listed["profiles"] and listed["reports"] == {}
    missing = client.post("/api/v1/tuning/plan", {"profile": "nonesuch"},
                          content_type="application/json", **token)
    assert missing.status_code == 404 and problems(missing)[0]["path"] == "profile"
    planned = client.post("/api/v1/tuning/plan", {"profile": "throughput"},
                          content_type="application/json", **token)
    assert planned.status_code == 202
    assert Job.objects.get(pk=planned.json()["id"]).args == {"profile": "throughput"}
    assert client.post("/api/v1/tuning/apply", {"profile": "throughput"},
                       content_type="application/json", **token).status_code == 403
    assert AuditEntry.objects.filter(action="tuning plan", target="throughput",
                                     token="operate-token").exists()


def test_flows_are_listed_filtered_and_dropped_through_the_services(admin_user):
    from flowsample import flow_sample

    from flows.agent_jobs import SAMPLE
    from jobs.models import PeriodicState
    row = flow_sample()
    elephant = {**row["flows"][0], "id": 8, "bps": [2_000_000_000, 0],
                "orig": {"src": "10.0.0.5", "dst": "10.0.9.9", "sport": 50000, "dport": 2811},
                "reply": {"src": "10.0.9.9", "dst": "10.0.0.5", "sport": 2811, "dport": 50000}}
    PeriodicState.objects.create(name=SAMPLE, result={**row, "flows": [elephant,
                                                                       row["flows"][0]]})
    token = bearer(make_token(admin_user, Scope.OPERATE))
    client = Client()
    listed = client.get("/api/v1/flows", **token).json()
    assert listed["entries"] == 3 and [f["id"] for f in listed["flows"]] == [8, 7]
    assert listed["flows"][0]["elephant"] and listed["flows"][0]["rate"] == 2_000_000_000
    for query, ids in (("address=10.0.9.9", [8]), ("port=5201", [7]), ("elephants=true", [8]),
                       ("protocol=udp", []), ("address=10.0.0.1&port=40000", [7])):
        found = client.get(f"/api/v1/flows?{query}", **token).json()["flows"]
        assert [f["id"] for f in found] == ids, query
    assert client.get("/api/v1/flows?address=nowhere", **token).status_code == 422

    flow = {name: elephant["orig"][name] for name in ("src", "dst", "sport", "dport")}
    flow.update(id=8, family=4, proto=6)
    dropped = client.post("/api/v1/flows/drop", {"flow": flow},
                          content_type="application/json", **token)
    assert dropped.status_code == 202
    job = Job.objects.get(pk=dropped.json()["id"])
    assert (job.kind, job.args["flow"]["src"]) == ("flows.drop", "10.0.0.5")
    assert AuditEntry.objects.get(action="flow drop").token == "operate-token"
    bad = client.post("/api/v1/flows/drop", {"flow": {**flow, "src": "10.0.0.999"}},
                      content_type="application/json", **token)
    assert bad.status_code == 422 and problems(bad)[0]["path"] == "flow.src"
    captured = client.post("/api/v1/flows/capture", {"flow": flow, "seconds": 5,
                                                     "analyze": True},
                           content_type="application/json", **token)
    assert captured.status_code == 202
    assert Job.objects.get(pk=captured.json()["id"]).args["analyze"] is True
    # a row the web user forged is no sample, never a server error
    PeriodicState.objects.filter(name=SAMPLE).update(result={"flows": "x"})
    assert client.get("/api/v1/flows", **token).json()["flows"] == []


def test_users_are_made_and_changed_as_the_pages_make_them(admin_user, viewer_user):
    token = bearer(make_token(admin_user, Scope.ADMIN))
    client = Client()
    made = client.post("/api/v1/users", {"username": "ci-bot", "role": "viewer",
                                         "password": "a long first password"},
                       content_type="application/json", **token)
    assert made.status_code == 201 and made.json()["role"] == "viewer"
    weak = client.post("/api/v1/users", {"username": "weak", "role": "viewer",
                                         "password": "12345"},
                       content_type="application/json", **token)
    assert weak.status_code == 422 and problems(weak)[0]["path"] == "password"
    taken = client.post("/api/v1/users", {"username": "CI-BOT", "role": "admin",
                                          "password": "another long password"},
                        content_type="application/json", **token)
    assert taken.status_code == 422 and problems(taken)[0]["path"] == "username"
    changed = client.patch("/api/v1/users/ci-bot", {"role": "admin", "active": False},
                           content_type="application/json", **token)
    assert changed.json() == {**changed.json(), "role": "admin", "active": False}
    own = client.patch("/api/v1/users/alice", {"role": "viewer"},
                       content_type="application/json", **token)
    assert own.status_code == 403 and problems(own)[0]["path"] == "role"
    assert client.patch("/api/v1/users/nobody", {}, content_type="application/json",
                        **token).status_code == 404
    entries = client.get("/api/v1/audit?token=admin-token", **token).json()
    assert [e["action"] for e in entries] == ["user edit", "user create"]
    assert all(e["username"] == "alice" for e in entries)
