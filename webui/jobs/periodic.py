"""What the agent does every sample_interval: its heartbeat, the dashboard's
statistics sample and the policy store's state."""
import time
import urllib.error
import urllib.request
from datetime import timedelta

from django.utils import timezone

from .models import AgentHeartbeat, Job

# The dashboard's health check sends a ping every 10 s while someone watches it;
# answered pings older than this are deleted so they do not pile up.
PING_RETENTION = 3600


def capabilities(config):
    """What the target's kernel offers (seqrand helpers, flowtables), for the UI."""
    from policy.core import capabilities as caps
    from policy.core.target import Target
    try:
        return caps.report(Target(config.netns or None))
    except Exception as exc:  # a missing nft must not keep the agent from starting
        return {"error": str(exc)}


def run_all(config, agent_id):
    from dashboard import sampler
    from policy import sync
    AgentHeartbeat.objects.filter(agent=agent_id).update(seen_at=timezone.now(),
                                                         web_check=check_web(config.web_url))
    sampler.sample(config)
    Job.objects.filter(kind="agent.ping", state=Job.State.SUCCEEDED,
                       finished_at__lt=timezone.now() - timedelta(seconds=PING_RETENTION)).delete()
    sync.sync(config, periodic=True)


def check_web(url):
    """GET url as a client would; the dashboard shows the answer."""
    if not url:
        return {}
    started = time.monotonic()
    found = {"url": url, "at": time.time()}
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            found.update(status=response.status, body=response.read(200).decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        found.update(status=exc.code, error=str(exc))
    except (urllib.error.URLError, OSError) as exc:
        found.update(status=None, error=str(getattr(exc, "reason", exc)))
    found["ms"] = round((time.monotonic() - started) * 1000, 1)
    return found
