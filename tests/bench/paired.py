"""The statistics of make bench-seqrand, shared by the host's report
(tests/bench/bench_seqrand.py) and the guest's loop (tests/vm/guest/scenarios/
bench_seqrand.py), which uses them to decide when it has run enough rounds.

A goal is a ratio of two configurations' throughput in the same condition. Each round
runs every configuration once under the same conditions (interleaved, and with loss the
same seeded loss pattern), so the ratio is taken per round (paired) and summarised by its
geometric mean (the mean of the log-ratios: a ratio and its inverse average to inverses,
and every round counts, where a median uses the middle one or two - on the same rounds
its interval was 10-25 % wider) with a 95 % bootstrap interval. The run resolves a goal
when that interval is narrower than the goal's margin (1 - goal): then the interval
cannot straddle both "well above the goal" and "well below it".
"""
import math
import random
import statistics

NO_LOSS, LOSS = "no loss", "1% loss, 20 ms RTT"
FAST, FAST_PLAIN = "seqrand, fast path", "fast path"
# (configuration, condition, base configuration, goal, the base as the report names it)
GOALS = (
    ("seqrand", NO_LOSS, "conntrack only", 0.98, "conntrack only"),
    ("seqrand", LOSS, "plain forwarding", 0.95, "plain forwarding"),
    (FAST, NO_LOSS, FAST_PLAIN, 0.98, "the fast path without seqrand"),
    (FAST, NO_LOSS, "plain forwarding", 0.97, "plain forwarding"),
    (FAST, LOSS, "plain forwarding", 0.95, "plain forwarding"))


def mean_ci(ratios, resamples=2000, level=0.95):
    """The geometric mean of ratios and a bootstrap percentile interval around it (fixed
    seed: the same results give the same interval). With few ratios it is wide, and
    says so. A round whose flow carried nothing has no logarithm: then the median."""
    if min(ratios) <= 0:
        return median_ci(ratios, resamples, level)
    logs = [math.log(r) for r in ratios]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs)))
                   for _ in range(resamples))
    cut = int((1 - level) / 2 * resamples)
    return tuple(math.exp(v) for v in (statistics.fmean(logs), means[cut], means[-cut - 1]))


def median_ci(values, resamples=2000, level=0.95):
    """The median of values and a bootstrap percentile interval around it: for ratios
    that can be 0 (retransmissions), which have no logarithm."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    cut = int((1 - level) / 2 * resamples)
    return statistics.median(values), medians[cut], medians[-cut - 1]


def throughput(record):
    return record["bits_per_second"]


def paired(results, condition, config, base, measure=throughput):
    """Per-round ratios measure(config) / measure(base) in condition."""
    by = {(r["round"], r["condition"], r["config"]): r for r in results}
    ratios = []
    for (n, cond, conf), record in sorted(by.items()):
        other = by.get((n, cond, base))
        if cond == condition and conf == config and other and measure(other):
            ratios.append(measure(record) / measure(other))
    return ratios


def interval(results, condition, config, base, measure=throughput, summary=mean_ci):
    """(geometric mean, low, high) of the paired ratio (summary=median_ci: the median),
    or NaNs without a pair."""
    ratios = paired(results, condition, config, base, measure)
    return summary(ratios) if ratios else (math.nan, math.nan, math.nan)


def unresolved(results, condition):
    """The goals of condition whose interval is still wider than their margin."""
    left = []
    for config, cond, base, goal, _ in GOALS:
        if cond != condition:
            continue
        _, low, high = interval(results, cond, config, base)
        if not high - low <= 1 - goal:      # NaN (nothing measured yet) counts as wide
            left.append((config, base, goal))
    return left
