"""The simulator's shortcuts change nothing: percentiles from one sort are numpy's to the last bit, and a run
without inter-token-latency bookkeeping (the planner's) reports every other figure exactly as a full run."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sizing.base.distributions import TokenDistribution
from sizing.perf.config import HardwareConfig
from sizing.perf.simulator import ClosedLoop, OpenLoop, SimResult, Stats, simulate
from sizing.perf.step import Profile, StepModel

PROFILE = Profile(0.5, 0.6, 0.003)
CHAT_IN = TokenDistribution.from_mean_p95(1200, 3500)
CHAT_OUT = TokenDistribution.from_mean_p95(250, 700)

latencies = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
any_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=300, deadline=None)
@given(
    values=hnp.arrays(np.float64, st.integers(1, 1200), elements=latencies)
    | hnp.arrays(np.float64, st.integers(1, 40), elements=st.sampled_from([0.0, 1.5, 2.0, 1e9]))
    | hnp.arrays(np.float64, st.integers(1, 40), elements=any_floats)
)
def test_percentiles_are_numpys_to_the_last_bit(values: np.ndarray):
    # given any sample of float64 figures (ties, infinities and NaN included)
    # when Stats summarises it (infinities overflow the mean and make inf - inf: numpy warns, both sides alike)
    with np.errstate(all="ignore"):
        stats = Stats.of(values)
        expected = np.percentile(values, [50, 90, 95, 99])
    # then each percentile is exactly what np.percentile gives
    got = [stats.p50, stats.p90, stats.p95, stats.p99]
    assert all(same_float(g, float(e)) for g, e in zip(got, expected, strict=True)), (got, expected)


def test_percentiles_of_integer_samples_are_numpys():
    # given integer figures (not float64): the general path
    values = np.array([5, 1, 9, 3, 7], dtype=np.int64)
    stats = Stats.of(values)
    assert [stats.p50, stats.p90, stats.p95, stats.p99] == [
        float(x) for x in np.percentile(values, [50, 90, 95, 99])
    ]


def _figures_but_itl(res: SimResult) -> dict[str, object]:
    out = {
        f.name: getattr(res, f.name)
        for f in dataclasses.fields(res)
        if f.name not in ("itl_ms", "per_request")
    }
    out["per_request"] = {k: v.tobytes() for k, v in res.per_request.items()}
    return out


REPLICAS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "g5.xlarge", 1, "bf16", "vllm"),  # small KV cache: preemptions
    ("meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, "bf16", "trtllm"),  # reserves KV at admission
    ("meta-llama/Llama-3.1-8B-Instruct", "inf2.8xlarge", 2, "bf16", "neuron"),  # static KV reads
    ("mistralai/Mixtral-8x7B-v0.1", "g6e.12xlarge", 4, "bf16", "tgi"),
]
LOADS = [ClosedLoop(1), ClosedLoop(64), ClosedLoop(16, think_time_s=0.5), OpenLoop(2.0), OpenLoop(40.0)]


@pytest.mark.parametrize("replica", REPLICAS, ids=lambda r: f"{r[1]}-{r[4]}")
def test_a_run_without_itl_reports_every_other_figure_unchanged(replica: tuple[str, str, int, str, str]):
    # given a replica and several loads, light to overloaded
    step = StepModel.for_config(HardwareConfig.create(*replica), PROFILE)
    for load in LOADS:
        # when it is simulated with and without the inter-token-latency bookkeeping
        full = simulate(step, load, CHAT_IN, CHAT_OUT, n_requests=300, seed=5)
        lean = simulate(step, load, CHAT_IN, CHAT_OUT, n_requests=300, seed=5, itl=False)
        # then every figure but ITL is identical, and ITL is reported as not computed
        assert _figures_but_itl(lean) == _figures_but_itl(full), load
        assert all(math.isnan(getattr(lean.itl_ms, q)) for q in ("mean", "p50", "p95", "p99"))
        assert not math.isnan(full.itl_ms.p95)
