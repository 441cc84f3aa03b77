"""Neuron as the Neuron SDK runs it: logical NeuronCores (LNC), tp_degree with padded heads, compiled batch and
context-encoding buckets."""

from __future__ import annotations

import json

import pytest

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.cli import main
from sizing.perf.config import HardwareConfig
from sizing.perf.memory import memory_fit
from sizing.perf.predict import predict
from sizing.perf.step import StepModel

GB = 1e9


def test_trn2_exposes_64_logical_cores_of_twice_the_memory_at_its_default_lnc():
    # given
    cat = load_catalog()
    inst = cat.instance("trn2.48xlarge")
    acc = cat.accelerator_of(inst)
    # when
    default = HardwareConfig.create("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8, engine="neuron").parts()
    physical = HardwareConfig.create(
        "meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8, engine="neuron", lnc=1
    ).parts()
    # then: 16 chips x 4 logical cores, each a quarter of the chip's 103.08 GB; LNC=1 gives 128 of an eighth
    assert acc.lnc == 2 and default.devices == 64
    assert default.accelerator.device_memory_bytes == pytest.approx(103.08 * GB / 4)
    assert physical.devices == 128
    assert physical.accelerator.device_memory_bytes == pytest.approx(103.08 * GB / 8)


def test_gpt_oss_120b_at_tp16_fits_trn2_at_lnc2_but_not_on_16_physical_cores():
    # when
    logical = predict("gpt-oss-120b", "trn2.48xlarge", 16, "bf16", "neuron", 1000, 200)
    physical = predict("gpt-oss-120b", "trn2.48xlarge", 16, "bf16", "neuron", 1000, 200, lnc=1)
    # then
    assert logical["fits"] and logical["serving"]["lnc"] == 2
    assert not physical["fits"] and physical["serving"]["lnc"] == 1


def test_a_tp_that_does_not_divide_the_heads_runs_on_inf2_with_the_padding_counted():
    # given: Llama-3.1-8B has 32 query and 8 KV heads; 24 cores pad the queries to 48 (2 a core) and replicate
    # the KV heads to 24 (1 a core)
    cfg = HardwareConfig.create("meta-llama/Llama-3.1-8B", "inf2.48xlarge", 24, engine="neuron")
    spec = cfg.parts().model
    # when
    fit = memory_fit(cfg)
    # then: the weights a core holds, by hand: everything but attention shared 24 ways, attention as held
    attn_params = 32 * 4096 * 128 * (2 * 32 + 2 * 8)
    held_attn = 32 * 4096 * 128 * 2 * (2 + 1) * 2.0
    expected = (spec.params_b * 1e9 - attn_params) * 2.0 / 24 + held_attn
    assert fit.weights_gb_per_device == pytest.approx(expected / GB, rel=1e-3)
    assert fit.kv_bytes_per_token_per_device == 2 * 32 * 1 * 128 * 2.0


def test_sizing_predict_runs_llama_8b_at_tp24_on_inf2(capsys: pytest.CaptureFixture[str]):
    # when
    rc = main(
        [
            "predict",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--instance",
            "inf2.48xlarge",
            "--tp",
            "24",
            "--engine",
            "neuron",
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--concurrency",
            "4",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    # then
    assert rc == 0 and out["fits"] and out["tensor_parallel"] == 24
    assert out["ttft_ms"]["mean"] > 0


@pytest.mark.parametrize(("instance", "engine"), [("trn2.48xlarge", "neuron"), ("g6e.xlarge", "vllm")])
def test_sizing_predict_without_an_engine_runs_the_instances_own(
    instance: str, engine: str, capsys: pytest.CaptureFixture[str]
):
    # given a deployment named by its instance alone, no --engine
    args = ["predict", "--model", "meta-llama/Llama-3.1-8B", "--instance", instance, "--input-tokens", "1000"]
    # when it is predicted
    rc = main([*args, "--output-tokens", "200", "--concurrency", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    # then it runs the engine that instance serves (the Neuron SDK's on Trainium, not a refusal naming vLLM)
    assert rc == 0 and out["engine"] == engine
    assert out["tpot_ms"]["mean"] > 0


def test_a_named_engine_the_instance_does_not_run_is_refused_naming_the_field():
    # given vLLM's GPU build named for a Trainium instance
    # when the deployment is built
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 4, "bf16", "vllm")
    # then the engine is named, with the one that runs there
    assert "use neuron" in str(err.value)
    assert [p.field for p in err.value.problems] == ["engine"]


def test_gpu_engines_still_refuse_a_tp_that_does_not_divide_the_heads():
    # when / then
    with pytest.raises(InvalidInput, match="does not divide the 32 attention heads"):
        HardwareConfig.create("meta-llama/Llama-3.1-8B", "g5.12xlarge", 3)


def test_a_degree_the_sdk_does_not_compile_is_refused_naming_the_degrees():
    # when / then
    with pytest.raises(InvalidInput, match="tp_degree") as exc:
        HardwareConfig.create("meta-llama/Llama-3.1-8B", "inf2.48xlarge", 12, engine="neuron")
    assert exc.value.problems[0].field == "tensor_parallel"


def test_lnc_is_refused_on_a_gpu_naming_the_field():
    # when / then
    with pytest.raises(InvalidInput) as exc:
        HardwareConfig.create("meta-llama/Llama-3.1-8B", "g6e.xlarge", 1, lnc=1)
    assert exc.value.problems[0].field == "lnc"


def test_a_prompt_is_encoded_padded_to_its_context_bucket():
    # given: the SDK's default buckets up to 4096 are 128, 256, 512, 1024, 2048, 4096
    cfg = HardwareConfig.create(
        "meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8, engine="neuron", max_model_len=4096
    )
    sm = StepModel.for_config(cfg)
    # when
    t1500, t2048, t2100 = (sm.iteration_time(n, 0, 0) for n in (1500, 2048, 2100))
    # then: 1,500 tokens cost the 2,048-token bucket's FLOPs (only the KV written differs); 2,100 the 4,096's
    assert sm.prefill_buckets == (128, 256, 512, 1024, 2048, 4096)
    assert t1500 == pytest.approx(t2048, rel=0.02)
    assert t2100 > 1.5 * t2048


def test_a_decode_step_runs_the_smallest_compiled_batch_bucket_that_holds_its_sequences():
    # given a batch compiled for 16 sequences (decode graphs for 1, 2, 4, 8 and 16)
    cfg = HardwareConfig.create(
        "meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8, engine="neuron", max_model_len=2048, max_num_seqs=16
    )
    sm = StepModel.for_config(cfg)
    seq = sm.profile.seq_overhead_s
    # when / then: 5 running sequences pay for the 8-row graph (only the per-sequence host cost differs), 9 for
    # the 16-row one; a lone sequence runs the 1-row graph, cheaper than the compiled batch
    five, eight = sm.iteration_time(0, 5, 5000), sm.iteration_time(0, 8, 8000)
    nine, full = sm.iteration_time(0, 9, 9000), sm.iteration_time(0, 16, 16000)
    assert five == pytest.approx(eight - 3 * seq, rel=1e-9)
    assert nine == pytest.approx(full - 7 * seq, rel=1e-9)
    assert sm.iteration_time(0, 1, 1000) < five < nine
