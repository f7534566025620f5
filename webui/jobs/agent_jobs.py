"""The agent's own work: its heartbeat, which the dashboard's health panel reads, and
ping, a job that shows the agent takes and answers jobs (tests, the CLI)."""
import time

from django.utils import timezone

from tusklib import contracts

from .models import AgentHeartbeat
from .registry import handler, periodic

HEARTBEAT = "agent.heartbeat"   # the health panel reads its interval too


@periodic(HEARTBEAT, lambda config: config.sample_interval, contract=contracts.NOTHING)
def heartbeat(agent):
    AgentHeartbeat.objects.filter(agent=agent.id).update(seen_at=timezone.now())


@handler("agent.ping", "Ping the agent", retry_safe=True)
def ping(run):
    return {"agent": run.agent.id, "time": time.time()}
