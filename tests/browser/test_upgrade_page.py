"""The System page's bundle upload in Chromium, on make run's whole stack (issue 22,
docs/UPGRADES.md): nginx's upload gate, gunicorn streaming the bundle into the lab's
upgrade directory, the real agent and RAUC's own check against the lab's keyring (the
development key: tools/tusk-lab writes the lab's RAUC configuration from the image's).

The lab booted from no system slot, so the page offers the upload only once slots.json
says it runs from slot A - written here as tusk-boot writes it on a box - and the agent,
which reads the kernel's command line itself, stops right after RAUC's check passed
("did not boot from a system slot"). The install into the other slot, the reboot and
the fallback are a real box's: vm/test_appliance.py.

An admin sees the upload's own progress bar move (Chromium's upload throttled, so a
small bundle takes seconds), then the job page; bundles RAUC must not take are refused
with the reason; a file that is no bundle is refused in place; a viewer sees the slots
but no upload, and a post of theirs is refused by the gate with nothing stored."""
import json
import os
import re

import pytest
from playwright.sync_api import expect
from tuskweb import BROWSER_LAB, refusal_bundles

LAB_DIR = f"/var/tmp/tusk-lab/{BROWSER_LAB}"
JOB_MS = 60_000
VIEWER, VIEWER_FIRST, VIEWER_OWN = "watcher", "first password 4 watcher", "watching elephants 42"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return refusal_bundles(tmp_path_factory.mktemp("bundles"))


@pytest.fixture(scope="module", autouse=True)
def booted_from_slot_a(tusk):
    """slots.json as tusk-boot health writes it on a box booted from slot A; gone after
    the module, when the lab's System page says again that it has no slots."""
    state = os.path.join(LAB_DIR, "system")
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, "slots.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"booted": "A", "next": "A", "lines": ["slot A: release 1.0 - running, good",
                                                         "slot B: empty"],
                   "slots": {"A": {"release": "1.0", "running": True, "ok": True,
                                   "trial": False},
                             "B": {"release": None, "running": False, "ok": False,
                                   "trial": False}}}, handle)
    os.chmod(path, 0o644)
    yield
    os.unlink(path)


def stored_uploads():
    """What the web process left in the lab's upgrade directory (the agent takes each
    upload into its own spool and removes it)."""
    return sorted(os.listdir(os.path.join(LAB_DIR, "upgrade")))


def upload(page, url, bundle):
    page.goto(url + "/system/")
    expect(page.locator("#running")).to_contain_text("in system slot A")
    page.set_input_files("#id_bundle", str(bundle))
    page.click("#upload-bundle")


def test_the_upload_shows_its_progress_then_raucs_check_on_the_job_page(admin, tusk, bundles):
    url, _ = tusk
    # about 76 kB at 16 kB/s: the bar is seen between its ends
    cdp = admin.context.new_cdp_session(admin)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 16_000})
    upload(admin, url, bundles / "good.raucb")
    expect(admin.locator("#upload-status")).to_be_visible()
    expect(admin.locator("#upload-bundle")).to_be_disabled()
    admin.wait_for_function(
        "() => { const bar = document.getElementById('upload-progress');"
        " return bar && bar.value > 0 && bar.value < bar.max; }", timeout=JOB_MS)
    expect(admin.locator("#upload-sent")).to_have_text(re.compile(r"^\d+ % of 0\.\d MB sent$"))
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    # the whole bundle arrived: the job page, RAUC's check passed, then no slot here
    expect(admin).to_have_url(re.compile(r"/jobs/\d+/\?next=system$"), timeout=JOB_MS)
    expect(admin.locator("#job-state")).to_have_text("failed", timeout=JOB_MS)
    expect(admin.locator("#job [role=alert]")).to_have_text(
        "this system did not boot from a system slot (the live system, a lab or a "
        "development host); the running system is unchanged")
    admin.click("#continue")
    expect(admin.locator("#last-upgrade")).to_contain_text("did not boot from a system slot")
    assert stored_uploads() == []


@pytest.mark.parametrize("name, reason", [
    ("foreign.raucb", re.compile(r"^RAUC refused the bundle: .*(signature|certificate|"
                                 r"[Vv]erif).*; the running system is unchanged$")),
    ("other.raucb", re.compile(r"^the bundle is for compatible 'not-tusk', this box is "
                               r"'tusk-x86_64'; the running system is unchanged$")),
    ("truncated.raucb", re.compile(r"^RAUC refused the bundle: .+; the running system is "
                                   r"unchanged$"))])
def test_a_bundle_the_box_must_not_take_is_refused_with_the_reason(admin, tusk, bundles,
                                                                   name, reason):
    url, _ = tusk
    upload(admin, url, bundles / name)
    expect(admin).to_have_url(re.compile(r"/jobs/\d+/"), timeout=JOB_MS)
    expect(admin.locator("#job-state")).to_have_text("failed", timeout=JOB_MS)
    expect(admin.locator("#job [role=alert]")).to_have_text(reason)
    assert stored_uploads() == []


def test_a_file_that_is_no_bundle_is_refused_in_place(admin, tusk, tmp_path):
    url, _ = tusk
    notes = tmp_path / "notes.txt"
    notes.write_text("not a bundle\n")
    upload(admin, url, notes)
    expect(admin.locator("#upgrade-form .errorlist")).to_contain_text(
        "not an update bundle: its name must end in .raucb")
    assert admin.url == url + "/system/"
    # the form that replaced the refused one sends again, with its progress
    expect(admin.locator("#upload-bundle")).to_be_enabled()
    expect(admin.locator("#upload-status")).to_be_hidden()
    assert stored_uploads() == []


def test_a_viewer_sees_the_slots_but_cannot_upload(admin, tusk, bundles, browser):
    url, _ = tusk
    admin.goto(url + "/system/")
    last = admin.locator("#slots").inner_text()
    admin.goto(url + "/accounts/users/new/")
    admin.fill("#id_username", VIEWER)
    admin.select_option("#id_role", "viewer")
    admin.fill("#id_password", VIEWER_FIRST)
    admin.click("button[type=submit]")
    expect(admin.locator("body")).to_contain_text(f"User {VIEWER} created")
    context = browser.new_context(ignore_https_errors=True)
    viewer = context.new_page()
    try:
        viewer.goto(url + "/accounts/login/")
        viewer.fill("#id_username", VIEWER)
        viewer.fill("#id_password", VIEWER_FIRST)
        viewer.click("button[type=submit]")
        viewer.fill("#id_old_password", VIEWER_FIRST)
        viewer.fill("#id_new_password1", VIEWER_OWN)
        viewer.fill("#id_new_password2", VIEWER_OWN)
        viewer.click("button[type=submit]")
        expect(viewer.locator("h1")).to_have_text("Dashboard")
        viewer.goto(url + "/system/")
        expect(viewer.locator("#slot-list")).to_contain_text("slot A: release 1.0")
        expect(viewer.locator("#upgrade-form")).to_have_count(0)
        expect(viewer.locator("#slots")).to_contain_text("An admin can upload an update bundle.")
        # the form's post, made anyway with the viewer's session and CSRF token
        token = viewer.locator("body").get_attribute("hx-headers")
        response = viewer.request.post(url + "/system/upgrade/", headers={
            **json.loads(token), "Referer": url + "/system/"}, multipart={
            "bundle": {"name": "good.raucb", "mimeType": "application/octet-stream",
                       "buffer": (bundles / "good.raucb").read_bytes()}})
        assert response.status == 403, response.status
    finally:
        context.close()
    assert stored_uploads() == []
    admin.goto(url + "/system/")                # no job was queued
    assert admin.locator("#slots").inner_text() == last
