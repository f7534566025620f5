"""The queue the scenarios' boots share (guest/scenario_queue.py), played on the host by
processes that take from one directory at the same time, as two guests' runners do
through their 9p shares: every scenario is taken exactly once, each process takes them
in the queue's order, and a process that finds the queue empty takes nothing."""
import multiprocessing

from guest import scenario_queue

SCENARIOS = [f"scenario-{n}" for n in range(200)]


def taker(directory, results):
    results.put(list(scenario_queue.take(directory)))


def test_two_boots_taking_at_once_take_each_scenario_once(tmp_path):
    scenario_queue.fill(tmp_path, SCENARIOS)
    assert scenario_queue.left(tmp_path) == SCENARIOS
    results = multiprocessing.Queue()
    takers = [multiprocessing.Process(target=taker, args=(tmp_path, results))
              for _ in range(2)]
    for process in takers:
        process.start()
    taken = [results.get(timeout=60) for _ in takers]
    for process in takers:
        process.join(60)
    assert sorted(taken[0] + taken[1]) == sorted(SCENARIOS)
    for one in taken:
        assert one == sorted(one, key=SCENARIOS.index)
    assert scenario_queue.left(tmp_path) == []
    assert list(scenario_queue.take(tmp_path)) == []


def test_a_new_queue_forgets_the_last_one(tmp_path):
    scenario_queue.fill(tmp_path, ["a-b", "c"])
    assert next(scenario_queue.take(tmp_path)) == "a-b"
    scenario_queue.fill(tmp_path, ["d"])
    assert scenario_queue.left(tmp_path) == ["d"]
