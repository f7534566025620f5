"""What the dashboard's agent tasks keep for the health panel (tusklib/contracts.py)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class WebCheck:
    """GET [agent] web_url as a client would (agent_jobs.check_web); every field None
    when the agent has no web_url."""

    url: str | None = None
    at: float | None = None        # Unix time of the check
    status: int | None = None      # the HTTP status; None: no answer
    ms: float | None = None
    error: str | None = None
    body: str | None = None        # the first 200 characters
