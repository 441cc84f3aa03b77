"""The capacity search on a synthetic server with a known SLO edge: each level's samples come from a scripted
latency curve (e2e grows as the rate nears the server's saturation), so the true edge is known and the search's
answer and interval can be checked against it over many seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sizing.loadtest.capacity import CapacitySearch
from sizing.loadtest.confidence import check_target, level_verdict, quantile_ci, quantile_ci_ranks
from sizing.loadtest.metrics import Distribution, StepResult, check_slo

#: The scripted server: e2e of a request at arrival rate r is lognormal around BASE_S / (1 - r / SATURATION),
#: with SIGMA; the SLO is e2e p95 <= LIMIT_S.
BASE_S, SATURATION, SIGMA, LIMIT_S = 1.0, 12.0, 0.25, 2.5
#: Requests one window measures (a 20 s window at ~10 req/s), and the most windows a level grows to while its
#: verdict is unsure (as the load test's `window_cap_s` in a capacity search: 4 windows).
PER_LEVEL = 200
MAX_WINDOWS = 4


def true_edge() -> float:
    # p95 of the lognormal: median * exp(1.645 sigma); solve median(r) * exp(1.645 SIGMA) = LIMIT_S
    median_at_edge = LIMIT_S / math.exp(1.6449 * SIGMA)
    return SATURATION * (1 - BASE_S / median_at_edge)


def level(rate: float, step: int, rng: np.random.Generator) -> StepResult:
    median = BASE_S / max(1e-6, 1 - rate / SATURATION)
    e2e = rng.lognormal(math.log(median), SIGMA, PER_LEVEL)
    # the level runs on, a window at a time, while its verdict is unsure
    while (
        len(e2e) < PER_LEVEL * MAX_WINDOWS
        and check_target(list(e2e), "e2e_s", "p95", LIMIT_S).verdict == "unsure"
    ):
        e2e = np.concatenate([e2e, rng.lognormal(math.log(median), SIGMA, PER_LEVEL)])
    result = StepResult(
        step=step, target={"rate_rps": rate}, started_at=0.0, duration_s=len(e2e) / rate, warmup_s=2.0,
        requests=len(e2e),
        errors={}, ttft_ms=Distribution(), tpot_ms=Distribution(), itl_ms=Distribution(),
        e2e_s=Distribution(p95=float(np.percentile(e2e, 95)), count=len(e2e)), input_tokens=None,
        output_tokens=None, requests_per_s=rate, output_tokens_per_s=0.0,
    )  # fmt: skip
    result = check_slo(result, [("e2e_s", "p95", LIMIT_S)])
    checks = [check_target(list(e2e), "e2e_s", "p95", LIMIT_S)]
    return result.model_copy(update={"checks": checks, "capacity_verdict": level_verdict(checks)})


def search(start: float, seed: int):
    rng = np.random.default_rng(seed)
    plan = CapacitySearch(start)
    history: list[StepResult] = []
    while (rate := plan.next_level(history)) is not None:
        history.append(level(rate, len(history), rng))
    return plan.estimate(history), history


@pytest.mark.parametrize("start_share", [0.5, 0.7, 1.0, 1.3, 2.0])
def test_the_edge_is_found_within_5_percent_and_its_interval_covers_it_in_90_percent_of_seeds(start_share):
    # GIVEN a server whose SLO edge is known, and a prediction from half to twice the truth
    edge = true_edge()
    found, covered, levels = 0, 0, []
    seeds = range(40)
    for seed in seeds:
        # WHEN the capacity is searched from the prediction
        est, history = search(edge * start_share, seed)
        levels.append(len(history))
        # THEN the answer is within +/-5% of the edge, and the interval (confident verdicts) holds the edge
        assert est.capacity_rps is not None
        found += abs(est.capacity_rps / edge - 1) <= 0.05
        lo = est.low_rps if est.low_rps is not None else 0.0
        hi = est.high_rps if est.high_rps is not None else math.inf
        covered += lo <= edge <= hi
    # (the line through every level's reading puts 99-100% of 200 seeds there; the bracket's middle 92-95%)
    assert found / len(seeds) >= 0.95, (found, levels)
    assert covered / len(seeds) >= 0.9, covered
    # AND it takes a handful of levels, not a sweep
    assert max(levels) <= 10


def test_a_prediction_30_percent_optimistic_no_longer_reads_as_half_the_capacity():
    # GIVEN a prediction 30% above the true edge (three fixed levels at 0.5/1.0/1.5x read this as 0.5x)
    edge = true_edge()
    est, history = search(edge * 1.3, seed=7)
    # THEN the search contracts from the failing prediction and lands on the edge
    assert history[0].meets_slo is False
    assert est.capacity_rps == pytest.approx(edge, rel=0.05)


def test_order_statistic_intervals_hold_their_confidence_and_say_when_samples_are_too_few():
    # GIVEN the p95 of a known distribution (standard exponential: -ln 0.05)
    truth = -math.log(0.05)
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(400):
        lo, hi = quantile_ci(list(rng.exponential(1.0, 200)), 0.95)
        assert lo is not None and hi is not None
        hits += lo <= truth <= hi
    # THEN the 95% interval holds the truth about 95% of the time (at least, order statistics are conservative)
    assert 0.92 <= hits / 400 <= 0.995
    # AND a p99 from 100 requests has no upper bound: "too few samples", never a pass
    assert quantile_ci_ranks(100, 0.99)[1] is None
    check = check_target([0.1] * 100, "e2e_s", "p99", 1.0)
    assert check.verdict == "unsure" and check.note == "too few samples"


def test_unfinished_requests_count_above_an_e2e_limit():
    # GIVEN 190 quick answers and 10 requests still running at the step's end
    check = check_target([0.5] * 190, "e2e_s", "p95", 2.0, unfinished=10)
    # THEN the p95 cannot be said to pass: 5% of the requests are beyond anything measured
    assert check.verdict != "pass" and check.samples == 200


def test_requests_that_queue_together_tell_less_than_independent_ones():
    # GIVEN 400 latencies in bursts: runs of 40 requests that all waited behind one burst, or none did
    rng = np.random.default_rng(5)
    waits = [1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0, 3.0, 1.0, 1.0]  # two bursts in ten
    bursty = np.concatenate([np.full(40, w) + rng.normal(0, 0.05, 40) for w in waits])
    shuffled = rng.permutation(bursty)
    # WHEN each is checked against a p90 target in the order it was sent
    together = check_target(list(bursty), "e2e_s", "p90", 2.0)
    apart = check_target(list(shuffled), "e2e_s", "p90", 2.0)
    # THEN the bursty order counts for fewer samples: a larger design effect and an interval at least as wide
    assert together.design_effect > 2 * apart.design_effect
    assert (together.ci_high or math.inf) - (together.ci_low or 0) >= apart.ci_high - apart.ci_low


def test_a_slow_servers_short_window_of_one_burst_does_not_prove_a_verdict():
    # GIVEN a slow server's window of 40 answers (too few for batches of requests): 14 that queued behind one burst
    # of arrivals, then 26 that did not, in the order they were sent; and the same answers in a random order
    rng = np.random.default_rng(7)
    burst = list(np.concatenate([np.full(14, 3.0), np.full(26, 1.0)]) + rng.normal(0, 0.05, 40))
    shuffled = list(rng.permutation(burst))
    # WHEN each is checked against a p90 target of 2 s
    together = check_target(burst, "e2e_s", "p90", 2.0)
    apart = check_target(shuffled, "e2e_s", "p90", 2.0)
    # THEN answers in random order fail it, while one burst is one draw of the arrivals: the window counts for a
    # few requests, and its verdict waits for more
    assert apart.verdict == "fail" and apart.design_effect < 2
    assert together.design_effect > 5
    assert together.verdict == "unsure"
