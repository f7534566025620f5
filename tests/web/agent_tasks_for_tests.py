"""Periodic tasks that go wrong, loaded into the real agent by tests/web/test_agent.py
through TUSK_AGENT_PLUGINS: one fails on every run, one takes SLOW seconds. Neither may
stop or delay the heartbeat, the other tasks or job dispatch. A job kind whose
`abandoned` hook takes SETTLE seconds to settle what a dead agent left. And a task and a
job kind that say what their database connection is like (connection_facts)."""
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


def connection_facts():
    """This thread's connection: its server process, whether a commit waits for the
    WAL's flush, whether Django will close it after CONN_MAX_AGE."""
    from django.db import connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), current_setting('synchronous_commit')")
        pid, synchronous = cursor.fetchone()
    return {"pid": pid, "synchronous_commit": synchronous,
            "kept": connection.close_at is None}


@periodic("test.connection", 0.2)
def periodic_connection(agent):
    return connection_facts()


@handler("test.connection", "Says what its connection is like", retry_safe=True)
def job_connection(run):
    return connection_facts()


def settle(job, config):
    from jobs.models import PeriodicState
    time.sleep(SETTLE)
    PeriodicState.objects.create(name=f"test.settled.{job.pk}")


@handler("test.settles", "Settles slowly", long_running=True, abandoned=settle)
def settles(run):
    return {}
