"""tests/bench/paired.py: the statistics make bench-seqrand decides its rounds and its
verdicts with (issue 21). The benchmark itself is no test; what it concludes from its
numbers is tested here, on numbers whose answer is known."""
import math
import random
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import paired  # noqa: E402


def rounds(ratios, condition=paired.NO_LOSS, config="seqrand", base="conntrack only"):
    """results.json records of rounds whose config/base throughput ratio is each of ratios."""
    records = []
    for n, ratio in enumerate(ratios):
        records.append({"round": n, "condition": condition, "config": base,
                        "bits_per_second": 7e9})
        records.append({"round": n, "condition": condition, "config": config,
                        "bits_per_second": 7e9 * ratio})
    return records


def test_the_summary_is_the_geometric_mean_inside_its_interval():
    ratios = [0.95, 1.0, 1.02, 0.99, 1.05, 0.97]
    mean, low, high = paired.mean_ci(ratios)
    assert mean == pytest.approx(math.exp(statistics.fmean(map(math.log, ratios))))
    assert min(ratios) <= low < mean < high <= max(ratios)


def test_a_ratio_and_its_inverse_summarise_to_inverses():
    ratios = [0.9, 1.1, 0.97, 1.3, 0.88, 1.01, 0.93]
    mean, low, high = paired.mean_ci(ratios)
    inverse = paired.mean_ci([1 / r for r in ratios])
    assert inverse == pytest.approx((1 / mean, 1 / high, 1 / low), rel=1e-3)


def test_the_same_results_give_the_same_interval():
    ratios = [0.96, 1.01, 0.99, 1.03, 0.98]
    assert paired.mean_ci(ratios) == paired.mean_ci(list(ratios))


def test_the_interval_narrows_with_rounds_and_the_margin_is_resolved_then():
    """Ratios of 0.99 with 2.5 % noise per round (what the VM measured): 8 rounds leave
    the 0.02 margin unresolved, 40 resolve it, as the guest's loop asks."""
    rng = random.Random(1)
    noisy = [0.99 * math.exp(rng.gauss(0, 0.025)) for _ in range(40)]
    few, many = paired.mean_ci(noisy[:8]), paired.mean_ci(noisy)
    assert few[2] - few[1] > many[2] - many[1]
    goal = ("seqrand", paired.NO_LOSS, "conntrack only")
    left = [(config, paired.NO_LOSS, base) for config, base, _ in
            paired.unresolved(rounds(noisy[:8]), paired.NO_LOSS)]
    assert goal in left
    left = [(config, paired.NO_LOSS, base) for config, base, _ in
            paired.unresolved(rounds(noisy), paired.NO_LOSS)]
    assert goal not in left


def test_the_geometric_mean_is_narrower_than_the_median_on_the_same_rounds():
    rng = random.Random(2)
    noisy = [math.exp(rng.gauss(0, 0.03)) for _ in range(24)]
    _, low, high = paired.mean_ci(noisy)
    _, median_low, median_high = paired.median_ci(noisy)
    assert high - low < median_high - median_low


def test_a_round_that_carried_nothing_falls_back_to_the_median():
    assert paired.mean_ci([0.0, 1.0, 1.0]) == paired.median_ci([0.0, 1.0, 1.0])


def test_interval_pairs_rounds_and_says_nan_without_a_pair():
    results = rounds([0.9, 1.1])
    assert paired.interval(results, paired.NO_LOSS, "seqrand", "conntrack only")[0] == \
        pytest.approx(math.sqrt(0.9 * 1.1))
    assert all(math.isnan(v) for v in paired.interval(results, paired.LOSS, "seqrand",
                                                      "conntrack only"))
