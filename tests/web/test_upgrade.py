"""Upgrades from the System page (issue 22, docs/UPGRADES.md): an admin uploads a RAUC
bundle, the web process streams it into upgrade_dir, the real agent copies it into its
own spool, has the real RAUC check its signature against the box's keyring and its
compatible, and installs it. This host booted from no system slot, so here the agent
stops right after RAUC's check ("did not boot from a system slot": the check passed);
the install itself, the reboot and the fallback are test_appliance.py's (a real box in
QEMU). Refusals name the reason; viewers cannot upload; and what the web user could
plant in upgrade_dir or forge in job rows makes the agent read, copy, install or reboot
nothing."""
import dataclasses
import json
import os
import pwd
import stat
import subprocess

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from tuskweb import refusal_bundles, wait

from accounts import tokens
from accounts.models import AuditEntry
from jobs import queue
from jobs.models import Job
from lab.paths import DEV_RAUC_CERT as DEV_CERT

CONTENT = b"root only\n"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return refusal_bundles(tmp_path_factory.mktemp("bundles"))


@pytest.fixture
def agent_config(agent_config, tmp_path, settings):
    """The web tier's agent configuration with the upgrade directories laid out as on
    the appliance (upgrade_dir 2770 in the web user's group) and a RAUC system.conf
    whose keyring is the development key. The web process (settings.TUSK) shares them."""
    upgrade, spool, state = tmp_path / "upgrade", tmp_path / "upgrade-spool", tmp_path / "system"
    upgrade.mkdir()
    os.chown(upgrade, 0, pwd.getpwnam("tusk").pw_gid)
    os.chmod(upgrade, 0o2770)
    state.mkdir()
    rauc_conf = tmp_path / "system.conf"
    rauc_conf.write_text(f"[system]\ncompatible=tusk-x86_64\nbootloader=grub\n"
                         f"grubenv={tmp_path / 'grubenv'}\n\n[keyring]\npath={DEV_CERT}\n\n"
                         "[slot.rootfs.0]\ndevice=/dev/disk/by-partlabel/tusk-test-none-a\n"
                         "type=ext4\nbootname=A\n")
    with open(agent_config, "a", encoding="utf-8") as handle:
        handle.write(f'upgrade_dir = "{upgrade}"\nupgrade_spool_dir = "{spool}"\n'
                     f'rauc_conf = "{rauc_conf}"\nsystem_state_dir = "{state}"\n')
    # what the page shows once tusk-boot health wrote it on a box booted from slot A
    (state / "slots.json").write_text(json.dumps({
        "booted": "A", "next": "A", "lines": ["slot A: release 1.0 - running, good"],
        "slots": {"A": {"release": "1.0", "running": True, "ok": True, "trial": False},
                  "B": {"release": None, "running": False, "ok": False, "trial": False}}}))
    settings.TUSK = dataclasses.replace(settings.TUSK, upgrade_dir=str(upgrade),
                                        upgrade_spool_dir=str(spool), rauc_conf=str(rauc_conf),
                                        system_state_dir=str(state))
    return agent_config


@pytest.fixture
def dirs(agent_config):
    base = agent_config.parent
    return {"upgrade": base / "upgrade", "spool": base / "upgrade-spool"}


def upload(client, path, name=None):
    data = path.read_bytes()
    return client.post("/system/upgrade/", {"bundle": SimpleUploadedFile(
        name or path.name, data, content_type="application/octet-stream")})


def job_of(response):
    assert response.status_code == 302, response.content.decode()[-2000:]
    return Job.objects.get(pk=int(response["Location"].split("/")[-2]))


def empty(directory):
    return not directory.exists() or not os.listdir(directory)


def test_the_page_shows_the_slots_and_offers_admins_the_upload(admin_client, agent_config):
    page = admin_client.get("/system/").content.decode()
    assert "Running release <strong>1.0</strong> in system slot <strong>A</strong>" in page
    assert "slot A: release 1.0 - running, good" in page
    assert 'id="upgrade-form"' in page and 'enctype="multipart/form-data"' in page


def test_viewers_see_the_slots_but_cannot_upload(viewer_client, agent_config, bundles, dirs):
    page = viewer_client.get("/system/").content.decode()
    assert "slot A: release 1.0" in page and 'id="upgrade-form"' not in page
    response = upload(viewer_client, bundles / "good.raucb")
    assert response.status_code == 403
    assert empty(dirs["upgrade"]) and not Job.objects.exists()


def test_a_good_bundle_passes_raucs_check_and_is_installed_only_on_a_box_with_slots(
        agent, admin_client, bundles, dirs):
    job = wait(job_of(upload(admin_client, bundles / "good.raucb")), 60)
    # RAUC checked signature and compatible; this host has no slot to install into
    assert job.state == Job.State.FAILED, job.error
    assert job.error == ("this system did not boot from a system slot (the live system, a "
                         "lab or a development host); the running system is unchanged")
    assert job.progress >= 5
    assert job.args == {"name": "good.raucb"}
    assert empty(dirs["upgrade"]) and empty(dirs["spool"])


@pytest.mark.parametrize("name, reason", [
    ("foreign.raucb", "RAUC refused the bundle: "),
    ("other.raucb", "the bundle is for compatible 'not-tusk', this box is 'tusk-x86_64'"),
    ("truncated.raucb", "RAUC refused the bundle: ")])
def test_a_bundle_the_box_must_not_take_is_refused_with_the_reason(agent, admin_client,
                                                                   bundles, dirs, name, reason):
    job = wait(job_of(upload(admin_client, bundles / name)), 60)
    assert job.state == Job.State.FAILED
    assert job.error.startswith(reason) and \
        job.error.endswith("; the running system is unchanged"), job.error
    if name == "foreign.raucb":
        assert "signature" in job.error.lower() or "certificate" in job.error.lower(), job.error
    page = admin_client.get("/system/").content.decode()
    assert "Last upload" in page and "the running system is unchanged" in page
    assert empty(dirs["upgrade"]) and empty(dirs["spool"])


def test_an_upload_past_the_limit_or_not_a_bundle_is_refused_and_not_kept(
        admin_client, agent_config, settings, dirs, tmp_path):
    settings.TUSK = dataclasses.replace(settings.TUSK, bundle_max_mb=1)
    big = tmp_path / "big.raucb"
    big.write_bytes(os.urandom(1_500_000))
    response = upload(admin_client, big)
    assert response.status_code == 400
    assert "more than the 1 MB a bundle may have" in response.content.decode()
    small = tmp_path / "notes.txt"
    small.write_bytes(b"hello")
    response = upload(admin_client, small)
    assert response.status_code == 400
    assert "not an update bundle: its name must end in .raucb" in response.content.decode()
    assert empty(dirs["upgrade"]) and not Job.objects.exists()


def test_a_box_without_an_upgrade_directory_says_so_instead_of_failing(
        admin_client, agent_config, settings, bundles, tmp_path):
    settings.TUSK = dataclasses.replace(settings.TUSK, upgrade_dir=str(tmp_path / "none"))
    response = upload(admin_client, bundles / "good.raucb")
    assert response.status_code == 409
    assert "this system cannot take a bundle" in response.content.decode()
    assert not Job.objects.exists()


# -- the API (docs/API.md): the bundle as the body --------------------------------------

def send(token, data, name="good.raucb"):
    return Client().post(f"/api/v1/system/upgrade?name={name}", data,
                         content_type="application/octet-stream",
                         HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_bundle_sent_to_the_api_goes_the_pages_way(agent, admin_user, bundles, dirs):
    """Streamed into upgrade_dir, the agent's job checks it with RAUC (here: passed, and
    no slot to install into) - and GET /system shows what the page shows."""
    _, token = tokens.create("ci", "admin", admin_user, 1)
    response = send(token, (bundles / "good.raucb").read_bytes())
    assert response.status_code == 202, response.content
    assert response["Location"] == response.json()["url"]
    job = wait(Job.objects.get(pk=response.json()["id"]), 60)
    assert job.state == Job.State.FAILED and job.error.startswith(
        "this system did not boot from a system slot"), job.error
    assert job.args == {"name": "good.raucb"}
    assert empty(dirs["upgrade"]) and empty(dirs["spool"])
    entry = AuditEntry.objects.get(action="system upgrade upload")
    assert (entry.token, entry.detail["name"]) == ("ci", "good.raucb")
    system = Client().get("/api/v1/system", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert system["slots"]["booted"] == "A" and system["upgrading"] is None
    assert system["last_upgrade"]["id"] == job.pk and system["last_upgrade"]["state"] == \
        "failed"


def test_the_api_keeps_no_bundle_it_refuses(agent_config, admin_user, settings, dirs,
                                            tmp_path):
    _, admin = tokens.create("ci", "admin", admin_user, 1)
    _, operate = tokens.create("ops", "operate", admin_user, 1)
    assert send(operate, b"x" * 1000).status_code == 403
    settings.TUSK = dataclasses.replace(settings.TUSK, bundle_max_mb=1)
    too_big = send(admin, os.urandom(1_500_000))
    assert too_big.status_code == 413
    assert "more than the 1 MB a bundle may have" in too_big.json()["problems"][0]["message"]
    empty_body = send(admin, b"")
    assert empty_body.status_code == 422 and \
        empty_body.json()["problems"][0]["path"] == "body"
    assert empty(dirs["upgrade"]) and not Job.objects.exists()
    queue.enqueue("system.reboot", {}, admin_user)     # a reboot under way
    busy = send(admin, b"x" * 1000)
    assert busy.status_code == 409 and "already under way" in busy.content.decode()
    assert empty(dirs["upgrade"]) and Job.objects.count() == 1


def test_the_gate_lets_only_an_admin_token_send_a_bundle_to_the_api(admin_user):
    """nginx asks it before it reads the API's bundle body (up to 2 GB)."""
    _, admin = tokens.create("ci", "admin", admin_user, 1)
    _, operate = tokens.create("ops", "operate", admin_user, 1)
    _, elsewhere = tokens.create("far", "admin", admin_user, 1, ["192.0.2.0/24"])

    def gate(token, uri="/api/v1/system/upgrade"):
        return Client().get("/accounts/upload-gate/", HTTP_X_ORIGINAL_URI=uri,
                            HTTP_AUTHORIZATION=f"Bearer {token}").status_code
    assert gate(admin) == 204
    assert gate(operate) == 403 and gate(elsewhere) == 403
    assert gate("A" * 43) == 401
    # the pages' uploads take a session only
    assert gate(admin, "/system/upgrade/") == 403 and gate(admin, "/diag/upload/") == 403


# -- the attacker: files planted in upgrade_dir as user tusk, job rows forged ---------

def as_web_user(path):
    tusk = pwd.getpwnam("tusk")
    os.lchown(path, tusk.pw_uid, tusk.pw_gid)
    return path


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "root-only"
    path.write_bytes(CONTENT)
    os.chmod(path, 0o600)
    return path


def forged(args):
    """An upgrade job written straight into the database, as the web role could."""
    return queue.enqueue("system.upgrade", args, None)


@pytest.mark.parametrize("plant", ["symlink", "hardlink", "fifo"])
def test_a_planted_entry_at_the_jobs_file_name_is_not_read(agent, dirs, secret, plant):
    job = forged({"name": "good.raucb"})
    at = dirs["upgrade"] / f"bundle-{job.pk}.raucb"
    if plant == "symlink":
        os.symlink(secret, at)
    elif plant == "hardlink":
        os.link(secret, at)
    else:
        os.mkfifo(at)
    as_web_user(at)
    job = wait(job, 60)
    assert job.state == Job.State.FAILED
    assert job.error.startswith("the upload is not there as the web process left it"), job.error
    assert job.error.endswith("nothing was written")
    assert secret.read_bytes() == CONTENT and stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert empty(dirs["spool"])


@pytest.mark.parametrize("name", ["../../etc/shadow", "a/b.raucb", "", ["x"], None,
                                  "x" * 101])
def test_a_forged_name_argument_is_refused_before_any_file_is_touched(agent, dirs, bundles,
                                                                      name):
    job = forged({"name": name})
    planted = dirs["upgrade"] / f"bundle-{job.pk}.raucb"
    planted.write_bytes((bundles / "good.raucb").read_bytes())
    as_web_user(planted)
    job = wait(job, 60)
    assert job.state == Job.State.FAILED
    assert job.error == "name: not a file name the upload form makes; nothing was written"
    assert planted.exists() and empty(dirs["spool"])


@pytest.mark.parametrize("args", [{}, {"now": True}])
def test_a_forged_reboot_reboots_nothing_here(agent, args):
    job = wait(queue.enqueue("system.reboot", args, None), 60)
    assert job.state == Job.State.FAILED
    assert job.error in ("this job takes no arguments; nothing done",
                         "this system did not boot from a system slot (the live system, a "
                         "lab or a development host): not rebooted")
    timers = subprocess.run(["systemctl", "list-timers", "--all", "--no-legend"],
                            capture_output=True, text=True).stdout
    assert "systemctl reboot" not in timers
