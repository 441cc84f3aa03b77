"""Capacity under SLO: the guided search finds the edge plain bisection finds, on bisection's own grid of rates, in
no more than its stated budget of simulations; the planner then narrows that edge with longer simulations."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.perf.config import HardwareConfig
from sizing.perf.simulator import ClosedLoop, OpenLoop, bounds, simulate
from sizing.perf.step import Profile, StepModel
from sizing.plan.capacity import (
    BISECTION_STEPS,
    EDGE_PROBES,
    EDGE_TOLERANCE,
    GUIDED_EXTRA_PROBES,
    PROBE_REQUESTS,
    REPORT_CHECK_STEPS,
    cache_info,
    clear_caches,
    find_edge,
    grid_rate,
    max_rate_under_slo,
    predict_at,
    violations,
)
from sizing.plan.memo import fingerprint
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.parse import parse_spec

GRID = 2**BISECTION_STEPS
BUDGET = BISECTION_STEPS + GUIDED_EXTRA_PROBES
PROFILE = Profile(0.5, 0.6, 0.003)


def bisection(passes: Callable[[float], bool], top: float) -> float:
    """The search this one replaces, verbatim: BISECTION_STEPS halvings of [0, top]."""
    lo, hi = 0.0, top
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


def queue_like(edge: int, shape: str) -> Callable[[int], tuple[bool, float]]:
    """A probe whose SLO score grows with the grid point and first exceeds 1 at `edge + 1`."""
    limit_at = edge + 0.5

    def score(k: int) -> float:
        x = k / limit_at  # 1 at the edge
        if shape == "queue":  # latency ~ 1 / (1 - rate / R) with R past the grid
            return 0.4 / (1 - 0.6 * x) if x < 1 / 0.6 else 1e6
        if shape == "linear":
            return 0.2 + 0.8 * x
        if shape == "flat-then-cliff":  # nothing until a sudden wall (KV cache exhausted)
            return 0.3 if x <= 1 else 50.0
        return x**6  # steep convex

    return lambda k: (score(k) <= 1, 1 / max(score(k), 1e-9))


@pytest.mark.parametrize("shape", ["queue", "linear", "flat-then-cliff", "convex"])
@pytest.mark.parametrize("edge", range(GRID))
def test_on_a_monotone_slo_the_guided_search_finds_bisections_edge_within_budget(edge: int, shape: str):
    # given an SLO met up to grid point `edge` and missed beyond it
    probe = queue_like(edge, shape)
    y0 = probe(0)[1]
    # when the guided search looks for the edge
    found, probes = find_edge(probe, GRID, y0, BUDGET)
    # then it is bisection's edge, found in at most the budget of probes
    reference = bisection(lambda rate: probe(round(rate * GRID))[0], 1.0)
    assert found == round(reference * GRID) == edge
    assert 1 <= probes <= BUDGET


def test_when_the_slo_holds_everywhere_one_probe_at_the_top_settles_it():
    # given latencies far below the SLO at every rate (a batch job with a loose deadline)
    def probe(k: int) -> tuple[bool, float]:
        return True, 5.0 - k / GRID

    # when the guided search runs
    found, probes = find_edge(probe, GRID, 5.0, BUDGET)
    # then it takes the top of the grid after confirming it
    assert found == GRID - 1
    assert probes <= 2


@settings(max_examples=200, deadline=None)
@given(
    outcomes=st.lists(st.booleans(), min_size=GRID + 1, max_size=GRID + 1),
    scores=st.lists(
        st.one_of(st.floats(1e-9, 1e9), st.sampled_from([1e-9, 1.0, 1e9])),
        min_size=GRID + 1,
        max_size=GRID + 1,
    ),
    y0=st.floats(1e-9, 1e9),
)
def test_on_any_slo_the_edge_found_is_a_pass_next_to_a_fail_within_budget(
    outcomes: list[bool], scores: list[float], y0: float
):
    # given an SLO met and missed at random across the grid (noise), with any latencies
    seen: dict[int, bool] = {}

    def probe(k: int) -> tuple[bool, float]:
        seen[k] = outcomes[k]
        return outcomes[k], 1 / scores[k]

    # when the guided search runs
    edge, probes = find_edge(probe, GRID, y0, BUDGET)
    # then it stops within budget at a probed pass (or zero) next to a probed failure (or the saturated rate)
    assert probes <= BUDGET and len(seen) == probes
    assert edge == 0 or seen[edge] is True
    assert edge + 1 == GRID or seen[edge + 1] is False


@settings(max_examples=60, deadline=None)
@given(top=st.floats(1e-4, 1e4), threshold=st.floats(0.0, 1.0))
def test_the_capacity_is_bisections_rate_to_the_last_bit(top: float, threshold: float):
    # given an SLO met up to some rate, and the saturated rate `top`
    def passes(rate: float) -> bool:
        return rate <= threshold * top

    # when both searches run
    expected = bisection(passes, top)
    found, _ = find_edge(lambda k: (passes(grid_rate(k, top, BISECTION_STEPS)), 1.0), GRID, 1.0, BUDGET)
    # then the guided one reports the very float bisection reports
    assert grid_rate(found, top, BISECTION_STEPS) == expected


def test_grid_rates_rise_from_zero_to_the_saturated_rate():
    rates = [grid_rate(k, 3.7, BISECTION_STEPS) for k in range(GRID + 1)]
    assert rates[0] == 0.0 and rates[-1] == 3.7
    assert all(a < b for a, b in itertools.pairwise(rates))
    assert rates[GRID // 2] == 3.7 / 2


def _workload(slo: dict[str, Any]) -> WorkloadModel:
    return resolve(
        parse_spec(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "rate": {"peak_rps": 2},
                "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 700}},
                "slo": slo,
            }
        )
    )


def _meets(step: StepModel, wm: WorkloadModel, rate: float) -> bool:
    sim = simulate(step, OpenLoop(rate), wm.input_tokens, wm.output_tokens, n_requests=PROBE_REQUESTS)
    return not violations(sim, wm.slo)


def _simulated_bisection(step: StepModel, wm: WorkloadModel, top: float) -> float:
    """Plain bisection of the grid, then of the step above its edge while that is wider than EDGE_TOLERANCE."""
    lo = bisection(lambda rate: _meets(step, wm, rate), top)
    if lo <= 0:
        single = simulate(step, ClosedLoop(1), wm.input_tokens, wm.output_tokens, n_requests=PROBE_REQUESTS)
        return 1.0 / max(single.e2e_s.mean, 1e-3) * 0.5
    hi = lo + top / GRID
    for _ in range(EDGE_PROBES):
        if hi <= lo * (1 + EDGE_TOLERANCE):
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _meets(step, wm, mid) else (lo, mid)
    return lo


@pytest.mark.parametrize(
    ("instance", "slo"),
    [
        ("g5.xlarge", {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 60}}),
        ("g5.xlarge", {"e2e_s": {"p99": 600}}),
        ("p5.48xlarge", {"ttft_ms": {"p95": 300}, "tpot_ms": {"p95": 15}}),
    ],
)
def test_with_the_simulator_the_capacity_is_bisections_edge_narrowed(instance: str, slo: dict[str, Any]):
    # given a replica and a workload
    step = StepModel.for_config(
        HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", instance, 1), PROFILE
    )
    wm = _workload(slo)
    top = bounds(step, wm.input_tokens.mean, wm.output_tokens.mean).max_requests_per_s
    clear_caches()
    # when the planner searches its capacity under the SLO
    cap = max_rate_under_slo(step, wm, top)
    # then it is the capacity plain bisection of the same simulations gives, its last grid step bisected on to
    # EDGE_TOLERANCE, within the simulation budget; the simulations meet the SLO there and miss it EDGE_TOLERANCE
    # above (unless that is the saturated rate: the SLO holds up to it)
    assert cap.feasible and math.isfinite(cap.rate_rps)
    assert cap.rate_rps == _simulated_bisection(step, wm, top)
    assert cap.probes <= 1 + BUDGET + EDGE_PROBES + 2 * REPORT_CHECK_STEPS
    above = cap.rate_rps * (1 + EDGE_TOLERANCE)
    assert _meets(step, wm, cap.rate_rps)
    assert above >= top or not _meets(step, wm, above)


# --- a shared prompt prefix ---------------------------------------------------------------------------------------
def _chatbot(shared_prefix: int | None) -> WorkloadModel:
    """The issue's chatbot: 2,000-token prompts on average, optionally 1,500 of them a shared system prompt."""
    tokens: dict[str, Any] = {"input": {"mean": 2000, "p95": 4000}, "output": {"mean": 250, "p95": 700}}
    if shared_prefix is not None:
        tokens["shared_prefix"] = shared_prefix
    return resolve(
        parse_spec(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "rate": {"peak_rps": 2},
                "tokens": tokens,
                "slo": {"ttft_ms": {"p95": 500}, "e2e_s": {"p95": 30}},
            }
        )
    )


def _l40s(caching: bool) -> StepModel:
    cfg = HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1)
    return StepModel.for_config(dataclasses.replace(cfg, enable_prefix_caching=caching), PROFILE)


def test_a_cached_shared_prefix_raises_the_capacity_under_a_ttft_slo():
    # given the chatbot with and without its 1,500-token shared prefix, on replicas with and without caching
    shared, plain = _chatbot(1500), _chatbot(None)
    on, off = _l40s(True), _l40s(False)
    clear_caches()

    def capacity(step: StepModel, wm: WorkloadModel) -> float:
        top = bounds(step, wm.input_tokens.mean, wm.output_tokens.mean, wm.shared_prefix_tokens)
        return max_rate_under_slo(step, wm, top.max_requests_per_s).rate_rps

    # when the planner searches each replica's capacity under the 500 ms TTFT p95
    cached, uncached, today = capacity(on, shared), capacity(off, shared), capacity(off, plain)
    # then caching the prefix serves substantially more requests per replica
    assert cached > 1.3 * today
    # and a prefix the replica does not cache changes nothing
    assert uncached == today


def test_the_shared_prefix_and_prefix_caching_are_part_of_the_memo_keys():
    # given a search and a prediction of the chatbot without a declared prefix, on a caching replica
    on = _l40s(True)
    plain, shared = _chatbot(None), _chatbot(1500)
    top = bounds(on, 2000, 250).max_requests_per_s
    clear_caches()
    before = max_rate_under_slo(on, plain, top)
    at_rate = predict_at(on, plain, 1.0)
    # when the same workload with a shared prefix is searched and predicted
    after = max_rate_under_slo(on, shared, top)
    at_rate_shared = predict_at(on, shared, 1.0)
    # then neither comes from the cache: both are simulated afresh, with the prefix read from the cache
    assert cache_info()["capacity"]["hits"] == 0 and cache_info()["prediction"]["hits"] == 0
    assert after.rate_rps > before.rate_rps
    assert at_rate_shared.ttft_ms.p95 < at_rate.ttft_ms.p95
    # and a replica that does not cache prefixes has another fingerprint, however the setting was made
    assert fingerprint(_l40s(False)) != fingerprint(on)
    rescheduled = _l40s(False)
    rescheduled.schedule_as({"prefix_caching": True})
    assert fingerprint(rescheduled) != fingerprint(_l40s(False))
