"""How calibration rows are replayed: load clients that launch users in waves (llmperf), and older engine builds
that schedule prefills apart from decodes (vLLM V0, TGI 2.x, whose router also holds new prompts back)."""

from __future__ import annotations

import pytest

from sizing.base.distributions import TokenDistribution
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import build_scheduler
from sizing.perf.reference import DEFAULT_REFERENCE, parse_rows
from sizing.perf.simulator import ClosedLoop, simulate
from sizing.perf.step import Profile, StepModel

PROFILE = Profile(0.5, 0.6, 0.003)
FIXED_IN, FIXED_OUT = TokenDistribution.fixed(500), TokenDistribution.fixed(100)


def _replica(build: str = "") -> StepModel:
    sm = StepModel.for_config(
        HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g5.xlarge", tp=1, engine="tgi"), PROFILE
    )
    sm.schedule_as(build_scheduler(build, 8192))
    return sm


def test_a_client_that_waits_for_its_whole_wave_sends_fewer_requests_than_busy_users():
    sm = _replica()
    lone = simulate(sm, ClosedLoop(1), FIXED_IN, FIXED_OUT, n_requests=8)
    duration = lone.e2e_s.mean
    # GIVEN 4 users launched in waves, each request a full request-duration after the previous one
    gap = 1.5 * duration
    waves = simulate(sm, ClosedLoop(4, wave_gap_s=gap), FIXED_IN, FIXED_OUT, n_requests=40, warmup=0.0)
    busy = simulate(sm, ClosedLoop(4), FIXED_IN, FIXED_OUT, n_requests=40, warmup=0.0)
    # THEN no request shares the replica: each runs as a lone request would
    assert waves.ttft_ms.p99 == pytest.approx(lone.ttft_ms.p50, rel=0.01)
    assert waves.e2e_s.p99 == pytest.approx(duration, rel=0.01)
    # AND a wave takes its launch span plus the last request: 4 requests per (3 gaps + one request)
    assert waves.requests_per_s == pytest.approx(4 / (3 * gap + duration), rel=0.05)
    # AND users that keep the replica busy send several times as many
    assert busy.requests_per_s > 2 * waves.requests_per_s
    # AND every request completes with its tokens
    assert waves.completed == 40 and waves.output_tokens_generated == waves.output_tokens_drawn


def test_tgi2_holds_a_new_prompt_back_while_a_batch_decodes():
    tgi2, eager_router = _replica("tgi@v2"), _replica("tgi@v2")
    eager_router.prefill_defer_ratio = 0.0
    # GIVEN 16 users on TGI 2.x's router (a prompt waits until the waiting are 0.3 of the running batch, or 20
    # decode steps) and on the same scheduler admitting at once
    deferred = simulate(tgi2, ClosedLoop(16), FIXED_IN, FIXED_OUT, n_requests=320)
    eager = simulate(eager_router, ClosedLoop(16), FIXED_IN, FIXED_OUT, n_requests=320)
    # THEN first tokens come later under TGI 2.x's router
    assert deferred.ttft_ms.mean > 1.5 * eager.ttft_ms.mean
    # AND no prompt waits much beyond 20 decode steps plus a prefill of the waiting prompts
    step_s = deferred.tpot_ms.p99 / 1e3
    assert deferred.per_request["ttft_ms"].max() / 1e3 < 25 * step_s + 16 * lone_prefill_s(_replica())
    # AND nothing is lost
    assert deferred.completed == 320 and deferred.output_tokens_generated == deferred.output_tokens_drawn


def lone_prefill_s(sm: StepModel) -> float:
    return simulate(sm, ClosedLoop(1), FIXED_IN, FIXED_OUT, n_requests=4).ttft_ms.p50 / 1e3


def test_older_builds_schedule_as_they_did_and_the_current_build_is_untouched():
    # vLLM V0 prefills whole prompts alone, up to max(max_model_len, 2048) tokens a step (a stated version or none)
    assert build_scheduler("vllm@v0", 1024) == {
        "chunked_prefill": False,
        "mixed_prefill_decode": False,
        "max_num_batched_tokens": 2048,
    }
    assert build_scheduler("vllm@v0", 8192)["max_num_batched_tokens"] == 8192
    # from 0.5.3 a model served longer than 32K tokens is chunked into 512-token steps that carry the decodes
    chunked = {"chunked_prefill": True, "mixed_prefill_decode": True, "max_num_batched_tokens": 512}
    assert build_scheduler("vllm@v0", 131072, "0.6.3") == chunked
    assert build_scheduler("vllm@v0", 131072, "vLLM main at CI build 9555 (~late 2024)") == chunked
    # but not by 0.4.3, nor by the DJL LMI images of 2024, nor for a model served at 32K or less
    assert not build_scheduler("vllm@v0", 131072, "vllm/vllm-openai:v0.4.3")["chunked_prefill"]
    assert not build_scheduler("vllm@v0", 131072, "djl-inference:0.29.0-lmi11.0.0-cu124")["chunked_prefill"]
    assert not build_scheduler("vllm@v0", 32768, "0.6.3")["chunked_prefill"]
    # TGI before 3.0 adds the router's deferral: 0.3 of the running batch from 2.0.2, 1.2 before
    assert build_scheduler("tgi@v2", 4096)["prefill_defer_steps"] == 20
    assert build_scheduler("tgi@v2", 4096, "ghcr.io/huggingface/text-generation-inference:2.0.4")[
        "prefill_defer_ratio"
    ] == pytest.approx(0.3)
    assert build_scheduler("tgi@v2", 4096, "2.0.0")["prefill_defer_ratio"] == pytest.approx(1.2)
    assert build_scheduler("tgi@v2", 4096, "TGI ~1.x (2023, not stated)")[
        "prefill_defer_ratio"
    ] == pytest.approx(1.2)
    # the builds the product deploys keep the engine's defaults
    assert build_scheduler("vllm", 4096) == build_scheduler("tgi", 4096) == {}


def test_reference_rows_name_their_client_and_build():
    rows = {r.row_id: r for r in parse_rows(DEFAULT_REFERENCE)[0]}
    # llmperf's rows launch in waves; genai-perf's start every user together; others spread
    assert rows["X005"].start == "waves"
    assert rows["X027"].start == "together"
    # TGI 2.0.4 is the earlier generation; vLLM 0.4.3 is V0
    assert (rows["X011"].engine, rows["X011"].build) == ("tgi", "v2")
    assert (rows["X005"].engine, rows["X005"].build) == ("vllm", "v0")
