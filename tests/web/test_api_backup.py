"""Backup through the API (issue 38, docs/API.md): the file GET /backup makes is the
page's; sent back, it is checked and kept as its sender's pending restore with the same
plan the page previews; the restore takes the page's choices through the page's own
form, refuses a stale plan (409) and every bad choice by its field (422) with nothing
changed, and is audited with the token's name. Nobody sees another's upload."""
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from test_api import bearer, make_token, problems
from test_backup import OTHER_POLICY, POLICY, snapshot, users
from tuskweb import make_user

from accounts.models import AuditEntry, Scope
from backup import document as backups
from backup.models import PendingRestore
from jobs.models import Job
from policy import draft as drafts
from policy.core.normalise import parse_yaml

pytestmark = pytest.mark.django_db


def send(client, token, document, name="saved.json"):
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return client.post(f"/api/v1/backup/restores?name={name}", data,
                       content_type="application/json", **bearer(token))


def restore(client, credential, url, **body):
    return client.post(f"{url}/restore", json.dumps(body), content_type="application/json",
                       **bearer(credential))


def test_a_backup_made_and_restored_through_the_api_is_the_pages(admin_user):
    client, token = Client(), make_token(admin_user, Scope.ADMIN)
    drafts.import_text(POLICY, admin_user)
    make_user("bob", "viewer")
    response = client.get("/api/v1/backup", **bearer(token))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="tusk-backup-')
    saved = json.loads(response.content)
    assert (saved["format"], saved["policy"]["draft"]) == ("tusk-backup", parse_yaml(POLICY))
    assert AuditEntry.objects.get(action="backup download").token == "admin-token"

    drafts.import_text(OTHER_POLICY, admin_user)
    make_user("dave", "admin")
    get_user_model().objects.filter(username="bob").delete()

    sent = send(client, token, saved)
    assert sent.status_code == 201, sent.content
    pending = sent.json()
    url = pending["url"]
    assert sent["Location"] == url and pending["name"] == "saved.json"
    plan = pending["plan"]
    assert plan["users"] == {"added": ["bob (viewer)"], "removed": ["dave"], "updated": [],
                             "unchanged": ["alice"]}
    assert not plan["policy"]["same"] and plan["network"] is None
    assert client.get(url, **bearer(token)).json()["plan"] == plan

    # a stale plan, a port the backup does not have, a revision it does not have:
    # refused with the field named, nothing changed
    before = snapshot()
    stale = restore(client, token, url, token="not the plan's")
    assert stale.status_code == 409 and problems(stale)[0]["path"] == "token"
    bad = restore(client, token, url, token=plan["token"], source="confirmed",
                  ports={"eth7": "eth1"})
    assert bad.status_code == 422
    assert {p["path"] for p in problems(bad)} == {"source", "ports.eth7"}, problems(bad)
    assert snapshot() == before

    done = restore(client, token, url, token=plan["token"], apply=True)
    assert done.status_code == 200, done.content
    answer = done.json()
    assert answer["users"]["added"] == ["bob (viewer)"]
    job = Job.objects.get(pk=answer["policy_job"]["id"])
    assert job.kind == "policy.apply" and parse_yaml(job.args["policy_text"]) == \
        parse_yaml(POLICY)
    assert answer["tuning_job"] is None and answer["network"] is None
    assert drafts.get().document == parse_yaml(POLICY)
    assert set(users()) == {"alice", "bob"}
    entry = AuditEntry.objects.get(action="backup restore")
    assert (entry.token, entry.target, entry.detail["policy_job"]) == \
        ("admin-token", "saved.json", job.pk)
    assert not PendingRestore.objects.exists()
    assert client.get(url, **bearer(token)).status_code == 404


@pytest.mark.parametrize("data, path", [
    (b"{not json", ""),
    (json.dumps({"format": "tusk-backup", "version": 2}).encode(), "created"),
])
def test_a_file_that_cannot_be_restored_is_refused_by_its_field(admin_user, data, path):
    client, token = Client(), make_token(admin_user, Scope.ADMIN)
    before = snapshot()
    response = send(client, token, data)
    assert response.status_code == 422
    found = problems(response)
    assert found and all(p["message"] for p in found)
    assert any(p["path"] == path for p in found), found
    assert snapshot() == before


def test_an_oversized_file_is_refused_unread(admin_user):
    client, token = Client(), make_token(admin_user, Scope.ADMIN)
    response = send(client, token, b" " * (backups.MAX_BYTES + 1))
    assert response.status_code == 413 and not PendingRestore.objects.exists()


def test_a_pending_restore_is_its_senders_alone(admin_user):
    client = Client()
    alice = make_token(admin_user, Scope.ADMIN)
    mallory = make_token(make_user("mallory", "admin"), Scope.ADMIN)
    saved = client.get("/api/v1/backup", **bearer(alice)).json()
    url = send(client, alice, saved).json()["url"]
    assert client.get(url, **bearer(mallory)).status_code == 404
    assert client.delete(url, **bearer(mallory)).status_code == 404
    assert restore(client, mallory, url, token="x").status_code == 404
    assert PendingRestore.objects.count() == 1
    assert client.delete(url, **bearer(alice)).status_code == 204
    assert not PendingRestore.objects.exists()
