"""The job queue and the real agent (webui/bin/tusk-agent, its own process) against the
test database, applying policies to a network namespace of the test's own."""
import fcntl
import re
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import psycopg2
import pytest
from agent_tasks_for_tests import SLOW
from django.conf import settings
from django.utils import timezone
from kit import wait_until
from tuskweb import AgentProcess, wait

from jobs import queue
from jobs.models import AgentHeartbeat, Job, PeriodicState
from policy.models import Revision, TargetState

POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
classes:
  - {name: web, from: inside, to: outside, action: accept}
"""


def test_the_agent_answers_a_ping(agent):
    job = wait(queue.enqueue("agent.ping"))
    assert job.state == "succeeded"
    assert str(agent.proc.pid) in job.result["agent"]


def test_every_task_keeps_to_its_contract(agent):
    """Each task's result is checked against its contract when it is stored (issue 37):
    one that broke it would count a failure with the field named. After a few runs of
    every periodic task (the tests' own tasks fail or sleep on purpose), none has."""
    shipped = PeriodicState.objects.exclude(name__startswith="test.")
    wait_until(lambda: not shipped.filter(interval__isnull=False, runs__lt=2).exists(), 30,
               lambda: f"two runs of each task ({list(shipped.values('name', 'runs'))})")
    failed = {task.name: task.error for task in shipped.filter(failures__gt=0)}
    assert failed == {}, failed


def test_an_unknown_kind_is_refused_when_queued(transactional_db):
    with pytest.raises(ValueError, match="unknown job kind"):
        queue.enqueue("policy.frobnicate")
    assert not Job.objects.exists()


def test_apply_then_confirm_through_the_agent(agent, netns):
    job = wait(queue.enqueue("policy.apply", {"policy_text": POLICY, "timeout": 60}))
    assert job.state == "succeeded", job.error
    assert job.progress == 100 and job.result["revision"] == 1
    state = TargetState.objects.get(pk=1)
    assert (state.pending, state.confirmed, state.table_loaded) == (1, None, True)
    live = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "table", "inet", "tusk"],
                          capture_output=True, text=True, check=True).stdout
    assert 'comment "tusk: classes[0] web"' in live
    job = wait(queue.enqueue("policy.confirm"))
    assert job.state == "succeeded", job.error
    state.refresh_from_db()
    assert (state.pending, state.confirmed, state.matches) == (None, 1, True)
    assert Revision.objects.get(number=1).outcome == "confirmed"


def test_a_refused_policy_fails_the_job_with_the_problems(agent):
    bad = POLICY.replace("eth2", "eth9")
    job = wait(queue.enqueue("policy.apply", {"policy_text": bad}))
    assert job.state == "failed"
    assert job.result["problems"][0]["path"] == "zones[1].interfaces[0]"
    assert "eth9 does not exist" in job.error


@pytest.mark.parametrize("args, path, message", [
    ({"policy_text": POLICY, "timeout": "60; reboot"}, "confirm_timeout",
     "is not a whole number of seconds"),
    ({"policy_text": POLICY, "timeout": [60]}, "confirm_timeout",
     "is not a whole number of seconds"),
    ({"policy_text": {"zones": []}}, "policy", "must be the text of a policy file"),
    ({"policy_text": "#" * (16 * 1024 * 1024 + 1)}, "policy",
     "must be the text of a policy file of at most 16 MiB"),
])
def test_a_forged_apply_job_is_refused_by_field_and_loads_nothing(agent, netns, args, path,
                                                                  message):
    """Job rows the web user wrote itself, past the forms: the agent checks them as the
    engine checks a policy from the CLI, names the field, and loads nothing."""
    job = wait(queue.enqueue("policy.apply", args))
    assert job.state == "failed"
    assert job.result["problems"][0]["path"] == path, job.error
    assert message in job.error
    listed = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "tables"],
                            capture_output=True, text=True, check=True).stdout
    assert "tusk" not in listed


def test_the_agent_notices_a_ruleset_changed_behind_its_back(agent, netns):
    wait(queue.enqueue("policy.apply", {"policy_text": POLICY}))
    wait(queue.enqueue("policy.confirm"))
    subprocess.run(["ip", "netns", "exec", netns, "nft", "add", "rule", "inet", "tusk",
                    "forward", "accept"], check=True)
    wait_until(lambda: TargetState.objects.get(pk=1).matches is False, 10,
               "the agent noticing the drift")


def test_a_killed_agent_fails_the_job_it_was_running_and_runs_the_rest(agent, agent_config):
    (agent_config.parent / "policy").mkdir(exist_ok=True)
    lock = open(agent_config.parent / "policy" / "lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the apply blocks on the applier's lock
    job = queue.enqueue("policy.apply", {"policy_text": POLICY})
    wait_until(lambda: Job.objects.get(pk=job.pk).state == "running", 20, "the apply starting")
    agent.kill()
    fcntl.flock(lock, fcntl.LOCK_UN)
    ping = queue.enqueue("agent.ping")  # queued while no agent runs
    agent.start()
    job = wait(job)
    assert job.state == "failed"
    assert "stopped while running this job" in job.error
    assert wait(ping).state == "succeeded"


def test_a_retry_safe_job_left_running_is_run_again(agent_config, transactional_db):
    orphan = Job.objects.create(kind="agent.ping", state="running", agent="gone:1:1",
                                attempts=1)
    process = AgentProcess(agent_config).start()
    try:
        orphan = wait(orphan)
        assert orphan.state == "succeeded" and orphan.attempts == 2
    finally:
        process.stop()


def test_a_failed_orphan_and_what_its_hook_settles_are_seen_together(agent_config,
                                                                       transactional_db,
                                                                       monkeypatch):
    """Whoever sees the orphan failed sees what its kind's `abandoned` hook settled
    (a capture failed with it): one transaction, however long the hook takes."""
    monkeypatch.setenv("TUSK_AGENT_PLUGINS", "agent_tasks_for_tests")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    orphan = Job.objects.create(kind="test.settles", state="running", agent="gone:1:1")
    process = AgentProcess(agent_config).start()
    try:
        orphan = wait(orphan, 10)
        assert orphan.state == "failed" and "stopped while running this job" in orphan.error
        assert PeriodicState.objects.filter(name=f"test.settled.{orphan.pk}").exists(), \
            "the job was failed before its hook had settled what it left"
    finally:
        process.stop()


def test_statistics_are_sampled_in_the_target_namespace(agent, netns):
    from dashboard.models import Sample
    wait_until(lambda: Sample.objects.count() >= 2, 10, "two samples")
    sample = Sample.objects.order_by("-taken").first()
    assert set(sample.interfaces) == {"eth1", "eth2"}
    assert sample.softirqs and all(len(v) == 2 for v in sample.softirqs.values())
    assert sample.seqadj is None  # the host kernel has no seqrand counters
    # the loss path, of the namespace's interfaces (and none of the host's)
    assert {key.partition("@")[2] for key in sample.loss} == {"", "eth1", "eth2"}
    assert {"nic.rx_missed@eth1", "nic.tx_dropped@eth2", "softnet.dropped",
            "conntrack.drop"} <= set(sample.loss)


@pytest.fixture
def troubled_agent(transactional_db, agent_config, monkeypatch):
    """The real agent with a periodic task that always fails and one that takes SLOW s."""
    monkeypatch.setenv("TUSK_AGENT_PLUGINS", "agent_tasks_for_tests")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    process = AgentProcess(agent_config).start()
    yield process
    process.stop()


def test_a_failing_and_a_slow_periodic_task_hold_up_nothing_else(troubled_agent,
                                                                  admin_client):
    from dashboard.models import Sample
    started = time.monotonic()
    ping = wait(queue.enqueue("agent.ping"), 5)
    assert ping.state == "succeeded"
    assert (ping.finished_at - ping.created_at).total_seconds() < 2, "dispatch was held up"
    beats = set()
    wait_until(lambda: beats.add(AgentHeartbeat.objects.get().seen_at) or len(beats) >= 3,
               3, "three heartbeats (sample_interval 0.5 s)")
    wait_until(lambda: Sample.objects.count() >= 3, 3, "three statistics samples")
    failing = wait_until(lambda: PeriodicState.objects.filter(name="test.failing",
                                                              runs__gte=3).first(),
                         3, "three runs of the failing task")
    assert failing.failures == failing.runs and failing.result is None
    assert failing.error == "RuntimeError: deliberate failure"
    # all of that while the slow task's first run was still sleeping
    assert time.monotonic() - started < SLOW
    assert PeriodicState.objects.get(name="test.slow").runs == 0
    slow = wait_until(lambda: PeriodicState.objects.filter(name="test.slow",
                                                           runs__gte=2).first(),
                      3 * SLOW, "two runs of the slow task")
    assert slow.duration >= SLOW and slow.error == "" and slow.result == {"slept": SLOW}
    assert slow.skipped >= SLOW / 0.2 - 2, "the overrun ticks were not skipped"
    assert PeriodicState.objects.get(name="agent.heartbeat").failures == 0
    assert all(state.runs for state in PeriodicState.objects.all())   # each recorded its runs
    page = admin_client.get("/jobs/").content.decode()
    row = re.search(r'<tr data-task="test.failing">.*?</tr>', page, re.S).group(0)
    assert "RuntimeError: deliberate failure" in row
    row = re.search(r'<tr data-task="test.slow">.*?</tr>', page, re.S).group(0)
    assert re.search(rf'class="duration">{SLOW}\.0\d\d s<', row), row


def test_periodic_tasks_keep_their_connection_and_do_not_wait_for_the_flush(troubled_agent):
    """A periodic task writes bookkeeping every few seconds: its connection lives as long
    as the agent (not CONN_MAX_AGE) and commits without waiting for the WAL's flush; a
    job's connection waits for it, as the web's does."""
    first = wait_until(lambda: PeriodicState.objects.filter(name="test.connection",
                                                            runs__gte=2).first(),
                       5, "two runs of the connection task")
    assert first.result["synchronous_commit"] == "off" and first.result["kept"]
    runs = first.runs
    later = wait_until(lambda: PeriodicState.objects.filter(name="test.connection",
                                                            runs__gte=runs + 3).first(),
                       5, "three more runs")
    assert later.result["pid"] == first.result["pid"], "the task's connection was replaced"
    job = wait(queue.enqueue("test.connection"), 5)
    assert job.state == "succeeded" and job.result["synchronous_commit"] == "on"
    assert job.result["pid"] != first.result["pid"]


def test_a_periodic_run_checks_its_connection_once(transactional_db, monkeypatch):
    """Each run checks its connection once (CONN_HEALTH_CHECKS: a SELECT 1) before the
    task's first query, and records the run on that connection; a run whose task broke
    its connection checks again before recording."""
    import threading
    from types import SimpleNamespace

    from django.db.backends.postgresql.base import DatabaseWrapper

    from jobs import periodic
    from jobs.registry import Task
    checks = []
    usable = DatabaseWrapper.is_usable
    monkeypatch.setattr(DatabaseWrapper, "is_usable",
                        lambda self: checks.append(1) or usable(self))
    PeriodicState.objects.create(name="test.queries")

    def query(agent):
        return PeriodicState.objects.filter(name="test.queries").count()

    def broken(agent):
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    def runs(function, times):
        task = Task("test.queries", function, 1)

        def run():
            from django.db import connection
            for _ in range(times):
                periodic.run_once(task, SimpleNamespace(id="test"))
            connection.close()
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    runs(query, 4)
    assert len(checks) == 3    # the first run opened the connection: nothing to check
    assert PeriodicState.objects.get(name="test.queries").runs == 4
    checks.clear()
    runs(broken, 2)
    state = PeriodicState.objects.get(name="test.queries")
    assert state.runs == 6 and state.failures == 2, "a broken connection lost a record"
    # each run checks after its task broke the connection, the second also before it
    assert len(checks) == 3


def test_polling_the_health_panel_creates_no_job_and_shows_the_agent_alive(agent,
                                                                            admin_client):
    for _ in range(3):
        page = admin_client.get("/dashboard/health/").content.decode()
    assert not Job.objects.exists()
    row = re.search(r'<tr data-check="agent">.*?</tr>', page, re.S).group(0)
    assert "badge ok" in row and "taking jobs" in row, row
    beat = AgentHeartbeat.objects.get(agent__contains=f":{agent.proc.pid}:")
    wait_until(lambda: AgentHeartbeat.objects.get(pk=beat.pk).seen_at > beat.seen_at, 3,
               "the heartbeat kept current by the agent")


def test_the_health_panel_says_when_the_agent_stopped_beating(agent, admin_client):
    agent.kill()
    AgentHeartbeat.objects.update(seen_at=timezone.now() - timedelta(seconds=60))
    page = admin_client.get("/dashboard/health/").content.decode()
    row = re.search(r'<tr data-check="agent">.*?</tr>', page, re.S).group(0)
    assert "badge bad" in row and "no heartbeat for 60 s" in row, row
    assert not Job.objects.exists()


def test_a_job_the_agent_runs_notifies_nothing_but_its_own_queueing(agent):
    """NOTIFY is the web process's word to the agent; nobody listens for the agent's."""
    db = settings.DATABASES["default"]
    listener = psycopg2.connect(dbname=db["NAME"], user=db["USER"], host=db["HOST"] or None,
                                port=db["PORT"] or None)
    listener.autocommit = True
    try:
        with listener.cursor() as cursor:
            cursor.execute("LISTEN tusk_job_events; LISTEN tusk_jobs")
        job = wait(queue.enqueue("agent.ping"))
        assert job.state == "succeeded"
        listener.poll()
        heard = [(n.channel, n.payload) for n in listener.notifies]
    finally:
        listener.close()
    assert heard == [("tusk_jobs", str(job.pk))]
