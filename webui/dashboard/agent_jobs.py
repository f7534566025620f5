"""The dashboard's periodic work in the agent: a statistics sample of the target, and
the web UI checked as a client would use it (the health panel shows both)."""
import time
import urllib.error
import urllib.request

from jobs.registry import periodic
from tusklib import contracts

from . import sampler
from .contracts import WebCheck

WEB_CHECK = "dashboard.web_check"
WEB_TIMEOUT = 5   # seconds


def _every_sample(config):
    return config.sample_interval


@periodic("dashboard.sample", _every_sample, contract=contracts.NOTHING)
def sample(agent):
    sampler.sample(agent.config)


@periodic(WEB_CHECK, _every_sample, contract=WebCheck)
def check_web(agent):
    """GET [agent] web_url as a client would: {"url", "status", "ms", "error", "at"}; {}
    when there is no web_url."""
    url = agent.config.web_url
    if not url:
        return {}
    started = time.monotonic()
    found = {"url": url, "at": time.time()}
    try:
        with urllib.request.urlopen(url, timeout=WEB_TIMEOUT) as response:
            found.update(status=response.status, body=response.read(200).decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        found.update(status=exc.code, error=str(exc))
    except (urllib.error.URLError, OSError) as exc:
        found.update(status=None, error=str(getattr(exc, "reason", exc)))
    found["ms"] = round((time.monotonic() - started) * 1000, 1)
    return found
