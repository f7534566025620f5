"""Backup and restore of the configuration (policy, tuning profile, users): a backup
downloaded, everything changed, the backup restored - and the same state again, the
policy applied by the real agent into the test's namespace and the tuning profile
applied there by tusk-tune. Every refused file names the field and the reason and
changes nothing; a viewer gets nothing; nobody can lock themselves out."""
import dataclasses
import html
import json
import pickle
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError, connection
from django.test import Client
from tuskweb import AgentProcess, make_user, wait

from accounts.models import AuditEntry, Profile
from backup import collect as collected
from backup import document as backups
from backup.models import PendingRestore
from jobs import queue
from jobs.models import Job
from policy import draft as drafts
from policy.core.normalise import parse_yaml
from policy.models import TargetState
from tuning.core import profile as profiles

POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
classes:
  - {name: web, from: inside, to: outside, action: accept}
"""
OTHER_POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
classes:
  - {name: nothing-else, from: inside, to: outside, action: drop}
"""
MINE = "[main]\nsummary = the forwarder's, as the lab wants it\ninclude = forwarder\n"
# what the forwarder profile sets in the namespace (0: no second routing lookup)
RP_FILTER = ("net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter")
# a profile setting a host-wide sysctl outside the network's (harmless, but the same
# path as kernel.core_pattern: code run as root)
PRINTK = "/proc/sys/kernel/printk_ratelimit"
EVIL = "[main]\nsummary = evil\n[sysctl]\n# more messages\nkernel.printk_ratelimit = 12\n"


@pytest.fixture(autouse=True)
def isolated(settings, tmp_path, monkeypatch):
    """tusk-tune's state and the operator's profiles in the test's own directories, for
    the web process here and the agent (tests/web/conftest.py agent_config: the same
    tmp_path/tuning), which gets the profiles' directory through TUSK_TUNING_DIR."""
    operator = tmp_path / "operator-profiles"
    operator.mkdir()
    monkeypatch.setattr(profiles, "OPERATOR_DIR", str(operator))
    monkeypatch.setenv("TUSK_TUNING_DIR", str(operator))
    settings.TUSK = dataclasses.replace(settings.TUSK, tuning_state_dir=str(tmp_path / "tuning"))
    return operator


@pytest.fixture
def agent(isolated, transactional_db, agent_config):
    process = AgentProcess(agent_config).start()
    yield process
    process.stop()


def download(client):
    response = client.post("/backup/download/")
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="tusk-backup-')
    return json.loads(response.content)


def upload(client, document, name="backup.json"):
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return client.post("/backup/upload/", {"file": SimpleUploadedFile(name, data)})


def problems(response):
    return [str(problem) for problem in response.context["problems"]]


def restore(client, document, **fields):
    """Upload, preview, confirm: the response to the confirmation."""
    response = upload(client, document)
    assert response.status_code == 302, problems(response)
    url = response["Location"]
    preview = client.get(url)
    assert preview.status_code == 200
    return client.post(url, {"token": preview.context["changes"]["token"], "source": "draft",
                             "apply": "on", **fields})


def snapshot():
    """Everything a refused restore must leave as it was."""
    return (collected.contents(), drafts.get_meta().version, Job.objects.count(),
            AuditEntry.objects.exclude(action="backup download").count(),
            PendingRestore.objects.count())


def users():
    return {u["username"]: u for u in collected.users()}


# -- the round trip, through the agent ------------------------------------------------------

def netns_run(netns, *argv):
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True,
                          text=True, check=True).stdout


def sysctls(netns):
    return [netns_run(netns, "sysctl", "-n", name).strip() for name in RP_FILTER]


def job_of(response):
    assert response.status_code == 302, getattr(response, "context", None) and \
        response.context.get("form") and response.context["form"].errors
    location = response["Location"]
    assert location.startswith("/jobs/"), location
    job = wait(Job.objects.get(pk=int(location.split("/")[2])), 60)
    assert job.state == "succeeded", job.error
    return job, location


def apply_and_confirm(client):
    job, location = job_of(client.post("/policy/apply/", {"version": drafts.get().version}))
    assert location.endswith("?next=policy_status") and job.kind == "policy.apply"
    job_of(client.post("/policy/confirm/"))


def live_table(netns):
    return netns_run(netns, "nft", "list", "table", "inet", "tusk")


def test_backup_change_everything_restore_and_it_is_all_back(agent, netns, admin_client,
                                                            admin_user, isolated, tmp_path):
    for name in RP_FILTER:
        netns_run(netns, "sysctl", "-qw", f"{name}=1")
    drafts.import_text(POLICY, admin_user)
    apply_and_confirm(admin_client)
    (isolated / "mine.conf").write_text(MINE)
    job, _ = job_of(admin_client.post("/tuning/apply/", {"profile": "mine"}))
    assert sysctls(netns) == ["0", "0"]
    make_user("bob", "viewer")
    make_user("carol", "admin", must_change=True)
    get_user_model().objects.filter(username="carol").update(is_active=False)

    saved = download(admin_client)
    assert (saved["format"], saved["version"]) == ("tusk-backup", 2)
    assert saved["hostname"] and saved["created"]
    assert saved["policy"]["draft"] == parse_yaml(POLICY)
    confirmed = saved["policy"]["confirmed"]
    assert confirmed["revision"] == TargetState.objects.get(pk=1).confirmed
    assert parse_yaml(confirmed["policy_text"]) == parse_yaml(POLICY)
    assert saved["tuning"] == {"boot_profile": "mine", "profiles": {"mine": MINE}}
    assert [(u["username"], u["role"], u["active"], u["must_change_password"])
            for u in saved["users"]] == [("alice", "admin", True, False),
                                         ("bob", "viewer", True, False),
                                         ("carol", "admin", False, True)]
    assert all(u["password_hash"].startswith("md5$") for u in saved["users"])
    assert b"correct horse battery" not in json.dumps(saved).encode()
    assert AuditEntry.objects.filter(action="backup download", username="alice").exists()
    before = collected.contents()

    # everything changes: policy (applied), tuning (rolled back, profile gone), users
    drafts.import_text(OTHER_POLICY, admin_user)
    apply_and_confirm(admin_client)
    assert "nothing-else" in live_table(netns)
    job_of(admin_client.post("/tuning/rollback/"))
    assert sysctls(netns) == ["1", "1"]
    (isolated / "mine.conf").unlink()
    get_user_model().objects.filter(username="bob").delete()
    make_user("dave", "admin")
    Profile.objects.filter(user__username="carol").update(role="viewer")

    response = upload(admin_client, saved)
    preview = admin_client.get(response["Location"])
    changes = preview.context["changes"]
    assert changes["users"] == {"added": ["bob (viewer)"], "removed": ["dave"],
                                "updated": ["carol: role viewer → admin"],
                                "unchanged": ["alice"]}
    assert changes["tuning"]["boot_now"] == "none" and changes["tuning"]["boot"] == "mine"
    assert changes["tuning"]["write"] == ["mine"] and changes["tuning"]["apply"]
    assert not changes["policy"]["same"] and changes["policy"]["confirmed_is_draft"]
    shown = preview.content.decode()
    assert "1 added, 1 updated, 1 removed, 1 unchanged." in shown
    assert "Profile at boot: none → mine." in shown

    token = changes["token"]
    response = admin_client.post(response["Location"], {"token": token, "source": "draft",
                                                         "apply": "on"})
    job, location = job_of(response)  # the normal apply: pending until confirmed
    assert job.kind == "policy.apply" and location.endswith("?next=policy_status")
    assert TargetState.objects.get(pk=1).pending == job.result["revision"]
    assert 'comment "tusk: classes[0] web"' in live_table(netns)
    job_of(admin_client.post("/policy/confirm/"))
    tuning = wait(Job.objects.get(kind="backup.tuning"), 60)
    assert tuning.state == "succeeded", tuning.error
    assert tuning.result["written"] == ["mine"] and tuning.result["profile"] == "mine"
    assert (isolated / "mine.conf").read_text() == MINE
    assert sysctls(netns) == ["0", "0"]
    assert (tmp_path / "tuning" / "boot-profile").read_text().strip() == "mine"

    after = collected.contents()
    assert after["users"] == before["users"] and after["tuning"] == before["tuning"]
    assert after["policy"]["draft"] == before["policy"]["draft"]
    assert after["policy"]["confirmed"]["revision"] > confirmed["revision"]
    assert parse_yaml(after["policy"]["confirmed"]["policy_text"]) == parse_yaml(POLICY)
    entry = AuditEntry.objects.get(action="backup restore")
    assert entry.detail["users"] == {"added": 1, "updated": 1, "removed": 1, "unchanged": 1}
    assert entry.detail["policy_job"] == job.pk and entry.detail["tuning_job"] == tuning.pk
    assert not PendingRestore.objects.exists()
    assert admin_client.get("/backup/").status_code == 200  # still signed in


def test_a_restored_policy_the_firewall_refuses_is_not_loaded(agent, netns, admin_client,
                                                             admin_user):
    """normalise accepts an interface name it cannot check; the apply job, run by the
    agent, refuses it and the live policy stays."""
    drafts.import_text(POLICY, admin_user)
    apply_and_confirm(admin_client)
    saved = download(admin_client)
    saved["policy"]["draft"]["zones"][1]["interfaces"] = ["eth9"]
    response = restore(admin_client, saved)
    assert response.status_code == 302
    job = wait(Job.objects.get(pk=int(response["Location"].split("/")[2])), 60)
    assert job.state == "failed" and "eth9 does not exist" in job.error
    state = TargetState.objects.get(pk=1)
    assert state.pending is None and state.confirmed == saved["policy"]["confirmed"]["revision"]
    assert 'comment "tusk: classes[0] web"' in live_table(netns)
    assert drafts.get().document["zones"][1]["interfaces"] == ["eth9"]  # the draft to fix


# -- restores without the agent -----------------------------------------------------------

def test_users_are_restored_in_one_step_and_their_passwords_keep_working(client, admin_user):
    make_user("bob", "viewer", password="bob's old passphrase")
    client.force_login(admin_user)
    saved = download(client)
    bob = get_user_model().objects.get(username="bob")
    bob.set_password("bob's new passphrase")
    bob.save()
    admin_user.set_password("alice's new passphrase")
    admin_user.save()
    client.force_login(admin_user)
    make_user("eve", "admin")

    response = restore(client, saved, apply="")
    assert response.status_code == 302 and response["Location"] == "/backup/"
    assert set(users()) == {"alice", "bob"}
    assert client.get("/backup/").status_code == 200  # alice's session survived her old hash
    client.logout()
    assert client.login(username="bob", password="bob's old passphrase")
    assert client.login(username="alice", password="correct horse battery")
    assert not client.login(username="alice", password="alice's new passphrase")
    assert not Job.objects.exists()  # same policy, same tuning: nothing to apply


def test_the_draft_may_come_from_the_confirmed_revision(admin_client, admin_user):
    drafts.import_text(OTHER_POLICY, admin_user)
    saved = download(admin_client)
    saved["policy"]["confirmed"] = {"revision": 4, "created": "2026-01-02T03:04:05+00:00",
                                    "user": "alice", "policy_text": POLICY}
    response = upload(admin_client, saved)
    preview = admin_client.get(response["Location"])
    assert "Its draft had changes that were never applied" in preview.content.decode()
    response = admin_client.post(response["Location"], {
        "token": preview.context["changes"]["token"], "source": "confirmed", "apply": "on"})
    job = Job.objects.get(kind="policy.apply")  # queued; the agent is not running here
    assert response["Location"] == f"/jobs/{job.pk}/?next=policy_status"
    assert drafts.get().document == parse_yaml(POLICY)
    assert parse_yaml(job.args["policy_text"]) == parse_yaml(POLICY)
    assert AuditEntry.objects.get(action="backup restore").detail["source"] == "confirmed"


def test_a_preview_made_stale_restores_nothing(admin_client, admin_user):
    saved = download(admin_client)
    make_user("bob", "viewer")
    response = upload(admin_client, saved)
    url = response["Location"]
    token = admin_client.get(url).context["changes"]["token"]
    drafts.import_text(POLICY, admin_user)  # someone edits the draft meanwhile
    before = snapshot()
    response = admin_client.post(url, {"token": token, "source": "draft", "apply": "on"})
    assert response.status_code == 400
    assert "changed after the preview you confirmed was made: nothing was restored" in \
        response.content.decode()
    assert snapshot() == before and "bob" in users()
    response = admin_client.post(url, {"token": response.context["form"]["token"].value(),
                                       "source": "draft"})
    assert response.status_code == 302 and "bob" not in users()


def test_a_tuning_profile_to_restore_is_queued_for_the_agent(admin_client, isolated):
    saved = download(admin_client)
    assert saved["tuning"] == {"boot_profile": profiles.DEFAULT_PROFILE, "profiles": {}}
    saved["tuning"] = {"boot_profile": "mine", "profiles": {"mine": MINE}}
    restore(admin_client, saved)
    job = Job.objects.get(kind="backup.tuning")
    assert job.args == {"profiles": {"mine": MINE}, "profile": "mine", "apply": True}
    assert not (isolated / "mine.conf").exists()  # the agent writes it, not the web process


def test_a_forged_restore_job_with_an_outside_sysctl_writes_and_runs_nothing(agent, isolated):
    """The agent checks a backup.tuning job's profiles again, with the upload's own check:
    a row written straight into the database gets no further than a forged upload."""
    before = Path(PRINTK).read_text()
    try:
        job = wait(queue.enqueue("backup.tuning", {"profiles": {"evil": EVIL},
                                                   "profile": "evil", "apply": True}), 60)
        assert Path(PRINTK).read_text() == before
        assert list(isolated.iterdir()) == []
        assert job.state == "failed"
        assert job.error == ("tuning.profiles.evil: evil.conf [sysctl] kernel.printk_ratelimit: "
                             "not a sysctl a profile may set (allowed: net.core., net.ipv4., "
                             "net.ipv6., net.netfilter.)"), job.error
        job = wait(queue.enqueue("backup.tuning", {"profiles": {}, "profile": "/etc/passwd",
                                                   "apply": True}), 60)
        assert job.state == "failed" and "is not a profile name" in job.error, job.error
    finally:
        Path(PRINTK).write_text(before)


def test_a_restore_that_fails_half_way_leaves_nothing_changed(admin_client, admin_user):
    """The database itself refuses the job row queued after the draft and the users were
    replaced (a trigger of the test's): the one transaction takes all of it back."""
    saved = download(admin_client)
    saved["tuning"]["boot_profile"] = "latency"  # a tuning job to queue
    drafts.import_text(POLICY, admin_user)
    make_user("bob", "viewer")
    response = upload(admin_client, saved)
    url = response["Location"]
    token = admin_client.get(url).context["changes"]["token"]
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS "
                       "$$ BEGIN RAISE EXCEPTION 'no space left on device (test)'; END $$")
        cursor.execute("CREATE TRIGGER refuse BEFORE INSERT ON jobs_job FOR EACH ROW "
                       "EXECUTE FUNCTION pg_temp.refuse()")
    before = snapshot()
    with pytest.raises(DatabaseError, match="no space left on device"):
        admin_client.post(url, {"token": token, "source": "draft", "apply": "on"})
    assert snapshot() == before
    assert "bob" in users() and drafts.get().document == parse_yaml(POLICY)
    assert not AuditEntry.objects.filter(action="backup restore").exists()

# -- refused files --------------------------------------------------------------------------

def _set(path, value):
    def change(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


BAD_FIELDS = [
    (_set(["users", 1, "role"], "root"),
     'users[1].role: unknown role "root" (known: admin, viewer)'),
    (_set(["users", 0, "password_hash"], "correct horse battery"),
     "users[0].password_hash: not a password hash (a backup holds hashes, never passwords)"),
    (_set(["users", 0, "password_hash"], "sha1337$salt$abc"),
     'users[0].password_hash: hashed with "sha1337", which this Tusk does not know'),
    (_set(["users", 0, "password_hash"], "md5$"), "users[0].password_hash: not a well-formed"),
    (_set(["users", 1, "username"], "../bob"), "users[1].username: '../bob' is not a user name"),
    (_set(["users", 1, "username"], "ALICE"), "users[1].username: 'ALICE' is already users[0]"),
    (_set(["users", 1, "active"], "yes"), "users[1].active: expected true or false, got a string"),
    (_set(["users", 1, "must_change_password"], KeyError),
     "users[1].must_change_password: missing"),
    (_set(["users", 1, "is_superuser"], True), "users[1].is_superuser: unknown key (known: "
     "username, role, password_hash, active, must_change_password)"),
    (_set(["users", 1], "bob"), "users[1]: expected an object, got a string"),
    (_set(["users"], []), "users: 0 users: a backup has 1 to 1000"),
    (_set(["policy", "draft", "classes"], [{"name": "x", "action": "maybe"}]),
     "policy.draft.classes[0].action: "),
    (_set(["policy", "draft", "zones"], "inside"), "policy.draft.zones: "),
    (_set(["policy", "draft"], [1]), "policy.draft: expected an object, got a list"),
    (_set(["policy", "confirmed"], {"revision": "7", "created": "x", "user": "",
                                    "policy_text": "zones: [\n"}),
     "policy.confirmed.revision: expected a revision number, got a string"),
    (_set(["policy", "confirmed"], {"revision": 7, "created": "x", "user": "",
                                    "policy_text": "zones: [\n"}),
     "policy.confirmed.policy_text: not valid YAML at line 2"),
    (_set(["tuning", "boot_profile"], "nosuch"), "tuning.boot_profile: no profile 'nosuch' in "
     "the backup or on this box (known: none, conservative, forwarder, latency, throughput)"),
    (_set(["tuning", "profiles"], {"mine": "[rings]\nrx = lots\n"}),
     "tuning.profiles.mine: mine.conf [rings] rx: 'lots' is neither 'keep' or 'max' nor a "
     "whole number"),
    (_set(["tuning", "profiles"], {"../../etc/evil": "[main]\n"}),
     "tuning.profiles.'../../etc/evil': not a profile name"),
    (_set(["tuning", "profiles"], {"mine": EVIL}),
     "tuning.profiles.mine: mine.conf [sysctl] kernel.printk_ratelimit: not a sysctl a profile "
     "may set (allowed: net.core., net.ipv4., net.ipv6., net.netfilter.)"),
    (_set(["tuning", "profiles"], {"mine": "[main]\ninclude = /etc/shadow\n"}),
     "tuning.profiles.mine: mine.conf [main] include: '/etc/shadow' is not a profile name"),
    (_set(["tuning", "profiles"], {"mine": 5}),
     "tuning.profiles.mine: expected the profile's text, got a number"),
    (_set(["created"], "yesterday"), "created: 'yesterday' is not a date and time (ISO 8601)"),
    (_set(["hostname"], 5), "hostname: expected a string, got a number"),
    (_set(["captures"], []), "captures: unknown key (known: format, version, created, "
     "tusk_version, hostname, policy, tuning, users, network)"),
    (_set(["tuning"], KeyError), "tuning: missing"),
]


@pytest.mark.parametrize("change,expected", BAD_FIELDS, ids=[e.split(":")[0] + f"-{i}"
                                                             for i, (_, e) in
                                                             enumerate(BAD_FIELDS)])
def test_every_bad_field_is_named_and_nothing_changes(admin_client, change, expected):
    make_user("bob", "viewer")
    saved = download(admin_client)
    change(saved)
    refused_naming(admin_client, saved, expected)


def refused_naming(client, document, expected, state=snapshot):
    """The upload is refused with a problem that starts with expected, its field is on
    the page, and state() is as before."""
    before = state()
    response = upload(client, document)
    assert response.status_code == 400
    found = problems(response)
    assert any(p.startswith(expected) for p in found), found
    assert expected.split(":")[0] in html.unescape(response.content.decode())
    assert state() == before


def test_all_problems_are_reported_at_once(admin_client):
    saved = download(admin_client)
    saved["users"][0]["role"] = "root"
    saved["hostname"] = None
    saved["tuning"]["boot_profile"] = "nosuch"
    found = problems(upload(admin_client, saved))
    assert [p.split(":")[0] for p in found] == ["hostname", "tuning.boot_profile",
                                                "users[0].role"]


@pytest.mark.parametrize("data,expected", [
    (b"\x80\x81{}", "not UTF-8 text at line 1, column 1 (byte 0)"),
    (b'{"format":\n "tusk\xe9"}', "not UTF-8 text at line 2, column 7 (byte 17)"),
    (b"{not json", "not valid JSON at line 1, column 2"),
    (pickle.dumps({"format": "tusk-backup"}), "not UTF-8 text"),
    (Path(__file__).read_bytes()[:200], "not valid JSON at line 1"),
    (b'{"format": "tusk-backup", "format": "x"}', "not valid JSON at line 1, column 1: the key "
                                                   "'format' appears twice in the object that "
                                                   "starts here"),
    (b'{"format": "tusk-backup",\n "users": [{"a": 1,\n  "a": 2}]}',
     "not valid JSON at line 2, column 12: the key 'a' appears twice in the object that "
     "starts here"),
    (b'{"format": "tusk-backup", "version": NaN}', "not valid JSON at line 1, column 38: NaN "
                                                   "is not a JSON number"),
    (b'{"format": "tusk-backup",\n "version": 1' + b"0" * 5000 + b"}",
     "not valid JSON at line 2, column 13: a number of 5001 digits is too long (at most "
     "1000)"),
    (b'{"format": "tusk-backup",\n "version": [1e999999]}',
     "not valid JSON at line 2, column 14: '1e999999' is too large a number"),
    (b'-1e999', "not valid JSON at line 1, column 1: '-1e999' is too large a number"),
    (b'{"format": "tusk-backup", "hostname": "fw\\ud800"}',
     "hostname: holds half of a UTF-16 surrogate pair (\\ud800), which is no character"),
    (b"[" * 200_000 + b"]" * 200_000, "not valid JSON: nested too deeply"),
    (b"[]", "not a Tusk backup: expected a JSON object, got a list"),
    (b'{"format": "tusk-backup", "users": [{"username": "a\\u0000b"}]}',
     "users[0].username: holds a NUL character"),
    (POLICY.encode(), "not valid JSON at line 1"),
    (b'{"format": "tusk-policy", "version": 1}', "format: not a Tusk backup: expected "
                                                 "'tusk-backup', got 'tusk-policy'"),
    (b'{"format": "tusk-backup", "version": 3}', "version: version 3 is not readable here: "
                                                 "this Tusk reads backup versions 1 to 2"),
    (b'{"format": "tusk-backup", "version": "1"}', "version: expected a whole number, got '1'"),
])
def test_a_corrupted_or_foreign_file_is_refused_and_nothing_changes(admin_client, data,
                                                                   expected):
    before = snapshot()
    response = upload(admin_client, data)
    assert response.status_code == 400
    assert any(p.startswith(expected) for p in problems(response)), problems(response)
    assert snapshot() == before


def test_a_truncated_backup_is_refused(admin_client):
    data = json.dumps(download(admin_client)).encode()
    before = snapshot()
    response = upload(admin_client, data[:len(data) // 2])
    assert response.status_code == 400
    assert problems(response)[0].startswith("not valid JSON at line 1")
    assert snapshot() == before


def test_an_oversized_file_is_refused_unread(admin_client):
    before = snapshot()
    response = upload(admin_client, b" " * (backups.MAX_BYTES + 1))
    assert response.status_code == 400
    assert response.context["form"].errors["file"] == [
        f"{backups.MAX_BYTES + 1} bytes: a backup is at most 16 MiB"]
    assert snapshot() == before


@pytest.mark.parametrize("change", [
    lambda alice: alice.update(role="viewer"),
    lambda alice: alice.update(active=False),
    lambda alice: alice.update(username="alicia"),
])
def test_a_backup_that_would_lock_the_restorer_out_is_refused(admin_client, change):
    make_user("root2", "admin")
    saved = download(admin_client)
    change(saved["users"][0])
    before = snapshot()
    response = upload(admin_client, saved)
    assert response.status_code == 400
    assert problems(response) == [
        'users: your account "alice" is not an active admin in this backup: restoring it '
        f"would lock you out. Restore it as one of its admins "
        f"({'alicia, root2' if saved['users'][0]['username'] == 'alicia' else 'root2'}), "
        "or add yourself to the backup's users as an active admin"]
    assert snapshot() == before


def test_a_backup_without_any_active_admin_is_refused(admin_client):
    saved = download(admin_client)
    for user in saved["users"]:
        user["role"] = "viewer"
    assert problems(upload(admin_client, saved)) == [
        "users: no active admin: after the restore nobody could change anything"]


def test_a_pending_upload_is_checked_again_before_the_restore(admin_client, isolated):
    """An operator's profile the backup includes goes away between upload and confirm."""
    (isolated / "base.conf").write_text("[main]\nsummary = base\n")
    saved = download(admin_client)
    saved["tuning"]["profiles"]["mine"] = "[main]\ninclude = base\n"
    saved["tuning"]["profiles"].pop("base")
    url = upload(admin_client, saved)["Location"]
    (isolated / "base.conf").unlink()
    before = snapshot()
    response = admin_client.get(url)
    assert response.status_code == 400
    assert any(p.startswith("tuning.profiles.mine: ") and "no profile 'base'" in p
               for p in problems(response)), problems(response)
    assert 'id="confirm"' not in response.content.decode()
    assert snapshot() == before


# -- who may ------------------------------------------------------------------------------

def test_a_viewer_sees_what_a_backup_holds_and_nothing_to_download(viewer_client):
    response = viewer_client.get("/backup/")
    shown = response.content.decode()
    assert response.status_code == 200 and 'id="admins-only"' in shown
    assert 'id="download"' not in shown and 'id="upload"' not in shown
    assert "Not in a backup: packet captures" in shown
    for url in ("/backup/download/", "/backup/upload/"):
        assert viewer_client.post(url).status_code == 403
    assert not AuditEntry.objects.exists()


def test_an_upload_is_its_uploaders_alone(admin_client):
    url = upload(admin_client, download(admin_client))["Location"]
    pending = PendingRestore.objects.get()
    client = Client()
    client.force_login(make_user("dora", "admin"))
    assert client.get(url).status_code == 404
    assert client.post(f"/backup/restore/{pending.pk}/cancel/").status_code == 404
    assert admin_client.post(f"/backup/restore/{pending.pk}/cancel/").status_code == 302
    assert not PendingRestore.objects.exists()


def test_the_nav_leads_to_the_backup_page(admin_client):
    shown = admin_client.get("/").content.decode()
    assert '<a href="/backup/">Backup</a>' in shown
    page = admin_client.get("/backup/").content.decode()
    assert 'id="download"' in page and 'enctype="multipart/form-data"' in page

