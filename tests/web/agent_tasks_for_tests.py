"""Periodic tasks that go wrong, loaded into the real agent by tests/web/test_agent.py
through TUSK_AGENT_PLUGINS: one fails on every run, one takes SLOW seconds. Neither may
stop or delay the heartbeat, the other tasks or job dispatch."""
import time

from jobs.registry import periodic

SLOW = 4   # seconds


@periodic("test.failing", 0.2)
def failing(agent):
    raise RuntimeError("deliberate failure")


@periodic("test.slow", 0.2)
def slow(agent):
    time.sleep(SLOW)
    return {"slept": SLOW}
