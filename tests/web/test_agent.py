"""The job queue and the real agent (webui/bin/tusk-agent, its own process) against the
test database, applying policies to a network namespace of the test's own."""
import fcntl
import subprocess
import time

import pytest

from jobs import queue
from jobs.models import Job
from kit import wait_until
from policy.models import Revision, TargetState
from tuskweb import AgentProcess, wait

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


def test_statistics_are_sampled_in_the_target_namespace(agent, netns):
    from dashboard.models import Sample
    wait_until(lambda: Sample.objects.count() >= 2, 10, "two samples")
    sample = Sample.objects.order_by("-taken").first()
    assert set(sample.interfaces) == {"eth1", "eth2"}
    assert sample.softirqs and all(len(v) == 2 for v in sample.softirqs.values())
    assert sample.seqadj is None  # the host kernel has no seqrand counters


def test_old_answered_pings_are_pruned(agent):
    from datetime import timedelta

    from django.utils import timezone
    old = Job.objects.create(kind="agent.ping", state="succeeded",
                             finished_at=timezone.now() - timedelta(hours=2))
    recent = wait(queue.enqueue("agent.ping"))
    deadline = time.monotonic() + 10
    while Job.objects.filter(pk=old.pk).exists():
        assert time.monotonic() < deadline, "the old ping was kept"
        time.sleep(0.2)
    assert Job.objects.filter(pk=recent.pk).exists()
