"""What the learning-loop tests share: the moto stack (table and calibration bucket), the workload, and the
endpoint of known timing -- the estimator's own step model with every step `SLOWDOWN` times slower, which is what
a server 30% slower than the estimate measures at every closed-loop level."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from sizing.learn.profiles import ProfileStore, use_store
from sizing.perf.calibration import PROFILE_PATH, load_profiles, profile_for
from sizing.perf.replica import replica_of
from sizing.perf.simulator import ClosedLoop, simulate
from sizing.perf.step import StepModel
from sizing.store import SizingStore, create_table

TABLE = "llm-sizing-test"
BUCKET = "llm-sizing-calibration-test"
SLOWDOWN = 1.3
SPEC: dict[str, Any] = {
    "name": "learn",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"mean": 800, "p95": 2000}, "output": {"mean": 150, "p95": 300}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 20}},
    "constraints": {
        "instance_types": ["g6e.xlarge"],
        "deployments": ["eks"],
        "quantizations": ["bf16"],
        "engines": ["vllm"],
        "capacity": ["on-demand"],
    },
}


@contextmanager
def learning_stack() -> Iterator[tuple[SizingStore, ProfileStore]]:
    """The sizing table and the calibration bucket on moto, the bucket's store the one estimators read."""
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb, TABLE)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        store = ProfileStore(BUCKET, client=s3)
        use_store(store)
        try:
            yield SizingStore(TABLE, client=ddb), store
        finally:
            use_store(None)


def slowed(profile: Any, k: float) -> Any:
    """`profile` with every step `k` times slower (prefill and decode alike)."""
    return profile.stretched(k, k)


def dist(st: Any) -> dict[str, float]:
    return {"mean": st.mean, "p50": st.p50, "p90": st.p90, "p95": st.p95, "p99": st.p99}


def known_timing(arch: dict[str, Any], wm: Any, cat: Any, c: int, k: float, inp: Any = None, out: Any = None):
    """What an endpoint `k` times slower than the reference profile measures at concurrency `c`."""
    cfg = replica_of(arch, cat)
    ref = profile_for(cfg.parts(cat).accelerator.id, cfg.engine, load_profiles(str(PROFILE_PATH)))
    step = StepModel.for_config(cfg, profile=slowed(ref, k), catalog=cat)
    return simulate(
        step,
        ClosedLoop(c),
        inp or wm.input_tokens,
        out or wm.output_tokens,
        n_requests=1000,
        seed=1,
        itl=False,
    )
