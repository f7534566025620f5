"""Deadlines that follow the test VM's measured speed (issue 37, item 7): the scale the
guest's runner derives from its calibration, what every wait takes from it, and the
appliance's console waits that go on while the console speaks. Pure: no VM is booted
(here in the VM tier, whose path has appliance_vm and the guest's modules)."""
import threading
import time
import types

import appliance_vm
import kit
import pytest
from guest import speed


@pytest.mark.parametrize(("seconds", "scale"), [
    (0.2, 1.0),                       # faster than the reference: never less time
    (speed.REFERENCE_SECONDS, 1.0),
    (speed.REFERENCE_SECONDS * 2.5, 2.5),
    (speed.REFERENCE_SECONDS * 40, speed.MAX_SCALE),   # a hung scenario is still killed
])
def test_the_scale_is_the_slowness_kept_between_one_and_its_maximum(seconds, scale):
    assert speed.scale(seconds) == scale


def test_the_workload_is_deterministic():
    assert speed.workload() == speed.workload()


@pytest.mark.parametrize(("value", "scale"), [(None, 1.0), ("2.5", 2.5), ("0.5", 1.0),
                                              ("9", 1.0), ("fast", 1.0), ("nan", 1.0)])
def test_waits_take_the_scale_from_the_environment(monkeypatch, value, scale):
    if value is None:
        monkeypatch.delenv("TUSK_TIME_SCALE", raising=False)
    else:
        monkeypatch.setenv("TUSK_TIME_SCALE", value)
    assert kit.time_scale() == scale


def test_a_wait_is_stretched_by_the_scale(monkeypatch):
    monkeypatch.setenv("TUSK_TIME_SCALE", "3")
    with pytest.raises(AssertionError, match=r"not within 0\.3"):
        kit.wait_until(lambda: False, 0.1, "never")


def console(quiet_for):
    """What overdue() reads of an appliance: when its console last printed."""
    return types.SimpleNamespace(lock=threading.Lock(),
                                 last_output=time.monotonic() - quiet_for)


def test_a_console_wait_goes_on_while_the_console_prints():
    started = time.monotonic() - 100          # a wait of 60 s, begun 100 s ago
    overdue = appliance_vm.Appliance.overdue
    assert not overdue(console(quiet_for=1), started, 60)         # still booting
    assert overdue(console(quiet_for=appliance_vm.QUIET_SECONDS + 1), started, 60)
    assert not overdue(console(quiet_for=500), time.monotonic(), 60)   # within its time
    long_ago = time.monotonic() - 60 * appliance_vm.MAX_STRETCH - 1
    assert overdue(console(quiet_for=0), long_ago, 60)            # printing, but too long
