"""tusk-tune's engine: plain Python, no Django. detect (hardware.py) -> plan
(planner.py, from a profile: profile.py) -> apply / verify / rollback (applier.py),
all through a Host (host.py): the running system, or a fake tree in tests."""
