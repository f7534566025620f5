"""make test runs every tier in one pytest session, which imports test modules by their
base name: two tiers with a test_x.py each fail collection. Caught here, early."""
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name():
    places = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "artifacts" not in path.parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in places.items() if len(paths) > 1} == {}
