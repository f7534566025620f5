"""HA jobs forged by someone who controls the web process (issue 23): job rows written
straight into the database as role tusk, past the HA page's form, and the page's own
state row forged. The real agent checks every argument again with the core the form
uses, then against this box's interfaces; it refuses with a clear message and writes,
starts or hands over nothing. Its files are in directories the web user cannot write."""
import os

import pytest
from habox import HA_KEY, ha_document
from kit import wait_until
from tuskweb import wait

from jobs import queue
from jobs.models import PeriodicState


@pytest.fixture
def ha_dir(agent, tmp_path):
    return tmp_path / "ha"


def refused(kind, args):
    job = wait(queue.enqueue(kind, args), 60)
    assert job.state == "failed", job.result
    return job


def nothing_done(ha_dir):
    """No revision, no confirmed file, no daemon's file (nor a daemon, without one)."""
    revisions = ha_dir / "revisions"
    assert not revisions.exists() or not os.listdir(revisions)
    assert not (ha_dir / "ha.toml").exists()
    assert not (ha_dir / "run" / "keepalived.conf").exists()
    assert not (ha_dir / "run" / "keepalived.pid").exists()


def bad_interface():
    document = ha_document()
    document["virtual"][0]["interface"] = "../../etc"
    return document


def missing_interface():
    document = ha_document()
    document["ha"]["sync_interface"] = "eth9"
    return document


FORGED = [
    ({"document": ha_document(), "timeout": 3600, "path": "/etc/shadow"},
     "path: unknown argument"),
    ({"document": "[ha]\nenabled = true"}, "document: must be a table"),
    ({"document": {**ha_document(), "ha": {**ha_document()["ha"], "script": "/bin/sh"}}},
     "ha.script: unknown key"),
    ({"document": bad_interface()}, "virtual[0].interface"),
    ({"document": missing_interface(), "key": HA_KEY},
     "ha.sync_interface: eth9: no such interface"),
    ({"document": ha_document(), "timeout": 5, "key": HA_KEY}, "confirm_timeout"),
    ({"document": ha_document()}, "key: this box has no pair key yet"),
    ({"document": ha_document(), "key": "short"}, "key: must be 16 to 256 characters"),
    ({"document": ha_document(), "key": ["a list"] * 9}, "key: must be 16 to 256"),
    ({"document": {**ha_document(), "virtual": [{"interface": "eth1",
                                                  "addresses": ["x" * 70000]}]}},
     "at most 64 KiB"),
]


def test_a_forged_apply_is_refused_and_nothing_is_written_or_started(ha_dir):
    for args, message in FORGED:
        job = refused("ha.apply", args)
        assert message in job.error, (args, job.error)
        nothing_done(ha_dir)


def test_a_forged_confirm_or_cancel_with_nothing_pending_is_refused(ha_dir):
    assert "nothing awaits confirmation" in refused("ha.confirm", {}).error
    assert "nothing awaits confirmation" in refused("ha.cancel", {}).error
    assert "unknown argument" in refused("ha.confirm", {"revision": 1}).error
    nothing_done(ha_dir)


def test_a_forged_master_role_does_not_make_the_agent_fail_over(ha_dir):
    """The page's state row says MASTER; the agent asks keepalived's own record."""
    PeriodicState.objects.update_or_create(name="ha.status", defaults={
        "result": {"role": "MASTER", "at": 1e12}})
    job = refused("ha.failover", {})
    assert "not part of a pair" in job.error, job.error
    nothing_done(ha_dir)


def test_the_agents_ha_directories_are_roots_alone(ha_dir, ha_peer):
    """The agent's state and run directories - the revisions, pending.json, the daemons'
    files and pid files, the role record the fail over trusts - are root's, and no one
    else may write in them: nothing the web user plants can be there."""
    job = wait(queue.enqueue("ha.apply", {"document": ha_document(), "timeout": 3600,
                                          "key": HA_KEY}), 60)
    assert job.state == "succeeded", job.error
    for directory in (ha_dir, ha_dir / "revisions", ha_dir / "revisions" / "000001",
                      ha_dir / "run"):
        info = os.stat(directory)
        assert info.st_uid == 0 and not info.st_mode & 0o022, (directory, oct(info.st_mode))
    for name in ("keepalived.conf", "conntrackd.conf", "keepalived.pid"):
        info = os.lstat(ha_dir / "run" / name)
        assert info.st_uid == 0 and not info.st_mode & 0o022, (name, oct(info.st_mode))
    # the pair key, in the revision and once confirmed: root's alone, readable by no one
    # else either
    assert wait(queue.enqueue("ha.confirm", {}), 30).state == "succeeded"
    for path in (ha_dir / "revisions" / "000001" / "ha.key", ha_dir / "ha.key"):
        info = os.lstat(path)
        assert (info.st_uid, oct(info.st_mode & 0o777)) == (0, "0o600"), path


def test_the_channel_refuses_malformed_steps_and_changes_nothing(ha_peer):
    """Whoever holds the pair key can send the backup what an admin could apply there -
    checked as a policy job's arguments are - and nothing else."""
    from habox import HA_SYNC
    from tuskweb import AGENT_NETNS

    from ha.core import peer as peers
    from policy.core.revisions import Store as PolicyStore
    peer_ip = HA_SYNC[1].split("/")[0]
    # alone on its segment, the peer box is master: it takes nothing
    wait_until(lambda: ha_peer.role() == "MASTER", 20, "the peer box MASTER")
    found, answer = peers.ask(peer_ip, HA_KEY.encode(), "POST", "/v1/policy",
                              {"action": "apply", "text": "zones: []", "timeout": 60},
                              netns=AGENT_NETNS)
    assert (found, answer["error"]) == (409, "this box is the master: it takes no "
                                             "configuration from its peer")
    ha_peer.daemons.stop()          # keepalived stopped: no longer master
    wait_until(lambda: ha_peer.role() is None, 20, "the peer box stopped")
    cases = [
        ({"action": "format"}, 400, "is not apply, confirm or cancel"),
        ({"action": "apply", "text": "zones: []", "path": "/etc/shadow"}, 400,
         "path: unknown key"),
        ({"action": "apply", "text": ["not", "text"]}, 400, "text: must be a policy"),
        ({"action": "apply", "text": "x" * ((16 << 20) + 1)}, 400, "text: must be a policy"),
        ({"action": "apply", "text": "zones: []", "confirm": "yes"}, 400,
         "confirm: must be true or false"),
        ({"action": "apply", "text": "zones: [", "timeout": 60}, 422, "not valid YAML"),
        ({"action": "apply", "text": "zones: []", "timeout": 99999}, 422, "confirm_timeout"),
        ({"action": "confirm", "digest": "0" * 64}, 409, "not the one the master confirmed"),
        ({"action": "cancel"}, 422, "nothing awaits confirmation"),
        (["a", "list"], 400, "must be a table"),
    ]
    for request, status, reason in cases:
        found, answer = peers.ask(peer_ip, HA_KEY.encode(), "POST", "/v1/policy", request,
                                  netns=AGENT_NETNS, timeout=60)
        assert (found, reason in answer.get("error", "")) == (status, True), (request, answer)
    store = PolicyStore(ha_peer.config.state_dir)
    assert store.ids() == [] and store.pending() is None
    # the tuning step: a profile's name from the Tuning page's catalogue, nothing else
    for request, status, reason in [
            ({"profile": "../../etc/passwd"}, 422, "Select a valid choice"),
            ({"profile": 7}, 422, "profile: This field is required"),
            ({"profile": "latency", "sysctl": "net.ipv4.ip_forward=0"}, 400,
             "the key profile alone"),
            ({"profile": "none"}, 422, "nothing applied in this boot")]:
        found, answer = peers.ask(peer_ip, HA_KEY.encode(), "POST", "/v1/tuning", request,
                                  netns=AGENT_NETNS, timeout=60)
        assert (found, reason in answer.get("error", "")) == (status, True), (request, answer)
    assert not os.path.exists(os.path.join(ha_peer.config.tuning_state_dir, "applied.json"))
    # a body past the channel's limit is not even read
    with pytest.raises(peers.PeerError):
        peers.ask(peer_ip, HA_KEY.encode(), "POST", "/v1/policy",
                  {"action": "apply", "text": "x" * (17 << 20)}, netns=AGENT_NETNS)
    # and a request that is not a step at all
    found, answer = peers.ask(peer_ip, HA_KEY.encode(), "POST", "/v1/shell", {"cmd": "id"},
                              netns=AGENT_NETNS)
    assert found == 404
