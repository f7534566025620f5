"""The web tier: Django against a real PostgreSQL cluster of the tests' own
(tools/pg-cluster up tusk-test 5440, started here - nothing runs in CI beforehand),
and the real agent. A missing server package fails with what to install."""
import dataclasses
import importlib.machinery
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tuskweb import AgentProcess, make_user

ROOT = Path(__file__).resolve().parents[2]
CLUSTER, PORT = "tusk-test", "5440"


@pytest.fixture(scope="session")
def django_db_modify_db_settings():
    if os.geteuid() != 0:
        pytest.fail("the web tier needs root to run its PostgreSQL cluster (pg_ctlcluster)")
    if shutil.which("pg_createcluster") is None:
        pytest.fail("missing: pg_createcluster (Debian package postgresql) - run `make test`, "
                    "which installs it")
    result = subprocess.run([str(ROOT / "tools" / "pg-cluster"), "up", CLUSTER, PORT],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"could not start PostgreSQL cluster {CLUSTER}: {result.stderr}")


@pytest.fixture
def admin_user(db):
    return make_user("alice", "admin")


@pytest.fixture
def viewer_user(db):
    return make_user("victor", "viewer")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client


@pytest.fixture
def netns():
    name = f"tusk-agent-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "add", "eth1", "type", "veth", "peer", "name",
                    "eth2"], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture(scope="session")
def analysis_user(system_users):
    """tusk-analyze can run this interpreter and import the analyser, as in make run: the
    lab's own code (tools/tusk-lab) grants it the way there."""
    loader = importlib.machinery.SourceFileLoader("tusk_lab", str(ROOT / "tools" / "tusk-lab"))
    lab = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(lab)
    problem = lab.reach_interpreter(sys.executable, lab.ANALYZE_USER, lab.ANALYZE_PROBE)
    if problem:
        pytest.fail(problem)
    return lab.ANALYZE_USER


@pytest.fixture
def agent_config(tmp_path, netns, system_users, settings):
    """The agent's configuration file, laid out as on the appliance: the secret key and
    the capture directory in the web user's group (0640, 2770); the web process of the
    test (settings.TUSK) shares the capture directory."""
    db = settings.DATABASES["default"]
    config = tmp_path / "tusk.toml"
    web = pwd.getpwnam("tusk").pw_gid
    secret = tmp_path / "secret"
    secret.write_text("agent-test-secret\n")
    os.chown(secret, 0, web)
    os.chmod(secret, 0o640)
    captures = tmp_path / "captures"
    captures.mkdir()
    os.chown(captures, 0, web)
    os.chmod(captures, 0o2770)
    settings.TUSK = dataclasses.replace(settings.TUSK, capture_dir=str(captures))
    config.write_text(f"""[web]
secret_key_file = "secret"
allowed_hosts = ["localhost"]
[database]
name = "{db['NAME']}"
user = "{db['USER']}"
host = "{db['HOST']}"
port = {db['PORT']}
[agent]
netns = "{netns}"
state_dir = "{tmp_path / 'policy'}"
tuning_state_dir = "{tmp_path / 'tuning'}"
capture_dir = "{captures}"
capture_spool_dir = "{tmp_path / 'capture-spool'}"
capture_quota_mb = 50
sample_interval = 0.5
live_check_interval = 1
""")
    return config


@pytest.fixture
def agent(transactional_db, agent_config, analysis_user):
    process = AgentProcess(agent_config).start()
    yield process
    process.stop()
