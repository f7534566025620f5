"""The health panel calls the agent's report stale after what the agent's own interval
for it allows: three runs of the task as the agent registered it (jobs_periodicstate's
interval), never less than the panel's floor. A box sampling every 10 s ([agent]
sample_interval, as the appliance's tests set under TCG) runs network.routing every
50 s: a fixed 30 s called its routing unread between two good reports."""
import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.health import AGENT_STALE, stale_after
from jobs.models import AgentHeartbeat, PeriodicState

pytestmark = pytest.mark.django_db


def row(page, name):
    return re.search(rf'<tr data-check="{name}">.*?</tr>', page, re.S).group(0)


@pytest.mark.parametrize(("interval", "after"), [
    (None, AGENT_STALE * 2),        # a start-up hook's row, or none: the floor
    (2, AGENT_STALE * 2),
    (10, AGENT_STALE * 2),
    (50, 150),
])
def test_a_report_is_stale_after_three_of_its_tasks_intervals(interval, after):
    PeriodicState.objects.create(name="network.routing", interval=interval)
    assert stale_after("network.routing") == after
    assert stale_after("no.such.task") == AGENT_STALE * 2
    assert stale_after("no.such.task", AGENT_STALE) == AGENT_STALE


@pytest.mark.parametrize(("interval", "silent", "alive"), [
    (2, 10, True), (2, 20, False),       # the image's default: 15 s as before
    (10, 20, True), (10, 40, False),     # every 10 s: two missed beats are not silence
])
def test_the_agent_counts_as_silent_after_three_missed_heartbeats(admin_client, interval,
                                                                  silent, alive):
    PeriodicState.objects.create(name="agent.heartbeat", interval=interval)
    now = timezone.now()
    AgentHeartbeat.objects.create(agent="host:1:x", started_at=now - timedelta(hours=1),
                                  seen_at=now - timedelta(seconds=silent))
    found = row(admin_client.get("/dashboard/health/").content.decode(), "agent")
    assert ("badge ok" in found) is alive, found
    assert ("no heartbeat for" in found) is not alive, found


@pytest.mark.parametrize(("interval", "age", "ok"), [(2, 20, True), (2, 40, False),
                                                     (20, 45, True), (20, 70, False)])
def test_the_web_check_is_stale_after_three_of_its_intervals(admin_client, interval, age,
                                                            ok):
    PeriodicState.objects.create(name="dashboard.web_check", interval=interval, result={
        "url": "http://127.0.0.1:8080/healthz/", "status": 200, "ms": 3.0, "error": "",
        "at": time.time() - age})
    found = row(admin_client.get("/dashboard/health/").content.decode(), "web")
    assert ("badge ok" in found) is ok, found
