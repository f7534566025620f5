"""tusklib/contracts.py: a stored row reads back as its contract's dataclass or as nothing,
and a task's result that breaks its contract is refused naming the field."""
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from flows.contracts import SysctlChange
from ha.contracts import HaStatus
from policy.contracts import FastpathDevices
from system.agent_jobs import SlotsSeen
from tusklib import contracts


@dataclass(frozen=True)
class Inner:
    state: str
    count: int = 0


@dataclass(frozen=True)
class Outer:
    at: float
    flag: bool
    names: list[str]
    table: dict[str, int]
    inner: Inner | None
    anything: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


GOOD = {"at": 1, "flag": False, "names": ["a"], "table": {"x": 1},
        "inner": {"state": "ok"}, "unknown": "ignored"}


def test_a_good_row_reads_as_the_dataclass():
    found = contracts.read(Outer, GOOD)
    assert found == Outer(at=1.0, flag=False, names=["a"], table={"x": 1},
                          inner=Inner("ok", 0))
    assert isinstance(found.at, float)


@pytest.mark.parametrize("change, where", [
    ({"at": True}, "at"), ({"at": math.nan}, "at"), ({"at": "now"}, "at"),
    ({"flag": 0}, "flag"), ({"names": "a"}, "names"), ({"names": [1]}, "names[0]"),
    ({"table": {"x": 1.5}}, "table.x"), ({"table": {"x": True}}, "table.x"),
    ({"inner": {"count": 1}}, "inner.state"), ({"inner": []}, "inner"),
])
def test_a_row_of_another_shape_reads_as_nothing_and_check_names_the_field(change, where):
    row = {**GOOD, **change}
    assert contracts.read(Outer, row) is None
    with pytest.raises(contracts.ContractError) as raised:
        contracts.check(Outer, row)
    assert raised.value.path == where


def test_missing_fields_and_rows_that_are_no_table():
    assert contracts.read(Outer, {k: v for k, v in GOOD.items() if k != "flag"}) is None
    for row in (None, [], "x", 3):
        assert contracts.read(Outer, row) is None


def test_check_takes_the_dataclass_itself():
    value = contracts.read(Outer, GOOD)
    assert contracts.check(Outer, value) == value
    assert contracts.check(Outer, dataclasses.asdict(value)) == value


def test_a_type_no_contract_may_use_is_a_programming_error():
    @dataclass(frozen=True)
    class Bad:
        when: set

    with pytest.raises(TypeError):
        contracts.check(Bad, {"when": []})


def test_the_ha_status_contract_uses_only_types_it_can_check():
    row = {"role": None, "running": {}, "stats": None, "has_key": False,
           "listener_error": None, "peer": {"error": "no answer"}, "peer_address": None,
           "config_sync": None, "tuning_sync": None, "at": 0}
    assert contracts.check(HaStatus, row).peer.error == "no answer"


def test_a_task_keeps_its_contracts_fields_and_fails_on_a_result_that_breaks_it():
    """jobs/periodic.py stores task.result(...): a failure there is the task's own,
    recorded on the Jobs page, and the row keeps its last good result."""
    from jobs.registry import Task
    task = Task("test.task", None, 1, Inner)
    assert task.result({"state": "ok", "more": 1}) == {"state": "ok", "count": 0}
    with pytest.raises(contracts.ContractError, match="state: is missing"):
        task.result({"count": 1})
    assert Task("test.plain", None, 1).result({"any": "thing"}) == {"any": "thing"}


def test_every_task_of_the_agent_keeps_a_contract():
    """Everything the agent keeps in PeriodicState has a contract (issue 37, item 5): a
    task that keeps no result says so (contracts.NOTHING)."""
    from jobs import registry
    shipped = [task for task in registry.periodic_tasks() + registry.start_hooks()
               if task.function.__module__.endswith(".agent_jobs")]   # not tests' own
    assert len(shipped) >= 15
    without = [task.name for task in shipped if task.contract is None]
    assert without == [], without


@pytest.mark.parametrize(("contract", "value", "kept"), [
    (contracts.NOTHING, None, None),
    (SlotsSeen | None, None, None),
    (SlotsSeen | None, {"grubenv": "0123abcd", "more": 1}, {"grubenv": "0123abcd"}),
    (dict[str, SysctlChange], {"net.netfilter.nf_conntrack_acct": {"was": "0", "now": "1"}},
     {"net.netfilter.nf_conntrack_acct": {"was": "0", "now": "1"}}),
    (FastpathDevices, {"added": ["eth1.100"], "missing": []},
     {"added": ["eth1.100"], "missing": []}),
])
def test_the_small_reports_keep_their_fields(contract, value, kept):
    assert contracts.stored(contract, value) == kept


def test_a_task_that_keeps_nothing_may_not_start_keeping_something():
    with pytest.raises(contracts.ContractError, match="must be empty"):
        contracts.stored(contracts.NOTHING, {"state": "x"})
