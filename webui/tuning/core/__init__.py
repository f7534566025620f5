"""tusk-tune's engine: plain Python, no Django. detect (hardware.py) -> plan (planner.py,
from a profile: profile.py; the plan as data and text: report.py) -> apply / verify /
rollback (applier.py), all through a Host (host.py): the running system, or a fake
tree in tests."""
