"""The REST API through the web edge as the image runs it (test_edge.py's nginx and
gunicorn): a token reaches Django through nginx and the audit log records the client's
address; nginx paces calls per address and refuses an oversized body before any token
is looked at."""
import json
from http.client import HTTPConnection

import pytest
from tuskweb import make_user
from web.test_edge import Client, edge  # noqa: F401  (edge: the module's nginx + gunicorn)

from accounts import tokens
from accounts.models import AuditEntry

ZONES = {"version": 1, "zones": [{"name": "inside", "interfaces": ["eth1"]}],
         "address_sets": [], "services": [], "classes": []}


@pytest.mark.django_db(transaction=True)
def test_a_token_through_nginx_writes_the_policy_audited_with_its_address(edge):  # noqa: F811
    _, token = tokens.create("ci", "admin", make_user("alice", "admin"), 1)
    auth = {"Authorization": f"Bearer {token}"}
    client = Client(edge, "127.0.0.4")
    status, headers, _ = client.request("GET", "/api/v1/policy", headers=auth)
    assert status == 200
    status, headers, body = client.request(
        "PUT", "/api/v1/policy", json.dumps(ZONES).encode(),
        headers={**auth, "If-Match": headers["ETag"], "Content-Type": "application/json"})
    assert status == 200, body
    entry = AuditEntry.objects.get(action="policy draft replaced")
    assert (entry.token, entry.address) == ("ci", "127.0.0.4")
    status, _, body = client.request("GET", "/api/v1/policy")
    assert status == 401 and json.loads(body)["problems"][0]["code"] == "UNAUTHORIZED"


@pytest.mark.django_db(transaction=True)
def test_nginx_paces_calls_and_refuses_a_large_body_before_any_token(edge):  # noqa: F811
    conn = HTTPConnection("127.0.0.1", edge.http, timeout=10, source_address=("127.0.0.5", 0))
    statuses = []
    try:
        for _ in range(300):
            conn.request("GET", "/api/v1/jobs")
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
    finally:
        conn.close()
    assert statuses[0] != 429 and statuses.count(429) >= 100, statuses
    # another address is not held back by the first's pace
    assert Client(edge, "127.0.0.6").get("/api/v1/jobs")[0] == 401
    status, _, _ = Client(edge, "127.0.0.7").request(
        "PUT", "/api/v1/policy", b"x" * (18 * 1024 * 1024),
        headers={"Content-Type": "application/json"})
    assert status == 413


@pytest.mark.django_db(transaction=True)
def test_an_update_bundle_through_nginx_needs_an_admin_token_before_its_body(edge):  # noqa: F811
    """The API's bundle location is larger than the API's 17 MB, and asks the upload gate
    first: an operate token is refused by nginx, an admin token's body reaches Django."""
    alice = make_user("alice", "admin")
    _, admin = tokens.create("ci", "admin", alice, 1)
    _, operate = tokens.create("ops", "operate", alice, 1)
    body = b"x" * (18 * 1024 * 1024)
    client = Client(edge, "127.0.0.8")

    def send(token):
        return client.request("POST", "/api/v1/system/upgrade?name=big.raucb", body, headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/octet-stream"})[0]
    assert send(operate) == 403
    assert send("A" * 43) == 401
    # past nginx: queued (202), or refused by Django for a reason of its own (409: the
    # edge's web process has no upgrade directory) - never nginx's 413
    assert send(admin) in (202, 409)
