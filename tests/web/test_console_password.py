"""The console password set from the System page (issue 16, item 11): the web process
hashes it and queues system.console_password; the real agent checks the job's argument
again with the form's own check and writes console-password beside its tusk.toml, which
the console menu (on a pseudo-terminal, against the same tree) then asks for before its
shell. Forged job rows - written straight into the database, as someone who controls
the web process could - are refused and change nothing."""
import dataclasses
import os
import shutil
import sys

import pytest
from appliancetree import TUSK_CONSOLE, Appliance, Nic, ip_json
from tuskweb import wait
from unit.test_console import PROMPT, Terminal

from appliance import consolepw
from jobs import queue
from jobs.models import Job

SECRET = "staple-battery-9"


@pytest.fixture
def box(tmp_path):
    box = Appliance(tmp_path / "root", Nic("enp0s2"))
    box.behave({"systemctl is-active": {"rc": 3}, "ip": {"stdout": ip_json()}})
    box.table["shell"] = ["/bin/sh"]
    os.makedirs(box.path("/etc/tusk"))
    return box


@pytest.fixture
def agent_config(agent_config, box):
    """The web tier's agent configuration, moved into the box's /etc/tusk."""
    config = box.path("/etc/tusk/tusk.toml")
    shutil.copy(agent_config.parent / "secret", box.path("/etc/tusk/secret"))
    shutil.copy(agent_config, config)
    return type(agent_config)(config)


@pytest.fixture
def web(settings, agent_config):
    """The web process reads the same tusk.toml's directory."""
    settings.TUSK = dataclasses.replace(settings.TUSK, path=str(agent_config))
    return consolepw.path_beside(agent_config)


def console_shell(box, typed=None):
    """Option 8 on the console; typed: the console password to give. What it said."""
    terminal = Terminal([sys.executable, TUSK_CONSOLE, "--root", box.root], box.env())
    try:
        terminal.expect(PROMPT)
        terminal.type("8")
        if typed is not None:
            terminal.expect("Console password: ")
            terminal.type(typed)
        said = terminal.expect("\n", 20) + terminal.expect("\n", 20)
        terminal.type("exit")
        return said
    finally:
        terminal.close()


KEPT = consolepw.make("the one before")
FORGED = [
    ({"hash": KEPT + "\nroot-shell-please"}, "hash: not pbkdf2_sha256$<iterations>$<salt: "
     "16-64 letters and digits>$<base64 SHA-256> on one line; nothing changed"),
    ({"hash": "md5$1$abcdefghijklmnop$x"}, "hash: algorithm 'md5' is not pbkdf2_sha256; "
     "nothing changed"),
    ({"hash": KEPT.replace("$600000$", "$999999999999$")},
     "hash: 999999999999 iterations is outside 100000-5000000; nothing changed"),
    ({"hash": KEPT.replace("$600000$", "$1000$")},
     "hash: 1000 iterations is outside 100000-5000000; nothing changed"),
    ({"hash": ["clear"]}, "hash: must be a string, not list; nothing changed"),
    ({}, "hash: must be a string, not NoneType; nothing changed"),
]


@pytest.mark.parametrize("args, error", FORGED, ids=["newline", "md5", "huge-iterations",
                                                     "few-iterations", "list", "missing"])
def test_a_forged_job_with_a_malformed_hash_changes_nothing(agent, web, args, error):
    with open(web, "w", encoding="utf-8") as handle:
        handle.write(KEPT + "\n")
    job = wait(Job.objects.create(kind="system.console_password", args=args))
    assert (job.state, job.error) == ("failed", error)
    with open(web, encoding="utf-8") as handle:
        assert handle.read() == KEPT + "\n"


def test_a_forged_job_cannot_name_another_file(agent, web, tmp_path):
    """The path comes from the agent's configuration: a row's path is not even read."""
    elsewhere = tmp_path / "elsewhere"
    job = wait(queue.enqueue("system.console_password",
                             {"hash": KEPT, "path": str(elsewhere)}))
    assert job.state == "succeeded"
    assert not elsewhere.exists() and os.path.exists(web)


def test_a_viewer_sees_the_state_and_cannot_change_it(viewer_client, web):
    page = viewer_client.get("/system/").content.decode()
    assert "Console password: <span class=\"badge warn\">not set</span>" in page
    assert "console-password-form" not in page
    for url, data in (("/system/console-password/", {"password1": SECRET,
                                                      "password2": SECRET}),
                      ("/system/console-password/clear/", {})):
        assert viewer_client.post(url, data).status_code == 403
    assert not Job.objects.exists() and not os.path.exists(web)


def test_the_form_names_a_bad_password(admin_client, web):
    response = admin_client.post("/system/console-password/",
                                 {"password1": SECRET, "password2": SECRET + "x"})
    assert response.status_code == 400
    assert "The two passwords differ." in response.content.decode()
    response = admin_client.post("/system/console-password/",
                                 {"password1": "short", "password2": "short"})
    assert "at least 8 characters" in response.content.decode()
    assert not Job.objects.exists()


def test_an_admin_sets_it_the_console_asks_for_it_then_clears_it(admin_client, agent, web,
                                                                  box):
    assert "A shell: type exit" in console_shell(box)
    response = admin_client.post("/system/console-password/",
                                 {"password1": SECRET, "password2": SECRET})
    assert response.status_code == 302
    job = wait(Job.objects.get(kind="system.console_password"))
    assert job.state == "succeeded", job.error
    assert SECRET not in str(job.args)
    assert os.stat(web).st_mode & 0o777 == 0o600
    assert "badge ok\">set</span>" in admin_client.get("/system/").content.decode()
    assert "Wrong password." in console_shell(box, "not it")
    assert "A shell: type exit" in console_shell(box, SECRET)
    admin_client.post("/system/console-password/clear/")
    job = wait(Job.objects.filter(kind="system.console_password").latest("id"))
    assert job.state == "succeeded" and not os.path.exists(web)
    assert "A shell: type exit" in console_shell(box)
    from accounts.models import AuditEntry
    assert list(AuditEntry.objects.filter(target="console").order_by("id").values_list(
        "action", flat=True)) == ["console password set", "console password set",
                                  "console password clear", "console password cleared"]


def test_tusk_admin_unlock_forgets_that_names_failed_logins_only(db):
    """The console menu's "Unlock admin login" (option 9) runs this."""
    from io import StringIO

    from django.core.management import call_command

    from accounts.models import AuditEntry, LoginFailure
    for name in ("admin", "Admin", "ADMIN", "alice"):
        LoginFailure.objects.create(username=name, address="192.0.2.7")
    out = StringIO()
    call_command("tusk_admin", "--unlock", "admin", stdout=out)
    assert out.getvalue() == "unlocked 'admin': 3 failed logins forgotten\n"
    assert list(LoginFailure.objects.values_list("username", flat=True)) == ["alice"]
    entry = AuditEntry.objects.get(action="login unlocked")
    assert (entry.username, entry.target, entry.detail) == ("tusk_admin", "admin",
                                                             {"failures": 3})
