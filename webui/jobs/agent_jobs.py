"""The agent's own job: ping, which the dashboard's health check uses to see that
the agent answers (not merely that its process exists)."""
import time

from .registry import handler


@handler("agent.ping", "Ping the agent", retry_safe=True)
def ping(run):
    return {"agent": run.agent.id, "time": time.time()}
