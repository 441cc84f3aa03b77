"""Estimates honest on data the estimator never saw: no fitted efficiency beyond the datasheet, the mechanisms that
replaced the over-1 fits, a cross-validation that holds out whole harnesses and engine generations, intervals that
always contain their prediction, Bedrock TTFT that grows with the prompt, and the simulator's queueing against the
M/D/1 closed form."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.base.distributions import TokenDistribution
from sizing.catalog import load_catalog
from sizing.perf.calibration import PROFILE_PATH, stated_interval
from sizing.perf.calrows import LOADTEST_ROWS_NAME, read_rows
from sizing.perf.config import HardwareConfig
from sizing.perf.crossval import harness_of
from sizing.perf.fit import BOUNDS, _profile
from sizing.perf.managed import REFERENCE_PROMPT_TOKENS, assumed_prefill, bedrock_ttft_ms
from sizing.perf.profile import ROOFLINE, Profile
from sizing.perf.reference import DEFAULT_REFERENCE, parse_rows
from sizing.perf.simulator import OpenLoop, simulate
from sizing.perf.step import StepModel
from sizing.perf.steptime import decode_batch_buckets
from sizing.plan import estimate
from sizing.workload.parse import parse_spec

EFFICIENCIES = ("compute_eff", "bandwidth_eff", "moe_eff")


# --- nothing beyond physics ---------------------------------------------------------------------------------------
def test_no_shipped_profile_states_an_efficiency_above_the_datasheet():
    # given the shipped calibration
    data = json.loads(PROFILE_PATH.read_text())
    # when every profile's efficiencies are read
    over = {
        (key, name): entry[name]
        for key, entry in data["profiles"].items()
        for name in EFFICIENCIES
        if entry[name] > 1.0
    }
    # then none exceeds 1 of the chip's peak (nor a MoE model's expert work its dense layers')
    assert not over


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-8.0, max_value=8.0), min_size=len(BOUNDS), max_size=len(BOUNDS)))
def test_no_fitted_efficiency_is_above_one_wherever_the_optimiser_wanders(theta: list[float]):
    # given any parameter vector the fit's optimiser may try (log space)
    # when it becomes a profile
    prof = _profile(theta, "any", "any", "fit")
    # then compute, bandwidth and MoE efficiencies stay at or below 1
    assert prof.compute_eff <= 1.0
    assert prof.bandwidth_eff <= 1.0
    assert prof.moe_eff <= 1.0


@pytest.mark.parametrize(
    "model", ["mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B"]
)
def test_a_lone_decode_step_never_reads_memory_faster_than_the_datasheet(model: str):
    # given the shipped H100 profile and the plain roofline (datasheet bandwidth, no overheads)
    cfg = HardwareConfig(model_id=model, instance_type="p5.48xlarge", tensor_parallel=2, quantization="bf16")
    calibrated = StepModel.for_config(cfg)
    roofline = StepModel.for_config(cfg, ROOFLINE)
    # when both time the weights a batch of 64 touches
    # then the calibrated step is never faster than reading them at the datasheet bandwidth
    assert calibrated.weights_time(64) >= roofline.weights_time(64) * (1 - 1e-9)


def test_an_untied_input_embedding_table_is_not_read_every_step():
    # given Llama-3.1-8B (vocabulary 128,256 x 4,096 input table, a separate LM head) on one H100, plain roofline
    cat = load_catalog()
    spec = cat.models["meta-llama/Llama-3.1-8B"]
    cfg = HardwareConfig(
        model_id=spec.id, instance_type="p5.48xlarge", tensor_parallel=1, quantization="bf16"
    )
    sm = StepModel.for_config(cfg, ROOFLINE)
    bw = cat.accelerators["h100"].device_bw_bytes
    # when a lone decode step reads the weights
    read = sm.weights_time(1) * bw
    # then it reads the stated weights less the input table (1.05 GB of bf16)
    table = spec.vocab_size * spec.hidden_size * 2
    total = sum(spec.part_bytes("bf16").values())
    assert read == pytest.approx(total - table, rel=1e-6)


def test_a_moe_models_efficiency_slows_its_experts_not_its_kv_reads():
    # given Mixtral on H100 with an expert efficiency of 0.5, and the same profile without it
    cfg = HardwareConfig(
        model_id="mistralai/Mixtral-8x7B-v0.1",
        instance_type="p5.48xlarge",
        tensor_parallel=2,
        quantization="bf16",
    )
    base = Profile(0.6, 0.8, 0.0, 0.0, request_overhead_s=0.0)
    slow = StepModel.for_config(cfg, Profile(0.6, 0.8, 0.0, 0.0, request_overhead_s=0.0, moe_eff=0.5))
    fast = StepModel.for_config(cfg, base)
    # when
    kv_slow, kv_fast = slow.timing().kv_tok, fast.timing().kv_tok
    # then KV reads run at the dense efficiency, expert reads take twice as long
    assert kv_slow == pytest.approx(kv_fast)
    assert slow.timing().w_expert == pytest.approx(2 * fast.timing().w_expert)
    assert slow.timing().w_dense == pytest.approx(fast.timing().w_dense)


# --- known wrong shapes: MoE decode on Neuron -----------------------------------------------------------------------
def neuron_tpot_ms(model: str, tp: int) -> float:
    cfg = HardwareConfig(
        model_id=model,
        instance_type="trn2.48xlarge",
        tensor_parallel=tp,
        quantization="bf16",
        engine="neuron",
        max_model_len=4096,
    )
    return StepModel.for_config(cfg).iteration_time(0, 1, 1000) * 1000


def test_a_neuron_decode_step_runs_at_the_smallest_compiled_batch_that_holds_its_sequences():
    # given a compiled batch of 225 sequences
    buckets = decode_batch_buckets(225)
    # then its decode graphs are powers of two up to it, and the compiled batch itself
    assert buckets == (1, 2, 4, 8, 16, 32, 64, 128, 225)


def test_moe_decode_on_trn2_speeds_up_with_tensor_parallelism_and_beats_a_dense_70b():
    # given Qwen3-30B-A3B (3.3B active) and Llama-3.1-70B on trn2, a lone sequence
    # when the TP grows from 8 to 64 cores
    qwen = {tp: neuron_tpot_ms("Qwen/Qwen3-30B-A3B", tp) for tp in (8, 16, 32, 64)}
    llama = {tp: neuron_tpot_ms("meta-llama/Llama-3.1-70B-Instruct", tp) for tp in (8, 16, 32, 64)}
    # then its TPOT falls with the TP (no floor from padding to the compiled batch)
    assert qwen[64] < qwen[16] < qwen[8]
    assert qwen[64] < 0.6 * qwen[8]
    # and the MoE model is never slower than the dense 70B at the same TP
    assert all(qwen[tp] < llama[tp] for tp in qwen)


# --- cross-validation that holds out harnesses and engine generations ---------------------------------------------
@pytest.fixture(scope="module")
def reference_rows():
    rows, _ = parse_rows(DEFAULT_REFERENCE)
    return rows


def test_vllm_generations_and_vendor_tables_are_held_out_apart(reference_rows):
    # given the reference rows
    groups = {r.row_id: harness_of(r) for r in reference_rows}
    v0 = {
        groups[r.row_id]
        for r in reference_rows
        if r.engine == "vllm" and r.build == "v0" and r.start == "spread"
    }
    v1 = {
        groups[r.row_id] for r in reference_rows if r.engine == "vllm" and not r.build and r.start == "spread"
    }
    trt = {groups[r.row_id] for r in reference_rows if r.study == "NVIDIA/TensorRT-LLM"}
    # then V0 and V1 are different groups, TensorRT-LLM's own tables one group of their own
    assert v0 and v1 and v0.isdisjoint(v1)
    assert len(trt) == 1 and trt.isdisjoint(v0 | v1)


def test_a_client_harness_is_one_group_whatever_engine_it_measured(reference_rows):
    # given llmperf's rows (vLLM, TGI and TensorRT-LLM behind the same wave client)
    llmperf = [r for r in reference_rows if r.start == "waves"]
    # then they are held out together
    assert len({r.engine for r in llmperf}) > 1
    assert len({harness_of(r) for r in llmperf}) == 1


def test_the_shipped_profile_states_the_harness_cross_validation(reference_rows):
    # given the shipped calibration
    data = json.loads(PROFILE_PATH.read_text())
    table = data["cross_validation_by_harness"]
    # then the usable rows' measured metrics were predicted by fits that never saw their harness
    # (the reference rows and the product's own load-test rows kept beside the profile, which it also fits)
    own = PROFILE_PATH.parent / LOADTEST_ROWS_NAME
    rows = [*reference_rows, *(read_rows(own) if own.exists() else [])]
    measured = sum(
        bool(r.ttft_ms) + bool(r.tpot_ms) + bool(r.output_tokens_per_s or r.requests_per_s) + bool(r.e2e_s)
        for r in rows
    )
    assert table["grouping"] == "harness"
    assert data["rows"]["usable"] * 2 <= table["overall"]["n"] <= measured


# --- intervals --------------------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=1e-3, max_value=1e6),
    st.floats(min_value=0.05, max_value=5.0),
    st.floats(min_value=1.0, max_value=20.0),
    st.sampled_from(["ttft", "tpot", "throughput"]),
)
def test_the_stated_interval_always_contains_the_point_prediction(
    pred: float, low: float, spread: float, metric: str
):
    # given any band of predicted/measured ratios, optimistic, pessimistic or straddling 1
    bands = {metric: {"ratio": [low, low * spread], "rows": 30, "basis": "test"}}
    # when the interval of a prediction is stated
    out = stated_interval(pred, metric, bands)
    # then it contains the prediction
    assert out is not None
    assert out["low"] <= round(pred, 4 if pred < 10 else 1) <= out["high"]


# --- Bedrock TTFT grows with the prompt ---------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "openai/gpt-oss-120b"]),
    st.floats(min_value=1, max_value=120_000),
    st.floats(min_value=0, max_value=120_000),
    st.floats(min_value=50, max_value=2000),
)
def test_a_longer_prompt_never_gives_a_lower_bedrock_ttft(
    model: str, prompt: float, more: float, stated: float
):
    # given a Bedrock model's stated short-chat TTFT and its assumed prefill
    cat = load_catalog()
    prefill = assumed_prefill(cat.models[model], cat)
    # when the prompt grows
    # then the TTFT never falls, and never drops below the stated figure
    short, long = bedrock_ttft_ms(stated, prompt, prefill), bedrock_ttft_ms(stated, prompt + more, prefill)
    assert stated <= short <= long


def bedrock_ttft_p50(prompt: int) -> tuple[float, list[str]]:
    raw = {
        "name": "long-prompt",
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "rate": {"peak_rps": 1},
        "traffic": {"profile": "flat"},
        "tokens": {"input": {"fixed": prompt}, "output": {"fixed": 200}},
        "slo": {"e2e_s": {"p95": 600}},
        "constraints": {"deployments": ["bedrock"], "region": "us-west-2"},
    }
    r = estimate(parse_spec(raw), tune=False).document()
    a = next(a for a in r["architectures"] if a["bedrock"]["mode"] == "on-demand")
    return a["predicted"]["ttft_ms"]["p50"], a["notes"]


def test_a_30k_token_prompt_on_bedrock_waits_longer_than_a_short_chat_and_says_why():
    # given the same Bedrock model asked with a short chat prompt and a 30,000-token document
    # when both are estimated
    short, _ = bedrock_ttft_p50(REFERENCE_PROMPT_TOKENS)
    long, notes = bedrock_ttft_p50(30_000)
    # then the long prompt's first token comes seconds later, and the estimate states how TTFT was derived
    assert long > short + 1000
    assert any("TTFT grows with the prompt" in n for n in notes)


# --- queueing against a closed form ---------------------------------------------------------------------------------
@pytest.mark.parametrize("utilisation", [0.3, 0.6, 0.85])
def test_a_one_request_server_queues_as_m_d_1(utilisation: float):
    # given a replica that serves one request at a time (max_num_seqs 1), a fixed prompt and a single output
    # token, so each request holds the server for one deterministic prefill step D; no per-request overhead
    cfg = HardwareConfig(
        model_id="meta-llama/Llama-3.1-8B",
        instance_type="p5.48xlarge",
        tensor_parallel=1,
        quantization="bf16",
        max_num_seqs=1,
    )
    sm = StepModel.for_config(cfg, Profile(0.5, 0.7, 0.001, 0.0, request_overhead_s=0.0))
    d = sm.iteration_time(1000, 0, 0)
    rate = utilisation / d
    # when Poisson arrivals at that rate are simulated
    res = simulate(
        sm,
        OpenLoop(rate),
        TokenDistribution.fixed(1000),
        TokenDistribution.fixed(1),
        n_requests=20_000,
        seed=3,
    )
    # then the mean TTFT is the M/D/1 (Pollaczek-Khinchine) wait plus the service: D + rho D / (2 (1 - rho))
    expected = d + utilisation * d / (2 * (1 - utilisation))
    tolerance = 0.05 if utilisation < 0.8 else 0.12  # sampling error grows as rho -> 1
    assert res.ttft_ms.mean / 1000 == pytest.approx(expected, rel=tolerance)
    assert math.isfinite(res.ttft_ms.mean)
