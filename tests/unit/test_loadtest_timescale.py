"""A load test against a time-scaled twin is given and read back in the twin's own time: the process runs the
level K times faster on the wall clock, and what it measured reads as the same level against a real-time server."""

from __future__ import annotations

import asyncio
import math

import pytest

from sizing.loadtest.capacity import CapacitySearch
from sizing.loadtest.confidence import check_target
from sizing.loadtest.config import CapacitySearchSpec, LoadTestConfig, SloTarget
from sizing.loadtest.metrics import Distribution, StepResult, check_slo, with_checks
from sizing.loadtest.overload import assess
from sizing.loadtest.server import TWIN_LAG_SHARE, MetricsSnapshot, window
from sizing.loadtest.timescale import in_model_time, on_wall_clock
from sizing.twin.engine import Engine

K = 4.0
SLO = [
    SloTarget(metric="ttft_ms", percentile="p95", limit=800),
    SloTarget(metric="e2e_s", percentile="p95", limit=2.5),
]


def _cfg(**over: object) -> LoadTestConfig:
    fields: dict[str, object] = dict(
        endpoint="http://127.0.0.1:9", model="m", mode="rate", levels=[], slo=SLO, duration_s=20, warmup_s=4,
        out_dir="/tmp/unused", time_scale=K, capacity_search=CapacitySearchSpec(start=10.0),
    )  # fmt: skip
    fields.update(over)
    return LoadTestConfig.model_validate(fields)


def test_the_process_runs_rates_k_times_higher_and_seconds_k_times_shorter() -> None:
    # given a capacity search in the twin's time against a twin 4x faster than real time
    cfg = _cfg()
    # when it is put on the wall clock
    wall = on_wall_clock(cfg)
    # then the search starts at 4x the rate, each window and warm-up lasts a quarter, and limits are a quarter
    assert wall.capacity_search is not None and wall.capacity_search.start == 40.0
    assert (wall.duration_s, wall.warmup_s) == (5.0, 1.0)
    assert [t.limit for t in wall.slo] == [200.0, 0.625]
    assert wall.time_scale == 1.0 and wall.tail_cap_s == cfg.tail_cap_s / K
    # and a real-time server's settings are left as they are
    assert on_wall_clock(_cfg(time_scale=1.0)) == _cfg(time_scale=1.0)


def _wall_step(rate: float, e2e_wall: list[float], ttft_wall_ms: list[float], duration: float) -> StepResult:
    targets = [(t.metric, t.percentile, t.limit / K) for t in SLO]
    r = StepResult(
        step=0, target={"rate_rps": rate}, started_at=0.0, duration_s=duration, warmup_s=1.0,
        requests=len(e2e_wall), errors={},
        ttft_ms=Distribution(p50=sorted(ttft_wall_ms)[len(ttft_wall_ms) // 2], p95=sorted(ttft_wall_ms)[-2], count=len(ttft_wall_ms)),
        tpot_ms=Distribution(), itl_ms=Distribution(),
        e2e_s=Distribution(p50=sorted(e2e_wall)[len(e2e_wall) // 2], p95=sorted(e2e_wall)[-2], count=len(e2e_wall)),
        input_tokens=100, output_tokens=50, requests_per_s=len(e2e_wall) / duration, output_tokens_per_s=50 * len(e2e_wall) / duration,
    )  # fmt: skip
    r = check_slo(r, targets)
    return with_checks(
        r,
        [check_target(ttft_wall_ms, "ttft_ms", "p95", 200.0), check_target(e2e_wall, "e2e_s", "p95", 0.625)],
    )


def test_a_step_measured_on_the_wall_clock_reads_back_in_the_twins_time() -> None:
    # given a level run at 40 req/s for 5 s of wall time (200 requests), its answers taking 0.5-0.7 s of wall time
    e2e = [0.5 + 0.2 * i / 199 for i in range(200)]
    wall = _wall_step(40.0, e2e, [100.0] * 200, 5.0)
    # when it is read back in the twin's time
    step = in_model_time(wall, _cfg())
    # then it is a 10 req/s level of 20 s whose answers took 2-2.8 s, failing e2e p95 2.5 s as it did on the wall
    assert step.level == 10.0 and step.duration_s == 20.0 and step.requests_per_s == pytest.approx(10.0)
    assert step.e2e_s.p95 == pytest.approx(e2e[-2] * K) and step.ttft_ms.p50 == pytest.approx(400.0)
    assert step.meets_slo is wall.meets_slo is False
    assert step.slo_failures == [f"e2e_s.p95 {e2e[-2] * K:g} > 2.5"]
    assert [c.limit for c in step.checks] == [800.0, 2.5] and step.checks[1].verdict == wall.checks[1].verdict
    # and the search's answer from such steps is in req/s of the twin's time
    found = CapacitySearch(10.0).estimate(
        [in_model_time(_wall_step(20.0, [0.3] * 100, [50.0] * 100, 5.0), _cfg()), step]
    )
    assert found.capacity_rps is not None and 5.0 <= found.capacity_rps <= 10.0


def test_a_time_scaled_engine_serves_the_same_steps_k_times_sooner() -> None:
    class Steps:
        max_num_seqs, max_num_batched_tokens, kv_capacity_tokens, block_size = 4, 256, 4096, 16

        def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
            return 0.02

    async def serve(scale: float) -> float:
        engine = Engine(Steps(), time_scale=scale)
        engine.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        seq = engine.submit(50, 10, lambda n, fin: None)
        await seq.done  # type: ignore[attr-defined]
        await engine.stop()
        return loop.time() - t0

    # given ten 20 ms steps of the model; when a 4x engine serves them
    took = asyncio.run(serve(K))
    # then they take a quarter of the model's 200 ms on the wall clock (give or take a busy machine's 20 ms)
    assert took == pytest.approx(0.2 / K, abs=0.02)


def test_a_twin_that_fell_behind_its_model_says_by_how_much() -> None:
    # given a twin's /metrics at a window's start and 10 s later, its steps 0.5 s behind their modelled time by then
    before = MetricsSnapshot(at=100.0, values={"twin:step_lag_seconds_total": 1.0})
    after = MetricsSnapshot(at=110.0, values={"twin:step_lag_seconds_total": 1.5})
    # when the window's server figures are read
    server = window(before, after)
    # then it ran behind its model 5% of the window: more than a level's figures can stand for the model
    assert server.twin_lag_share == 0.05 and server.twin_lag_share > TWIN_LAG_SHARE
    # and a server that reports no lag (a real engine) has none
    assert window(MetricsSnapshot(at=0.0), MetricsSnapshot(at=10.0)).twin_lag_share is None


def test_a_level_whose_twin_fell_behind_reads_back_in_the_twins_time() -> None:
    # given a level run at 60 req/s for 5 s of wall time (its first 2 s a warm-up) against a 4x twin that answered
    # 40 a second
    sent = [i / 60 for i in range(300)]
    ended = [max(s, i / 40) + 0.05 for i, s in enumerate(sent)]
    wall = _wall_step(60.0, [0.1] * 200, [20.0] * 200, 5.0).model_copy(
        update={"overload": assess(sent, [e if e < 5.0 else math.inf for e in ended], (2.0, 5.0))}
    )
    wall = with_checks(check_slo(wall, [(t.metric, t.percentile, t.limit / K) for t in SLO]), wall.checks)
    assert wall.overload is not None and wall.overload.overloaded
    # when it is read back in the twin's time
    step = in_model_time(wall, _cfg())
    # then it fails as it did, its window and reason in the twin's seconds and its counts as they were
    assert step.overload is not None and step.overload.window_s == 12.0
    assert step.overload.completions == wall.overload.completions and step.capacity_verdict == "fail"
    assert any(
        f.startswith("the server fell behind") and "over the 12 s window" in f for f in step.slo_failures
    )
    # and the rate it answered at while behind, which bounds the search's edge, is the twin's 10 req/s, not the wall
    # clock's 40
    assert step.overload.completions / step.overload.window_s == pytest.approx(10.0)
