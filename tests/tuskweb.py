"""Helpers of the web and browser tiers, imported by name (not `from conftest`: with
every tier in one session, that would be whichever tier's conftest loaded last)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.contrib.auth import get_user_model

ROOT = Path(__file__).resolve().parents[1]
# the browser tier's tools/tusk-lab: its own lab name and ports, apart from make run's
BROWSER_LAB, BROWSER_HTTP_PORT, BROWSER_PG_PORT = "e2e", 8021, 5442


def make_user(username, role, password="correct horse battery", must_change=False):
    from accounts.models import Profile
    user = get_user_model().objects.create_user(username, password=password)
    Profile.objects.create(user=user, role=role, must_change_password=must_change)
    return user


class AgentProcess:
    """The real agent (webui/bin/tusk-agent), its own process, with a configuration file
    of the test's (tests/web/conftest.py agent_config)."""

    def __init__(self, config):
        self.config = config
        self.proc = None
        self.log = config.parent / "agent.log"

    def start(self):
        from jobs.models import AgentHeartbeat
        env = dict(os.environ, TUSK_CONFIG=str(self.config),
                   DJANGO_SETTINGS_MODULE="tusk.settings")
        started = time.time()
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "webui" / "bin" / "tusk-agent")],
                                     env=env, stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if AgentHeartbeat.objects.filter(agent__contains=f":{self.proc.pid}:").exists():
                return self
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.1)
        raise AssertionError(f"the agent did not start in {time.time() - started:.0f} s:\n"
                             f"{self.log.read_text()}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(40)


def wait(job, seconds=30):
    """job once the agent has finished it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.done:
            return job
        time.sleep(0.1)
    raise AssertionError(f"{job} not done after {seconds} s: {job.message}")
