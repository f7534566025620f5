"""The tests' kit (tests/kit.py): wait_until returns as soon as the condition holds, and
otherwise fails naming what it waited for and what it saw last."""
import pytest
from kit import wait_until


def test_wait_until_returns_the_first_true_value():
    answers = iter([None, 0, "", "ready", "later"])
    assert wait_until(lambda: next(answers), 5, "the answer") == "ready"


def test_wait_until_fails_naming_what_and_the_last_value():
    asked = []

    def empty_queue():
        asked.append(1)
        return []
    with pytest.raises(AssertionError, match=r"^the queue: not within 0.3 s \(last: \[\]\)$"):
        wait_until(empty_queue, 0.3, "the queue")
    assert len(asked) > 1                              # asked again until the time was up
    count = iter(range(100))
    with pytest.raises(AssertionError, match=r"^told at the end: 2:"):
        wait_until(lambda: False, 0.2, lambda: f"told at the end: {next(count) + 2}")


def test_an_error_in_the_predicate_ends_the_wait_at_once():
    asked = []

    def dead():
        asked.append(1)
        raise AssertionError("the process died")
    with pytest.raises(AssertionError, match="the process died"):
        wait_until(dead, 30, "a heartbeat")
    assert len(asked) == 1
