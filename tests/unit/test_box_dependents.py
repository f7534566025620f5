"""box/dependents.py: what follows which domain is data, the graph is acyclic, and the
appliers the appliance runs (box/appliers.py, and the watchdog's DOMAINS) follow exactly
what the data says."""
import importlib

import pytest

from box import appliers, dependents
from tusklib import commit


def test_the_graph_is_acyclic_and_each_part_comes_after_what_it_follows():
    order = dependents.order()
    assert set(dependents.DOMAINS) <= set(order)
    for part, follows in dependents.FOLLOWS.items():
        for source in follows:
            assert source in order, f"{part} follows {source}, which is not a domain or part"
            assert order.index(source) < order.index(part)


def test_a_cycle_is_refused_naming_it():
    with pytest.raises(ValueError, match="cycle: .*a.*b"):
        dependents.order({"a": ("b",), "b": ("a",)})


def test_followers_go_through_parts_that_follow_parts():
    follows = {"hosttable": ("network", "ha"), "report": ("hosttable",)}
    assert dependents.followers("network", follows) == ["hosttable", "report"]
    assert dependents.followers("policy", follows) == []


def test_each_applier_follows_what_the_data_says():
    assert list(appliers.NetworkApplier.follows) == dependents.followers("network")
    assert list(appliers.HaApplier.follows) == dependents.followers("ha")
    assert dependents.followers("policy") == []


def test_the_watchdog_starts_the_appliers_with_their_followers():
    """A rollback the watchdog makes must put the followers back too: DOMAINS names the
    box's appliers for every domain something follows."""
    for domain, where in commit.DOMAINS.items():
        module, name = where.split(":")
        cls = getattr(importlib.import_module(module), name)
        assert list(getattr(cls, "follows", ())) == dependents.followers(domain), domain
