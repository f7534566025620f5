"""The policy engine is an app of the one Django project under webui/."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_django_project_checks_clean():
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=os.path.join(ROOT, "webui"),
                            env=dict(os.environ, TUSK_DEBUG="1"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_settings_refuse_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if k not in ("TUSK_DEBUG", "TUSK_SECRET_KEY")}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=os.path.join(ROOT, "webui"),
                            env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "TUSK_SECRET_KEY is not set" in result.stderr


def test_policy_core_imports_without_django():
    code = ("import sys; import policy.core.render, policy.core.applier, policy.cli; "
            "sys.exit(1 if 'django' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "webui"),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr or "policy core imported Django"
