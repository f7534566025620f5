"""Periodic tasks that go wrong, loaded into the real agent by tests/web/test_agent.py
through TUSK_AGENT_PLUGINS: one fails on every run, one takes SLOW seconds. Neither may
stop or delay the heartbeat, the other tasks or job dispatch. And a job kind whose
`abandoned` hook takes SETTLE seconds to settle what a dead agent left."""
import time

from jobs.registry import handler, periodic

SETTLE = 1   # seconds

SLOW = 4   # seconds


@periodic("test.failing", 0.2)
def failing(agent):
    raise RuntimeError("deliberate failure")


@periodic("test.slow", 0.2)
def slow(agent):
    time.sleep(SLOW)
    return {"slept": SLOW}


def settle(job, config):
    from jobs.models import PeriodicState
    time.sleep(SETTLE)
    PeriodicState.objects.create(name=f"test.settled.{job.pk}")


@handler("test.settles", "Settles slowly", long_running=True, abandoned=settle)
def settles(run):
    return {}
