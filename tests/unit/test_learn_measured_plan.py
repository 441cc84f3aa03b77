"""The planner's rule for a measured configuration, on synthetic closed-loop levels (pure data): where the SLO's
edge lies on the measured levels, the figures at a measured throughput, and the conservative capacity."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sizing.learn.matching import at_throughput, conservative_rate, slo_edge


def level(
    c: int, rps: float, ttft_p95: float, e2e_p95: float, e2e_mean: float | None = None
) -> dict[str, Any]:
    return {
        "concurrency": c,
        "ttft_ms": {"mean": ttft_p95 / 2, "p50": ttft_p95 / 2, "p95": ttft_p95, "p99": ttft_p95 * 1.5},
        "tpot_ms": {"mean": 30.0, "p50": 30.0, "p95": 35.0, "p99": 40.0},
        "e2e_s": {"mean": e2e_mean or e2e_p95 / 2, "p50": e2e_p95 / 2, "p95": e2e_p95, "p99": e2e_p95 * 1.2},
        "output_tokens_per_s": rps * 150,
        "requests_per_s": rps,
    }


LEVELS = [level(10, 2.0, 200, 5.0), level(20, 3.5, 400, 8.0), level(40, 5.0, 1600, 14.0)]


def test_an_edge_between_two_levels_is_where_the_first_target_reaches_its_limit():
    # given levels whose TTFT p95 crosses 1 s between 20 and 40 in flight (e2e stays within its 20 s)
    targets = [("ttft_ms", "p95", 1000.0), ("e2e_s", "p95", 20.0)]

    # when the SLO edge is found on them
    edge = slo_edge(LEVELS, targets)

    # then it lies where TTFT p95, linear in log concurrency between the two levels, reaches 1000 ms
    w = (1000 - 400) / (1600 - 400)
    assert edge.status == "inside"
    assert edge.binding == "ttft_ms.p95"
    assert edge.levels == (20, 40)
    assert edge.concurrency == pytest.approx(20 * 2**w)
    assert edge.requests_per_s == pytest.approx(3.5 + (5.0 - 3.5) * w)
    assert edge.figures is not None and edge.figures["ttft_ms"]["p95"] == pytest.approx(1000.0)
    assert "between measured levels 20 and 40" in edge.reason


def test_the_target_that_binds_first_decides_the_edge():
    # given a TTFT limit reached late and an e2e limit reached early between 20 and 40 in flight
    targets = [("ttft_ms", "p95", 1500.0), ("e2e_s", "p95", 9.0)]

    # when the SLO edge is found
    edge = slo_edge(LEVELS, targets)

    # then e2e binds: the edge sits where e2e p95 reaches 9 s
    w = (9.0 - 8.0) / (14.0 - 8.0)
    assert edge.binding == "e2e_s.p95"
    assert edge.concurrency == pytest.approx(20 * 2**w)


def test_every_level_meeting_the_slo_puts_the_edge_above_the_measured_range():
    # given an SLO every measured level meets
    targets = [("ttft_ms", "p95", 5000.0)]

    # when the SLO edge is found
    edge = slo_edge(LEVELS, targets)

    # then it is outside the measured range, said in words, with no capacity
    assert edge.status == "all_meet"
    assert edge.requests_per_s is None
    assert "above the measured range" in edge.reason


def test_no_level_meeting_the_slo_puts_the_edge_below_the_measured_range():
    # given an SLO even the lowest level misses
    targets = [("ttft_ms", "p95", 100.0)]

    # when the SLO edge is found
    edge = slo_edge(LEVELS, targets)

    # then it is below the range, naming the lowest level and the missed figure
    assert edge.status == "none_meet"
    assert edge.requests_per_s is None
    assert "lowest measured level (10 in flight)" in edge.reason and "TTFT p95" in edge.reason


def test_a_percentile_the_measurement_lacks_is_not_judged():
    # given levels without a TTFT p99 and an SLO on it
    levels = [{**lv, "ttft_ms": {"mean": 1.0, "p50": 1.0, "p95": 2.0}} for lv in LEVELS]

    # when the SLO edge is found
    edge = slo_edge(levels, [("ttft_ms", "p99", 1000.0)])

    # then no edge is claimed, and the missing figure is named
    assert edge.status == "incomplete"
    assert "TTFT p99" in edge.reason


def test_a_p90_target_reads_the_stricter_p95():
    # given an SLO on p90 (the measured levels keep p50/p95/p99)
    edge = slo_edge(LEVELS, [("ttft_ms", "p90", 1000.0)])

    # then the edge is the p95 one
    assert edge.concurrency == pytest.approx(slo_edge(LEVELS, [("ttft_ms", "p95", 1000.0)]).concurrency)


def test_a_level_that_meets_the_slo_again_above_a_miss_is_not_capacity():
    # given a noisy sweep: 20 in flight misses the SLO, 40 meets it again
    levels = [level(10, 2.0, 200, 5.0), level(20, 3.5, 1200, 8.0), level(40, 5.0, 900, 9.0)]

    # when the SLO edge is found
    edge = slo_edge(levels, [("ttft_ms", "p95", 1000.0)])

    # then the first miss ends it: the edge lies between 10 and 20
    assert edge.levels == (10, 20)
    assert edge.concurrency is not None and edge.concurrency < 20


def test_figures_at_a_measured_throughput_are_interpolated_between_the_levels_around_it():
    # given a rate between the throughput of 10 and 20 in flight
    figures, in_flight, used, below = at_throughput(LEVELS, 2.75)

    # then the figures are those halfway (in log concurrency) between the two levels
    assert not below and used == [10, 20]
    assert in_flight == pytest.approx(10 * math.sqrt(2))
    assert figures["ttft_ms"]["p95"] == pytest.approx(300.0)


def test_below_the_lowest_level_the_lowest_levels_figures_bound_the_latency():
    # given a light load, under the lowest level's throughput
    figures, in_flight, used, below = at_throughput([level(10, 2.0, 200, 5.0, e2e_mean=2.0)], 0.5)

    # then it says so, with that level's figures and Little's law on its mean e2e
    assert below and used == [10]
    assert figures["ttft_ms"]["p95"] == 200
    assert in_flight == pytest.approx(1.0)


def test_the_capacity_is_the_lower_of_the_measured_edge_and_the_open_loop_edge():
    # given a measured closed-loop edge and the rescaled model's open-loop edge on either side of it
    # when / then the lower decides, and the answer names which
    assert conservative_rate(7.0, 5.1) == (5.1, "open-loop edge of the rescaled model")
    assert conservative_rate(6.7, 7.6) == (6.7, "measured edge")
    # and without an open-loop edge the measured one stands
    assert conservative_rate(6.7, None) == (6.7, "measured edge")
