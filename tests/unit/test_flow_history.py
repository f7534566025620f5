"""A tracked flow's rate over its life (flows/core/sampler.py History): at most HISTORY
points whatever its length, each the mean of the samples it stands for. Plain Python."""
from flows.core.sampler import HISTORY, History


def test_a_short_flow_keeps_every_sample():
    history = History()
    for rate in (1, 2, 3):
        history.add(rate)
    assert history.as_list() == [1, 2, 3]


def test_a_long_flow_is_halved_in_resolution_not_cut():
    history = History()
    samples = list(range(1000))
    for rate in samples:
        history.add(rate)
    points = history.as_list()
    assert HISTORY // 2 <= len(points) <= HISTORY
    # the whole life is there: the first point is early, the last one late
    assert points[0] < 20 and points[-1] > 900
    assert points == sorted(points)
