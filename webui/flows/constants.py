"""The Flows page's limits, shared by the settings model, its form and the views:
(lowest, highest, default). The capture's length is the job's own check
(core/flowref.py CAPTURE_SECONDS)."""
from .core.sampler import STORED

ELEPHANT_MBPS = (1, 10_000_000, 1000)   # Mbit/s (up to 10 Tbit/s) above which a flow stands out
ROWS = (5, STORED, 20)                  # flows listed: the agent keeps STORED
