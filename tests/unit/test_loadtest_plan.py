"""Which level runs next: fixed lists, and the SLA search (bracketing then bisection)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.loadtest.config import SlaSearchSpec, SloTarget
from sizing.loadtest.metrics import Distribution, StepResult
from sizing.loadtest.plan import FixedLevels, SlaSearch, pointless_after

SPEC = SlaSearchSpec(targets=[SloTarget(metric="ttft_ms", percentile="p95", limit=500)], max_steps=40)


def _step(
    i: int, key: str, level: float, meets: bool, requests: int = 1, errors: dict[str, int] | None = None
) -> StepResult:
    empty = Distribution()
    return StepResult(
        step=i, target={key: level}, started_at=0, duration_s=1, warmup_s=0, requests=requests,
        errors=errors or {}, ttft_ms=empty,
        tpot_ms=empty, itl_ms=empty, e2e_s=empty, input_tokens=None, output_tokens=None, requests_per_s=0,
        output_tokens_per_s=0, meets_slo=meets,
    )  # fmt: skip


def _search(plan: SlaSearch, capacity: float, key: str) -> tuple[list[StepResult], list[float]]:
    history: list[StepResult] = []
    while (level := plan.next_level(history)) is not None:
        history.append(_step(len(history), key, level, level <= capacity))
    return history, [next(iter(r.target.values())) for r in history]


def test_fixed_levels_run_in_order_then_stop() -> None:
    plan = FixedLevels([1, 4, 16])
    history: list[StepResult] = []
    seen = []
    while (level := plan.next_level(history)) is not None:
        seen.append(level)
        history.append(_step(len(history), "concurrency", level, True))
    assert seen == [1, 4, 16]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=1000))
def test_the_search_finds_the_highest_concurrency_that_passes(capacity: int) -> None:
    # given an endpoint that meets the SLO up to `capacity` concurrent streams
    plan = SlaSearch(SPEC.model_copy(update={"max_level": 1024}), integer=True)
    # when the search runs
    history, levels = _search(plan, capacity, "concurrency")
    # then it reports exactly that capacity, in a logarithmic number of steps
    assert plan.summary(history)["max_passing_level"] == capacity
    assert len(levels) <= 2 * 11


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.2, max_value=200))
def test_a_rate_search_brackets_the_capacity_within_its_relative_resolution(capacity: float) -> None:
    plan = SlaSearch(
        SPEC.model_copy(update={"start": 1, "resolution": 0.05, "relative": True}), integer=False
    )
    history, _ = _search(plan, capacity, "rate_rps")
    summary = plan.summary(history)
    lo = summary["max_passing_level"] or 0.0
    hi = summary["first_failing_level"]
    assert lo <= capacity < hi
    assert hi - lo <= 0.05 * hi + 1e-9


def test_when_even_the_first_level_fails_there_is_no_passing_level() -> None:
    plan = SlaSearch(SPEC, integer=True)
    history, levels = _search(plan, 0, "concurrency")
    assert levels == [1]
    assert plan.summary(history)["max_passing_level"] is None


def test_a_level_where_every_request_failed_ends_a_rising_sweep() -> None:
    # given a step at concurrency 30 whose 40 requests were all refused or timed out
    dead = [_step(0, "concurrency", 30, False, requests=40, errors={"connection": 25, "timeout": 15})]
    # when the plan's next level is the same or higher, then it is not worth running
    assert pointless_after(dead, 60) and pointless_after(dead, 30)
    # but a lower level (an SLA search bisecting down) still is
    assert not pointless_after(dead, 15)


def test_one_answered_request_or_a_step_that_sent_none_keeps_the_sweep_going() -> None:
    # given a step where one request of 40 was answered, and one that sent no request at all
    one_answer = [_step(0, "concurrency", 30, False, requests=40, errors={"timeout": 39})]
    silent = [_step(0, "concurrency", 30, False, requests=0)]
    # then neither ends the sweep, nor does an empty history
    assert not pointless_after(one_answer, 60)
    assert not pointless_after(silent, 60)
    assert not pointless_after([], 60)
