"""The metrics app's work in the agent: the ruleset's named counters, read every
sample_interval like the dashboard's statistics (which /metrics reads as they are)."""
from jobs.registry import periodic

from . import counters

COUNTERS = "metrics.counters"


@periodic(COUNTERS, lambda config: config.sample_interval)
def read_counters(agent):
    return counters.read(agent.config)
