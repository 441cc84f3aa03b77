"""The replicas and loads of the simulator's recorded runs (tests/fixtures/simulator/recorded_runs.json): one per
path through the scheduler -- preemption, reserved KV, TGI's deferral, Neuron buckets and waves, prefix caching,
whole-prompt prefill. The recorded-runs test and the compiled kernel's test (test_perf_native.py) simulate them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sizing.base.distributions import TokenDistribution
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import build_scheduler
from sizing.perf.simulator import ClosedLoop, OpenLoop, simulate
from sizing.perf.step import Profile, StepModel

PROFILE = Profile(0.5, 0.6, 0.003)
CHAT_IN = TokenDistribution.from_mean_p95(1200, 3500)
CHAT_OUT = TokenDistribution.from_mean_p95(250, 700)

#: name -> (instance, TP, engine, engine build, prefix caching, load, shared prefix tokens)
SCENARIOS: dict[str, tuple[str, int, str, str | None, bool, ClosedLoop | OpenLoop, int]] = {
    "preempting vllm on g5.xlarge": ("g5.xlarge", 1, "vllm", None, False, ClosedLoop(128), 0),
    "reserving trtllm on g6e.xlarge": ("g6e.xlarge", 1, "trtllm", None, False, OpenLoop(6.0), 0),
    "deferring tgi 2.x on g6e.12xlarge": (
        "g6e.12xlarge",
        4,
        "tgi",
        "tgi@v2",
        False,
        ClosedLoop(32, think_time_s=0.5),
        0,
    ),
    "neuron buckets on inf2.8xlarge": (
        "inf2.8xlarge",
        2,
        "neuron",
        None,
        False,
        ClosedLoop(8, wave_gap_s=0.05),
        0,
    ),
    "prefix caching on p5.48xlarge": ("p5.48xlarge", 1, "vllm", None, True, OpenLoop(20.0), 700),
    "unchunked vllm 0.x on g6e.xlarge": (
        "g6e.xlarge",
        1,
        "vllm",
        "vllm@v0",
        False,
        ClosedLoop(48, ramp_s=0.0),
        0,
    ),
}


def replica(name: str) -> tuple[StepModel, ClosedLoop | OpenLoop, int]:
    """The step model, load and shared prefix of scenario `name`."""
    instance, tp, engine, build, prefix, load, prefix_tokens = SCENARIOS[name]
    model = "mistralai/Mixtral-8x7B-v0.1" if engine == "tgi" else "meta-llama/Llama-3.1-8B-Instruct"
    cfg = HardwareConfig.create(model, instance, tp, "bf16", engine)
    if prefix:
        cfg = dataclasses.replace(cfg, enable_prefix_caching=True)
    sm = StepModel.for_config(cfg, PROFILE)
    if build:
        sm.schedule_as(build_scheduler(build, sm.max_model_len, "2.0.0"))
    return sm, load, prefix_tokens


def _exact(values: Any) -> list[float | None]:
    """Floats as JSON carries them to the last bit (repr), NaN as None (NaN equals nothing, itself included)."""
    return [None if math.isnan(v) else float(v) for v in values]


def simulated_figures(n_requests: int = 300, seed: int = 5) -> dict[str, dict[str, Any]]:
    """Every scenario simulated, with each figure a run has unrounded: per-request TTFT, TPOT and e2e, the
    inter-token latency stats, throughput, preemptions and tokens."""
    runs: dict[str, dict[str, Any]] = {}
    for name in SCENARIOS:
        sm, load, prefix_tokens = replica(name)
        res = simulate(
            sm, load, CHAT_IN, CHAT_OUT, n_requests=n_requests, seed=seed, prefix_tokens=prefix_tokens
        )
        itl = res.itl_ms
        runs[name] = {
            **{metric: _exact(values) for metric, values in res.per_request.items()},
            "itl_ms": _exact([itl.mean, itl.p50, itl.p90, itl.p95, itl.p99]),
            "rates": _exact([res.requests_per_s, res.output_tokens_per_s, res.duration_s]),
            "counts": [res.completed, res.preemptions, res.truncated, res.output_tokens_generated],
        }
    return runs
