"""The web tier: Django against a real PostgreSQL cluster of the tests' own
(tools/pg-cluster up tusk-test 5440, started here - nothing runs in CI beforehand, and
stopped again when the session ends, however it ends), and the real agent. A missing
server package fails with what to install."""
import dataclasses
import os
import shutil
import subprocess
import sys
from functools import partial

import pytest
from habox import HA_KEY, HA_SEGMENT, HA_SYNC, ha_document
from tuskweb import AGENT_NETNS, PEER_B_DIRECT, AgentProcess, database_toml, make_user, web_files

from lab.namespaces import Topology
from lab.paths import PG_CLUSTER
from lab.users import ANALYZE_PROBE, ANALYZE_USER, reach_interpreter

CLUSTER, PORT = "tusk-test", "5440"


@pytest.fixture(scope="session")
def django_db_modify_db_settings():
    if os.geteuid() != 0:
        pytest.fail("the web tier needs root to run its PostgreSQL cluster (pg_ctlcluster)")
    if shutil.which("pg_createcluster") is None:
        pytest.fail("missing: pg_createcluster (Debian package postgresql) - run `make test`, "
                    "which installs it")
    running = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
    # another session's cluster (two tiers run by hand at once) stays up for it
    ours = not any(line.split()[1:4:2] == [CLUSTER, "online"] for line in running.splitlines())
    result = subprocess.run([PG_CLUSTER, "up", CLUSTER, PORT], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"could not start PostgreSQL cluster {CLUSTER}: {result.stderr}")
    yield
    if ours:
        subprocess.run([PG_CLUSTER, "down", CLUSTER, PORT], check=True)


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
    name = AGENT_NETNS
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "add", "eth1", "type", "veth", "peer", "name",
                    "eth2"], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def peers(netns):
    """peer-a (PEER_A 10.98.1.2) - eth1 [netns] eth3 - peer-b (PEER_B 10.98.2.2), forwarding
    on, and peer-a 10.98.9.1/30 - 10.98.9.2/30 peer-b directly (the self-test's baseline)."""
    topology = Topology()
    names = (topology.namespace(f"{netns}-a"), topology.namespace(f"{netns}-b"))
    topology.ns(netns, "ip", "link", "del", "eth1")
    for inner, peer, net in (("eth1", names[0], "1"), ("eth3", names[1], "2")):
        topology.wire(netns, inner, peer, "eth0")
        topology.address(netns, inner, f"10.98.{net}.1/24")
        topology.address(peer, "eth0", f"10.98.{net}.2/24")
        topology.route(peer, "default", f"10.98.{net}.1")
    topology.wire(names[0], "bypass", names[1], "bypass")
    topology.address(names[0], "bypass", "10.98.9.1/30")
    topology.address(names[1], "bypass", f"{PEER_B_DIRECT}/30")
    topology.forward(netns)
    yield names
    topology.down()


@pytest.fixture
def ha_peer(netns, tmp_path, settings):
    """The agent's namespace as one box of an HA pair, and a second namespace as its
    peer - a traffic segment (seg0) and a sync link (sync0) between them - running the
    secondary's half, applied and confirmed by its own HaApplier (real keepalived and
    conntrackd). Yields that applier. Afterwards both boxes' daemons stop, and whatever
    the agent left pending is rolled back (its watchdog ends with it)."""
    topology = Topology()
    peer = topology.namespace(f"{netns}-p")
    try:
        yield from _ha_pair(topology, netns, peer, tmp_path, settings)
    finally:
        topology.down()     # whatever failed above, no namespace is left behind


def _ha_pair(topology, netns, peer, tmp_path, settings):
    from ha.agent_jobs import answer
    from ha.core import config as ha_config
    from ha.core import peer as peers
    from ha.core.applier import HaApplier
    for link in ("seg0", "sync0"):
        topology.wire(netns, link, peer, link)
    for index, box in enumerate((netns, peer)):
        topology.address(box, "seg0", HA_SEGMENT[index])
        topology.address(box, "sync0", HA_SYNC[index])
        # a second traffic segment each box has, for a policy's outside zone (a veth
        # pair: this kernel has no dummy links)
        topology.ns(box, "ip", "link", "add", "out0", "type", "veth", "peer", "name", "out1")
        topology.ns(box, "ip", "link", "set", "out0", "up")
    # the peer's agent's configuration: its own stores, its namespace
    peer_config = dataclasses.replace(
        settings.TUSK, netns=peer, state_dir=str(tmp_path / "peer-policy"),
        network_state_dir=str(tmp_path / "peer-network"),
        tuning_state_dir=str(tmp_path / "peer-tuning"), ha_state_dir=str(tmp_path / "peer-ha"))
    applier = HaApplier(peer_config.ha_state_dir, netns=peer)
    applier.config = peer_config
    applier.apply(ha_config.to_toml(ha_config.from_document(ha_document("secondary"))),
                  timeout=3600)
    applier.confirm()
    peers.write_key(applier.store.state_dir, HA_KEY)
    # the peer's agent, as far as this box sees it: its answers over the sync link
    server = peers.PeerServer(HA_SYNC[1].split("/")[0], partial(answer, peer_config, applier),
                              lambda: peers.read_key(applier.store.state_dir), netns=peer)
    try:
        yield applier
    finally:
        server.stop()
        from policy.core.applier import Applier as PolicyApplier
        for policy in (PolicyApplier(peer_config.state_dir, peer),
                       PolicyApplier(str(tmp_path / "policy"), netns)):
            if policy.store.pending():     # its watchdog ends with it
                policy.cancel()
        ours = HaApplier(str(tmp_path / "ha"), netns=netns)
        if ours.store.pending():
            ours.cancel()
        ours.daemons.stop()
        applier.daemons.stop()


@pytest.fixture
def router(peers):
    """The peers above, routed through the agent's namespace (test_captures.py and
    test_attack_captures.py)."""
    return peers


@pytest.fixture(scope="session")
def analysis_user(system_users):
    """tusk-analyze can run this interpreter and import the analyser, as in make run: the
    lab's own code (lab/users.py) grants it the way there."""
    problem = reach_interpreter(sys.executable, ANALYZE_USER, ANALYZE_PROBE)
    if problem:
        pytest.fail(problem)
    return ANALYZE_USER


@pytest.fixture
def agent_config(tmp_path, netns, system_users, settings):
    """The agent's configuration file, laid out as on the appliance: the secret key and
    the capture directory in the web user's group (0640, 2770); the web process of the
    test (settings.TUSK) shares the capture directory."""
    config = tmp_path / "tusk.toml"
    _, captures = web_files(tmp_path)
    settings.TUSK = dataclasses.replace(settings.TUSK, capture_dir=str(captures))
    config.write_text(f"""[web]
secret_key_file = "secret"
allowed_hosts = ["localhost"]
{database_toml(settings.DATABASES["default"])}[agent]
netns = "{netns}"
state_dir = "{tmp_path / 'policy'}"
ha_state_dir = "{tmp_path / 'ha'}"
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
