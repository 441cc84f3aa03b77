"""Step times: a calibrated roofline whose shape a user can reason about."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.perf.config import HardwareConfig
from sizing.perf.step import Profile, StepModel
from sizing.perf.steptime import ridge

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
PROFILE = Profile(0.5, 0.6, 0.003)


def _model(
    instance: str = "p5.48xlarge", model: str = LLAMA_8B, tp: int = 1, profile: Profile = PROFILE
) -> StepModel:
    return StepModel.for_config(HardwareConfig.create(model, instance, tp=tp), profile)


@settings(max_examples=40, deadline=None)
@given(
    seqs=st.integers(1, 512),
    context=st.integers(0, 2_000_000),
    low=st.floats(0.1, 0.9),
    gain=st.floats(1.0, 3.0),
)
def test_more_memory_bandwidth_never_slows_decode(seqs: int, context: int, low: float, gain: float):
    # given the same deployment with two bandwidth efficiencies
    slow = _model(profile=replace(PROFILE, bandwidth_eff=low))
    fast = _model(profile=replace(PROFILE, bandwidth_eff=min(1.0, low * gain)))
    # then a decode step is never slower with more bandwidth
    assert fast.iteration_time(0, seqs, context) <= slow.iteration_time(0, seqs, context) + 1e-12


def test_h200_decodes_at_least_as_fast_as_h100():
    # given the same model on H100 (3.35 TB/s) and H200 (4.8 TB/s), same TFLOPS
    h100, h200 = _model("p5.48xlarge"), _model("p5e.48xlarge")
    for seqs, ctx in ((1, 1000), (64, 64 * 2000), (256, 256 * 4000)):
        assert h200.iteration_time(0, seqs, ctx) <= h100.iteration_time(0, seqs, ctx)


def test_prefill_is_compute_bound_and_grows_with_tokens():
    sm = _model()
    times = [sm.iteration_time(p, 0, 0) for p in (128, 512, 2048, 8192)]
    assert times == sorted(times)
    # 8192 tokens cost several times 512 (2 x params x tokens dominates, not the weight read)
    assert times[3] > 5 * times[1]


def test_decode_is_memory_bound_at_batch_one():
    # given one sequence: the step reads all weights once
    sm = _model()
    one = sm.iteration_time(0, 1, 1000)
    eight = sm.iteration_time(0, 8, 8000)
    # then eight sequences cost far less than eight times one
    assert eight < 2 * one


def test_moe_reads_only_the_experts_a_batch_touches():
    # given Mixtral (8 experts, 2 per token)
    sm = _model("p5.48xlarge", "mistralai/Mixtral-8x7B-v0.1", tp=2)
    # then one token touches fewer weights than a batch that routes to every expert
    assert sm.weights_time(1) < sm.weights_time(8) < sm.weights_time(512) * 1.0001


def test_tensor_parallel_adds_all_reduce_but_splits_the_weights():
    one = _model("p5.48xlarge", "meta-llama/Llama-3.1-70B-Instruct", tp=4)
    two = _model("p5.48xlarge", "meta-llama/Llama-3.1-70B-Instruct", tp=8)
    assert two.iteration_time(0, 1, 1000) < one.iteration_time(0, 1, 1000)
    assert two._ar_fixed > 0


def test_scheduler_limits_are_exposed():
    sm = _model()
    assert sm.max_num_seqs == 1024 and sm.max_num_batched_tokens == 8192 and sm.block_size == 16
    assert sm.kv_capacity_tokens > 100_000
    small = _model("g5.xlarge")
    assert small.max_num_seqs == 256 and small.max_num_batched_tokens == 2048


def test_neuron_decode_reads_the_whole_compiled_context():
    # given a Neuron deployment compiled for 4096-token sequences
    cfg = HardwareConfig.create(LLAMA_8B, "inf2.48xlarge", tp=8, engine="neuron", max_model_len=4096)
    sm = StepModel.for_config(cfg, PROFILE)
    # then a decode step costs the same whatever the sequences actually hold
    assert sm.iteration_time(0, 8, 8 * 100) == sm.iteration_time(0, 8, 8 * 4000)
    # while a GPU engine pays for the context it reads
    gpu = _model()
    assert gpu.iteration_time(0, 8, 8 * 100) < gpu.iteration_time(0, 8, 8 * 4000)


def test_neuron_moe_is_costed_as_dense():
    cfg = HardwareConfig.create("mistralai/Mixtral-8x7B-v0.1", "trn1.32xlarge", tp=16, engine="neuron")
    sm = StepModel.for_config(cfg, PROFILE)
    assert sm.weights_time(1) == sm.weights_time(512)


def test_the_moe_efficiency_slows_mixture_of_experts_models_only():
    # GIVEN an MoE model and a dense model, each under a profile with and without an MoE penalty
    penalised = replace(PROFILE, step_overhead_s=0.0, moe_eff=0.5)
    plain = replace(PROFILE, step_overhead_s=0.0)
    moe = "mistralai/Mixtral-8x7B-Instruct-v0.1"
    moe_slow, moe_fast = _model(model=moe, tp=2, profile=penalised), _model(model=moe, tp=2, profile=plain)
    dense_slow, dense_fast = _model(profile=penalised), _model(profile=plain)
    for prefill, seqs, ctx in ((2048, 0, 0), (0, 1, 1000), (0, 64, 64 * 2000)):
        # THEN the MoE model's compute and memory time double (the all-reduce is not an expert cost) ...
        slow, fast = moe_slow.iteration_time(prefill, seqs, ctx), moe_fast.iteration_time(prefill, seqs, ctx)
        assert 1.7 * fast < slow <= 2 * fast + 1e-12
        # ... and the dense model is untouched
        assert dense_slow.iteration_time(prefill, seqs, ctx) == dense_fast.iteration_time(prefill, seqs, ctx)


@settings(max_examples=40, deadline=None)
@given(prefill=st.integers(1_024, 8_192), seqs=st.integers(1, 256), context_per_seq=st.integers(512, 8_192))
def test_a_mixed_step_pays_its_decode_kv_reads_on_top_of_its_prefill_matmuls(
    prefill: int, seqs: int, context_per_seq: int
):
    # given a prefill chunk's step that also decodes `seqs` sequences over their contexts
    sm = _model()
    step = sm.timing()
    context = seqs * context_per_seq
    mixed = step.iteration_time(prefill, seqs, context)
    # then the KV reads are not hidden under the matmuls' compute: the linear layers and attention run one after
    # the other (docs/engine.md, "Dynamics"), so the step takes at least its matmuls (or its weight reads) plus
    # reading the KV cache at the deployment's bandwidth
    matmuls = max(step.c_tok * (prefill + seqs), step.weights_time(prefill + seqs))
    assert mixed >= matmuls + step.kv_tok * (context + 2 * prefill) - 1e-12


# --- the linear phase near the roofline's ridge -------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    compute=st.floats(0.0, 1.0),
    memory=st.floats(0.0, 1.0),
    slowdown=st.one_of(st.just(0.0), st.floats(0.002, 1.0)),
)
def test_the_linear_phase_is_never_faster_than_the_roofline_nor_slower_than_no_overlap(
    compute: float, memory: float, slowdown: float
):
    # given a phase's compute and memory seconds and a ridge slowdown anywhere in its fitted range
    p = replace(PROFILE, ridge_slowdown=slowdown).ridge_exponent
    # when they are composed
    t = ridge(compute, memory, p)
    # then the phase takes at least the roofline's max (perfect overlap) and at most their sum (none)
    assert max(compute, memory) * (1 - 1e-12) <= t <= (compute + memory) * (1 + 1e-12)


@pytest.mark.parametrize("slowdown", [0.05, 0.25, 1.0])
def test_the_ridge_slowdown_is_what_a_step_pays_where_compute_and_weights_take_equal_time(slowdown: float):
    # given a phase whose compute and weight reads take equal time
    p = replace(PROFILE, ridge_slowdown=slowdown).ridge_exponent
    # then it runs `ridge_slowdown` slower than the roofline's max of the two
    assert ridge(0.01, 0.01, p) == pytest.approx(0.01 * (1 + slowdown))


def test_a_decode_step_near_the_ridge_slows_and_one_far_from_it_does_not():
    # given Llama-3.1-8B on one H100 with the roofline's hard max and with a ridge slowdown of 25%
    hard, soft = _model(), _model(profile=replace(PROFILE, ridge_slowdown=0.25))
    step = hard.timing()
    ridge_batch = round(
        step.weights_time(1) / step.c_tok
    )  # the decode batch whose matmuls take their weights' time
    # when each times a lone decoding sequence (weight-bound) and a batch at the ridge
    lone = soft.iteration_time(0, 1, 1000) / hard.iteration_time(0, 1, 1000)
    at_ridge = soft.timing().iteration_time(0, ridge_batch, 0) - step.iteration_time(0, ridge_batch, 0)
    # then the lone sequence costs the same (its compute is a few hundredths of its weight reads) ...
    assert lone == pytest.approx(1.0, abs=1e-6)
    # ... and the batch at the ridge pays a quarter of its linear phase more
    assert at_ridge == pytest.approx(0.25 * step.weights_time(ridge_batch), rel=0.02)


@settings(max_examples=100, deadline=None)
@given(
    seqs=st.integers(1, 512),
    context_per_seq=st.integers(0, 8_192),
    slowdown=st.one_of(st.just(0.0), st.floats(0.002, 1.0)),
    model=st.sampled_from([LLAMA_8B, "mistralai/Mixtral-8x7B-Instruct-v0.1"]),
)
def test_the_decode_lines_the_simulator_sums_agree_with_the_step_time(
    seqs: int, context_per_seq: int, slowdown: float, model: str
):
    # given a deployment (dense or MoE) with any ridge slowdown, and a pure-decode step of `seqs` sequences
    step = _model(model=model, tp=2, profile=replace(PROFILE, ridge_slowdown=slowdown)).timing()
    context = float(seqs * context_per_seq)
    # when the step is timed directly and by the lines the simulator sums runs of decode steps with
    c0, c1, m0, m1, o = step.decode_lines(seqs)
    by_lines = max(c0 + c1 * context, m0 + m1 * context) + o
    # then both say the same
    assert by_lines == pytest.approx(step.iteration_time(0, seqs, context), rel=1e-9)
