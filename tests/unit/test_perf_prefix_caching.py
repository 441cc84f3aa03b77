"""Prefix caching in the simulator: a prefix every prompt shares is read from the KV cache instead of prefilled
(full blocks only, the first request computing it), and the cache holds its blocks once for all requests. Without
prefix caching, or without a prefix, every figure is the one of a run that never heard of prefixes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sizing.base.distributions import TokenDistribution
from sizing.perf.config import HardwareConfig
from sizing.perf.simulator import (
    ClosedLoop,
    OpenLoop,
    SimResult,
    bounds,
    cached_share,
    saturated,
    simulate,
)
from sizing.perf.step import Profile, StepModel

PROFILE = Profile(0.5, 0.6, 0.003)
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
#: the chatbot of the issue: 2,000-token prompts on average, 1,500 of them a shared system prompt
CHATBOT_IN = TokenDistribution.from_mean_p95(2000, 4000)
CHATBOT_OUT = TokenDistribution.from_mean_p95(250, 700)
PREFIX = 1500


def replica(instance: str, *, caching: bool, tp: int = 1, engine: str = "vllm") -> StepModel:
    cfg = HardwareConfig.create(MODEL, instance, tp, "bf16", engine)
    return StepModel.for_config(dataclasses.replace(cfg, enable_prefix_caching=caching), PROFILE)


def figures(res: SimResult) -> dict[str, object]:
    out: dict[str, object] = {f.name: getattr(res, f.name) for f in dataclasses.fields(res)}
    out["per_request"] = {k: v.tobytes() for k, v in res.per_request.items()}
    return out


REPLICAS = [
    ("g5.xlarge", 1, "vllm"),  # small KV cache: preemptions
    ("g6e.xlarge", 1, "trtllm"),  # reserves KV at admission, no chunking
    ("inf2.8xlarge", 2, "neuron"),  # static KV reads
    ("g6e.xlarge", 1, "tgi"),  # defers prefills
]
LOADS = [ClosedLoop(1), ClosedLoop(64), ClosedLoop(8, wave_gap_s=0.1), OpenLoop(2.0), OpenLoop(40.0)]


@pytest.mark.parametrize("where", REPLICAS, ids=lambda r: f"{r[0]}-{r[2]}")
def test_no_prefix_or_no_caching_gives_todays_run_to_the_last_bit(where: tuple[str, int, str]):
    # given a replica with and without prefix caching, and loads light to overloaded
    instance, tp, engine = where
    plain = replica(instance, caching=False, tp=tp, engine=engine)
    caching = replica(instance, caching=True, tp=tp, engine=engine)
    for load in LOADS:
        # when each runs without a prefix, and the non-caching one with a prefix it cannot use
        today = simulate(plain, load, CHATBOT_IN, CHATBOT_OUT, n_requests=300, seed=5)
        runs = [
            simulate(plain, load, CHATBOT_IN, CHATBOT_OUT, n_requests=300, seed=5, prefix_tokens=0),
            simulate(plain, load, CHATBOT_IN, CHATBOT_OUT, n_requests=300, seed=5, prefix_tokens=PREFIX),
            simulate(caching, load, CHATBOT_IN, CHATBOT_OUT, n_requests=300, seed=5, prefix_tokens=0),
        ]
        # then every figure is the plain run's, bit for bit
        for run in runs:
            assert figures(run) == figures(today), load


def test_a_shared_prefix_cuts_ttft_with_prefix_caching_and_not_without():
    # given the chatbot on one L40S, with and without prefix caching, at a load both serve
    on, off = replica("g6e.xlarge", caching=True), replica("g6e.xlarge", caching=False)
    load = OpenLoop(1.5)
    # when it runs with its 1,500-token shared prefix, and without declaring one
    base = simulate(off, load, CHATBOT_IN, CHATBOT_OUT, n_requests=1000)
    cached = simulate(on, load, CHATBOT_IN, CHATBOT_OUT, n_requests=1000, prefix_tokens=PREFIX)
    uncached = simulate(off, load, CHATBOT_IN, CHATBOT_OUT, n_requests=1000, prefix_tokens=PREFIX)
    # then with caching TTFT p95 falls by more than a third (three quarters of each prompt is not prefilled)
    assert cached.ttft_ms.p95 < 0.65 * base.ttft_ms.p95
    # and without caching the prefix changes nothing
    assert uncached.ttft_ms.p95 == base.ttft_ms.p95
    assert uncached.e2e_s.p95 == base.e2e_s.p95
    # and the answers are the same length: only the prompt's work shrank
    assert cached.output_tokens_generated == cached.output_tokens_drawn == base.output_tokens_drawn


def test_the_kv_cache_holds_the_shared_blocks_once_so_more_sequences_run():
    # given a small KV cache (one A10G, ~37k tokens) and 40 requests of 2,000 prompt tokens arriving at once,
    # 1,500 of them a shared prefix
    on = replica("g5.xlarge", caching=True)
    prompts, answers = TokenDistribution.fixed(2000), TokenDistribution.fixed(200)
    load = ClosedLoop(40, ramp_s=0)

    def running_together(res: SimResult) -> int:
        """Requests that had their first token before any request ended: admitted into the first batch."""
        first_end = float(np.min(res.per_request["e2e_s"]))
        return int(np.sum(res.per_request["ttft_ms"] / 1000 < first_end))

    # when they run with the prefix shared, and with nothing declared shared
    shared = simulate(on, load, prompts, answers, n_requests=40, warmup=0, prefix_tokens=PREFIX)
    alone = simulate(on, load, prompts, answers, n_requests=40, warmup=0)
    # then the shared prefix is held once: all 40 fit in the cache together, without preemption
    assert running_together(shared) == 40
    assert shared.preemptions == 0
    # while 2,000 tokens each fill the cache after ~18 (37k / 2k) and the rest wait
    assert running_together(alone) < 25
    assert alone.preemptions > 0


def test_the_first_request_computes_the_prefix_and_the_rest_read_it():
    # given one user sending 2,000-token prompts, one after the other, with a 1,500-token shared prefix
    on = replica("g6e.xlarge", caching=True)
    prompts, answers = TokenDistribution.fixed(2000), TokenDistribution.fixed(20)
    # when it runs (every request measured)
    res = simulate(on, ClosedLoop(1), prompts, answers, n_requests=5, warmup=0, prefix_tokens=PREFIX)
    ttft = res.per_request["ttft_ms"]
    # then the first request's TTFT is a full prefill's and every later one is shorter (prefix read from cache)
    assert all(later < 0.6 * ttft[0] for later in ttft[1:])
    assert np.ptp(ttft[1:]) < 1e-6


@pytest.mark.parametrize(
    ("prefix", "prompt", "cached"),
    [
        (1500, 2000, 1488),  # 93 full 16-token blocks; the last, partial block is computed
        (1500, 1000, 992),  # a prompt shorter than the prefix shares its own full blocks
        (1500, 1489, 1488),  # the prompt's last token is always computed
        (1500, 1488, 1472),
        (15, 2000, 0),  # less than one block: nothing reused
        (0, 2000, 0),
        (1500, 1, 0),
    ],
)
def test_only_full_blocks_of_the_prefix_are_reused(prefix: int, prompt: int, cached: int):
    # given vLLM's 16-token KV blocks with prefix caching on
    on = replica("g6e.xlarge", caching=True)
    assert on.block_size == 16
    # then the cached share is the full blocks of min(prefix, prompt - 1)
    assert cached_share(on, prefix, prompt) == cached
    # and without prefix caching nothing is cached
    assert cached_share(replica("g6e.xlarge", caching=False), prefix, prompt) == 0


@pytest.mark.parametrize("concurrency", [1, 32, 128])
def test_every_request_completes_with_its_tokens_when_sharing_preempts(concurrency: int):
    # given a small KV cache under pressure, prompts of every length around the shared prefix
    on = replica("g5.xlarge", caching=True)
    # when a closed loop runs with the shared prefix
    res = simulate(
        on, ClosedLoop(concurrency), CHATBOT_IN, CHATBOT_OUT, n_requests=400, seed=3, prefix_tokens=PREFIX
    )
    # then every request completed and exactly the drawn output tokens were generated
    assert res.completed == 400
    assert res.output_tokens_generated == res.output_tokens_drawn


def test_bounds_with_a_shared_prefix_stay_optimistic_and_rise():
    # given fixed prompts with a shared prefix on an H100 with prefix caching
    on = replica("p5.48xlarge", caching=True)
    prompts, answers = TokenDistribution.fixed(2000), TokenDistribution.fixed(200)
    # when the roofline bounds and the simulation are taken with the prefix
    b = bounds(on, 2000, 200, PREFIX)
    plain = bounds(on, 2000, 200)
    lone = simulate(on, ClosedLoop(1), prompts, answers, n_requests=20, prefix_tokens=PREFIX)
    sat = saturated(on, prompts, answers, n_requests=800, prefix_tokens=PREFIX)
    # then they stay optimistic (the pruning bound is never beaten) and above the bounds without the prefix
    assert b.min_ttft_s * 1e3 <= lone.ttft_ms.p50 * 1.01
    assert b.max_requests_per_s >= sat.requests_per_s * 0.95
    assert b.min_ttft_s < plain.min_ttft_s and b.max_requests_per_s > plain.max_requests_per_s
    assert b.min_tpot_s == plain.min_tpot_s  # decode still reads the whole context


def test_a_negative_prefix_is_refused():
    with pytest.raises(ValueError, match="prefix_tokens"):
        simulate(
            replica("g6e.xlarge", caching=True), ClosedLoop(1), CHATBOT_IN, CHATBOT_OUT, prefix_tokens=-1
        )
