"""Configuration sync of an HA pair (issue 23, ha/configsync.py), through the real agent:
the agent's box is the master, the peer box beside it (its agent's channel answering with
the same code) the backup. A policy applied on the master is pending on the backup too,
confirmed on both by one confirm, rolled back on both by one roll back; a policy the
backup cannot load (an interface it lacks) is refused there with the reason, shown on the
master's page and health panel, and not sent again."""
import re

from habox import HA_KEY, ha_document
from kit import wait_until
from tuskweb import wait

from ha.configsync import digest
from ha.forms import segments_text
from jobs import queue
from jobs.models import Job, PeriodicState
from policy.core.revisions import Store as PolicyStore
from tusklib.target import Target

POLICY = """zones:
  - {name: inside, interfaces: [seg0]}
  - {name: outside, interfaces: [out0]}
classes:
  - {name: replication, from: inside, to: outside, action: accept}
"""
OTHER = POLICY.replace("replication", "backups")
ONLY_HERE = POLICY.replace("[out0]", "[eth1]")    # the peer box has no eth1


def sync_state(client):
    found = re.search(r'id="ha-config-sync" data-state="([^"]+)">(.*?)</td>',
                      client.get("/ha/").content.decode(), re.S)
    return (found.group(1), re.sub(r"<[^>]+>", "", found.group(2))) if found else None


def master(admin_client, ha_peer):
    """This box's half applied from the page and confirmed; the peer, up first, hands
    the addresses over: this box MASTER, the peer BACKUP."""
    document = ha_document()
    data = {**{k: v for k, v in document["ha"].items() if not isinstance(v, bool) or v},
            "virtual": segments_text(document["virtual"]), "timeout": 3600, "key": HA_KEY}
    admin_client.post("/ha/", data)
    assert wait(Job.objects.get(kind="ha.apply"), 60).state == "succeeded"
    assert wait(queue.enqueue("ha.confirm"), 30).state == "succeeded"
    wait_until(lambda: ha_peer.role() == "MASTER", 20, "the peer MASTER first")
    assert ha_peer.fail_over() == "BACKUP"
    wait_until(lambda: (PeriodicState.last_result("ha.status") or {}).get("role") == "MASTER",
               20, "this box MASTER")


def policy(text, timeout=600):
    job = wait(queue.enqueue("policy.apply", {"policy_text": text, "timeout": timeout}), 60)
    assert job.state == "succeeded", job.error
    return job


def peer_policy(ha_peer):
    store = PolicyStore(ha_peer.config.state_dir)
    confirmed, pending = store.confirmed_id(), store.pending()
    return (digest(store.get(confirmed).policy_text) if confirmed else None,
            digest(store.get(pending["revision"]).policy_text) if pending else None)


def peer_ruleset(ha_peer):
    return Target(ha_peer.config.netns).run(["nft", "list", "table", "inet", "tusk"]).stdout


def test_the_masters_policy_is_pending_confirmed_and_rolled_back_on_both(
        admin_client, agent, ha_peer, tmp_path):
    master(admin_client, ha_peer)
    policy(POLICY)
    # the pending marker is written before the ruleset loads: both, then
    wait_until(lambda: peer_policy(ha_peer) == (None, digest(POLICY))
               and "replication" in peer_ruleset(ha_peer), 30,
               lambda: f"pending and loaded on the backup too ({sync_state(admin_client)})")
    revision = PolicyStore(ha_peer.config.state_dir).get(1)
    assert revision.meta["user"] == "HA peer 192.168.255.1"
    # the same deadline, give or take the step's time
    ours = PolicyStore(str(tmp_path / "policy")).pending()["deadline"]
    theirs = PolicyStore(ha_peer.config.state_dir).pending()["deadline"]
    assert abs(ours - theirs) < 5
    wait_until(lambda: (sync_state(admin_client) or ("",))[0] == "in sync", 10, "in sync")
    # one confirm, on the master, confirms both
    assert wait(queue.enqueue("policy.confirm"), 30).state == "succeeded"
    wait_until(lambda: peer_policy(ha_peer) == (digest(POLICY), None), 30,
               "confirmed on the backup")
    # one roll back, on the master, rolls back both
    policy(OTHER)
    wait_until(lambda: peer_policy(ha_peer) == (digest(POLICY), digest(OTHER))
               and "backups" in peer_ruleset(ha_peer), 30,
               "the second policy pending and loaded on the backup")
    assert wait(queue.enqueue("policy.cancel"), 30).state == "succeeded"
    wait_until(lambda: peer_policy(ha_peer) == (digest(POLICY), None), 30,
               "rolled back on the backup")
    assert "replication" in peer_ruleset(ha_peer) and "backups" not in peer_ruleset(ha_peer)
    health = admin_client.get("/dashboard/health/").content.decode()
    assert re.search(r'data-check="HA policy">.*?badge ok', health, re.S), health


def test_a_policy_the_backup_cannot_load_is_refused_there_and_shown_here(
        admin_client, agent, ha_peer):
    master(admin_client, ha_peer)
    policy(ONLY_HERE)
    wait_until(lambda: (sync_state(admin_client) or ("",))[0] == "refused", 30,
               lambda: f"refused ({sync_state(admin_client)})")
    state, detail = sync_state(admin_client)
    assert "the backup refused the policy" in detail and "eth1 does not exist" in detail
    assert peer_policy(ha_peer) == (None, None)
    health = admin_client.get("/dashboard/health/").content.decode()
    assert re.search(r'data-check="HA policy">.*?badge bad.*?eth1 does not exist', health,
                     re.S), health


def test_the_masters_tuning_profile_is_applied_on_the_backup(admin_client, agent, ha_peer):
    from ha.configsync import tuning_state
    master(admin_client, ha_peer)
    job = wait(queue.enqueue("tuning.apply", {"profile": "latency"}), 120)
    assert job.state == "succeeded", job.error
    wait_until(lambda: tuning_state(ha_peer.config) == "latency", 60,
               lambda: f"latency on the backup ({PeriodicState.last_result('ha.status')})")
    wait_until(lambda: re.search(r'id="ha-tuning-sync" data-state="in sync"',
                                 admin_client.get("/ha/").content.decode()), 20, "in sync")
    # rolled back on the master: rolled back on the backup
    assert wait(queue.enqueue("tuning.rollback"), 120).state == "succeeded"
    wait_until(lambda: tuning_state(ha_peer.config) == "none", 60, "none on the backup")
