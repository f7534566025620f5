"""Helpers of the web and browser tiers, imported by name (not `from conftest`: with
every tier in one session, that would be whichever tier's conftest loaded last)."""
import grp
import os
import re
import signal
import subprocess
import sys

from django.contrib.auth import get_user_model
from kit import wait_until

from lab.paths import BIN, TOOLS

# the web tier's netns fixture: the agent's namespace (it captures and routes there)
AGENT_NETNS = f"tusk-agent-{os.getpid()}"
# the web tier's peers fixture: peer-a - the agent's namespace - peer-b, and a direct link
PEER_A, PEER_B, PEER_B_DIRECT, PEER_A_GATEWAY = "10.98.1.2", "10.98.2.2", "10.98.9.2", "10.98.1.1"
# the browser tier's tools/tusk-lab: its own lab name, apart from make run's
BROWSER_LAB = "e2e"


TEST_SECRET = b"agent-test-secret\n"


def web_files(directory, secret_name="secret"):
    """The secret key (0640) and the capture directory (2770) in directory, both in the
    web user's group, as the appliance's boot lays them out: (secret, captures)."""
    web = grp.getgrnam("tusk").gr_gid
    secret = directory / secret_name
    secret.write_bytes(TEST_SECRET)
    os.chown(secret, 0, web)
    os.chmod(secret, 0o640)
    captures = directory / "captures"
    captures.mkdir()
    os.chown(captures, 0, web)
    os.chmod(captures, 0o2770)
    return secret, captures


def database_toml(db):
    """The [database] section naming Django's (test) database db."""
    return (f'[database]\nname = "{db["NAME"]}"\nuser = "{db["USER"]}"\n'
            f'host = "{db["HOST"]}"\nport = {db["PORT"]}\n')


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
        self.proc = subprocess.Popen([sys.executable, str(BIN / "tusk-agent")],
                                     env=env, stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT)

        def beating():
            assert self.proc.poll() is None, self.log.read_text()
            return AgentHeartbeat.objects.filter(agent__contains=f":{self.proc.pid}:").exists()
        wait_until(beating, 30, f"the agent's first heartbeat (log {self.log})")
        return self

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(40)


def wait(job, seconds=30):
    """job once the agent has finished it."""
    def done():
        job.refresh_from_db()
        return job.done
    wait_until(done, seconds, lambda: f"{job} done (so far: {job.message})")
    return job


def errors_of(response):
    """{field name: [messages]} as a form page shows them, plus '' for form-wide ones."""
    html = response.content.decode()
    found = {}
    for field, body in re.findall(r'data-field="([^"]+)">(.*?)</ul>', html, re.S):
        found[field] = re.findall(r"<li>(.*?)</li>", body)
    nonfield = re.search(r'class="errorlist nonfield"[^>]*>(.*?)</ul>', html, re.S)
    if nonfield:
        found[""] = re.findall(r"<li>(.*?)</li>", nonfield.group(1))
    return found


def refusal_bundles(out):
    """Small bundles by tools/build-bundle --tiny in out/ (RAUC refuses before it writes,
    so their image need not be a system): good.raucb, signed by the development key;
    foreign.raucb, signed by a key no box trusts; other.raucb, for another compatible;
    truncated.raucb, the good one cut short as a broken upload leaves it."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=not Tusk", "-keyout", out / "foreign.key",
                    "-out", out / "foreign.cert"], check=True, capture_output=True)
    for name, extra in (("good", []),
                        ("foreign", ["--cert", out / "foreign.cert", "--key", out / "foreign.key"]),
                        ("other", ["--compatible", "not-tusk"])):
        result = subprocess.run([str(TOOLS / "build-bundle"), "--tiny", "--version",
                                 f"test-{name}", *map(str, extra), str(out / f"{name}.raucb")],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    good = (out / "good.raucb").read_bytes()
    (out / "truncated.raucb").write_bytes(good[:len(good) // 2])
    return out
