"""The web process keeps nothing of its own: SIGKILL it (gunicorn, master and workers)
after it queued an apply, start another, and the session, the job and its result are
all still there."""
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest
from django.contrib.auth.hashers import make_password
from kit import wait_until
from test_agent import POLICY
from tuskweb import AgentProcess, make_user, wait

from jobs.models import Job
from lab.paths import ROOT


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Gunicorn:
    def __init__(self, config, port):
        self.config, self.port = config, port

    def start(self):
        env = dict(os.environ, TUSK_CONFIG=str(self.config), DJANGO_SETTINGS_MODULE="tusk.settings")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind",
             f"127.0.0.1:{self.port}", "tusk.wsgi:application"], cwd=ROOT / "webui", env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self.answers, 30, "gunicorn answering /healthz/")
        return self

    def answers(self):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz/", timeout=1)
            return True
        except OSError:
            return False

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.mark.django_db(transaction=True)
def test_a_killed_web_process_loses_nothing(agent_config):
    config = agent_config
    config.write_text(config.read_text().replace('allowed_hosts = ["localhost"]',
                                                 'allowed_hosts = ["127.0.0.1"]'))
    user = make_user("alice", "admin")
    # hashed as the real settings hash, which the gunicorn process uses
    user.password = make_password("correct horse battery", hasher="pbkdf2_sha256")
    user.save()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def post(path, fields):
        token = next(c.value for c in jar if c.name == "csrftoken")
        data = urllib.parse.urlencode(dict(fields, csrfmiddlewaretoken=token)).encode()
        request = urllib.request.Request(base + path, data=data, headers={"Referer": base + path})
        with opener.open(request) as response:
            return response.geturl(), response.read().decode()

    web = Gunicorn(config, port).start()
    try:
        opener.open(base + "/accounts/login/").read()
        post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
        post("/policy/import/", {"text": POLICY})
        page = opener.open(base + "/policy/apply/").read().decode()
        version = re.search(r'name="version" value="(\d+)"', page).group(1)
        url, _ = post("/policy/apply/", {"version": version, "timeout": "60"})
        job_id = int(re.search(r"/jobs/(\d+)/", url).group(1))
        web.kill()  # no agent yet: the job waits in the database
        agent = AgentProcess(config).start()
        try:
            assert wait(Job.objects.get(pk=job_id)).state == "succeeded"
        finally:
            agent.stop()
        web = Gunicorn(config, port).start()
        with opener.open(f"{base}/jobs/{job_id}/") as response:  # the same session cookie
            page = response.read().decode()
        assert 'id="job-state">succeeded' in page and "Revision" in page
    finally:
        web.kill()
