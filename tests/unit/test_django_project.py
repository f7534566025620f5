"""The web UI is one Django project under webui/; the policy engine's core and
tusk-tune stay plain Python."""
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

from kit import wait_until

from lab.paths import ROOT

TEST_CONFIG = os.path.join(ROOT, "tests", "web", "tusk-test.toml")


def manage(*argv, **env):
    return subprocess.run([sys.executable, "manage.py", *argv], cwd=os.path.join(ROOT, "webui"),
                          env=dict(os.environ, DJANGO_SETTINGS_MODULE="tusk.settings", **env),
                          capture_output=True, text=True)


def test_django_project_checks_clean():
    result = manage("check", TUSK_CONFIG=TEST_CONFIG)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_migrations_match_the_models():
    result = manage("makemigrations", "--check", "--dry-run", TUSK_CONFIG=TEST_CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr


def test_settings_refuse_to_start_without_the_configuration_file(tmp_path):
    result = manage("check", TUSK_CONFIG=str(tmp_path / "missing.toml"))
    assert result.returncode != 0
    assert f"{tmp_path / 'missing.toml'}: the configuration file does not exist" in result.stderr


def test_policy_core_imports_without_django():
    code = ("import sys; import policy.core.render, policy.core.applier, policy.cli; "
            "sys.exit(1 if 'django' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "webui"),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr or "policy core imported Django"


def test_tusk_tune_imports_without_django():
    code = ("import sys; import tuning.cli, tuning.core.applier; "
            "sys.exit(1 if 'django' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "webui"),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr or "tusk-tune imported Django"


WEB_UNIT = Path(ROOT) / "rootfs-overlay" / "usr" / "lib" / "systemd" / "system" / "tusk-web.service"


def test_gunicorn_is_ready_for_systemd_once_every_view_is_imported(tmp_path):
    """tusk-web.service is Type=notify: systemd - a `systemctl restart`, and what is
    ordered after the unit - waits for gunicorn's READY=1. The unit's gunicorn, run here
    with its own arguments, sends it from a master that has imported the URLconf and the
    views (tusk/wsgi.py; --preload): its workers fork with them instead of each
    importing them at its first request (on a slow CPU, the first page of each)."""
    text = WEB_UNIT.read_text().replace("\\\n", " ")
    assert re.search(r"^Type=notify$", text, re.M), "tusk-web.service is not Type=notify"
    argv = shlex.split(re.search(r"^ExecStart=(.*)$", text, re.M).group(1))
    assert argv[:3] == ["/usr/bin/python3", "-m", "gunicorn"] and "--preload" in argv, argv
    (tmp_path / "hooks.py").write_text(       # the file appears whole (a rename)
        "import os, sys\n"
        "def when_ready(server):\n"
        f"    with open({str(tmp_path / 'modules.new')!r}, 'w') as out:\n"
        "        out.write(' '.join(sys.modules))\n"
        f"    os.replace({str(tmp_path / 'modules.new')!r}, {str(tmp_path / 'modules')!r})\n")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(120)
    env = {key: value for key, value in os.environ.items()      # as the unit: tusk.wsgi's
           if key != "DJANGO_SETTINGS_MODULE"}                     # settings
    env.update(TUSK_CONFIG=TEST_CONFIG, NOTIFY_SOCKET=str(tmp_path / "notify"))
    gunicorn = subprocess.Popen(
        [sys.executable, *argv[1:-1], "--bind", f"unix:{tmp_path / 'web.sock'}",
         "--workers", "1", "--config", "python:hooks", argv[-1]],
        cwd=os.path.join(ROOT, "webui"), env=dict(env, PYTHONPATH=str(tmp_path)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        message = notify.recv(4096).decode()
        # when_ready runs right after the notification, before the workers fork
        wait_until(lambda: (tmp_path / "modules").exists(), 60, "gunicorn's when_ready")
    except TimeoutError:
        message = ""
    finally:
        os.killpg(gunicorn.pid, signal.SIGKILL)      # the master and its worker
        _, errors = gunicorn.communicate(timeout=60)
        notify.close()
    assert "READY=1" in message, errors
    modules = (tmp_path / "modules").read_text().split()
    assert {"tusk.urls", "policy.views", "network.views", "dashboard.views"} <= set(modules)
