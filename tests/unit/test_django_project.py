"""The web UI is one Django project under webui/; the policy engine's core and
tusk-tune stay plain Python."""
import os
import subprocess
import sys

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
