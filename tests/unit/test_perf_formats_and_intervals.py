"""Weight formats by layer type (MXFP4 experts), fp8 KV, the serving flags of `sizing predict`, and the stated
intervals."""

from __future__ import annotations

import itertools
import json

import pytest

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.cli import main
from sizing.perf.calibration import interval_for
from sizing.perf.config import HardwareConfig
from sizing.perf.memory import memory_fit
from sizing.perf.predict import predict
from sizing.perf.simulator import ClosedLoop, simulate
from sizing.perf.step import StepModel

GB = 1e9


def test_gpt_oss_120b_in_mxfp4_holds_its_experts_at_4_25_bits_and_attention_in_bf16():
    # given: 36 layers x 128 experts x (gate, up, down) of 2,880 x 2,880; the other 2.13 B parameters stay bf16
    experts = 36 * 128 * 3 * 2880 * 2880
    rest = 116.79e9 - experts
    by_hand = experts * 4.25 / 8 + rest * 2.0  # 60.91 GB + 4.26 GB
    # when
    cfg = HardwareConfig.create("gpt-oss-120b", "p5.48xlarge", 1, "mxfp4")
    fit = memory_fit(cfg)
    # then
    assert by_hand / GB == pytest.approx(65.17, abs=0.01)
    assert fit.weights_gb_per_device == pytest.approx(by_hand / GB, rel=1e-4)
    assert fit.fits  # one H100 holds it, which bf16 (234 GB) never could
    assert not memory_fit(HardwareConfig.create("gpt-oss-120b", "p5.48xlarge", 1, "bf16")).fits


def test_mxfp4_is_refused_on_a_dense_model_and_where_no_engine_runs_it():
    # when / then
    with pytest.raises(InvalidInput) as dense:
        HardwareConfig.create("meta-llama/Llama-3.1-8B", "p5.48xlarge", 1, "mxfp4")
    with pytest.raises(InvalidInput) as neuron:
        HardwareConfig.create("gpt-oss-120b", "trn2.48xlarge", 16, "mxfp4", "neuron")
    assert dense.value.problems[0].field == "quantization"
    assert neuron.value.problems[0].field == "quantization"


@pytest.mark.parametrize(
    ("model", "instance", "tp"),
    [
        ("meta-llama/Llama-3.1-8B", "g6e.xlarge", 1),
        ("meta-llama/Llama-3.1-70B", "p5.48xlarge", 4),
        ("gpt-oss-120b", "p5.48xlarge", 2),
        ("meta-llama/Llama-3.1-8B", "g6.xlarge", 1),
    ],
)
def test_an_fp8_kv_cache_never_lowers_kv_capacity_and_halves_decode_kv_bytes(
    model: str, instance: str, tp: int
):
    # given
    quant = "mxfp4" if "gpt-oss" in model else "bf16"
    auto = HardwareConfig.create(model, instance, tp, quant, max_model_len=4096, kv_cache_dtype="auto")
    fp8 = HardwareConfig.create(model, instance, tp, quant, max_model_len=4096, kv_cache_dtype="fp8")
    # when
    a, f = memory_fit(auto), memory_fit(fp8)
    # then
    assert f.kv_cache_tokens >= a.kv_cache_tokens
    assert f.kv_bytes_per_token_per_device == a.kv_bytes_per_token_per_device / 2
    assert StepModel.for_config(fp8)._kv_tok == pytest.approx(StepModel.for_config(auto)._kv_tok / 2)


@pytest.mark.parametrize(
    ("model", "instance", "tp", "engine"),
    [
        ("meta-llama/Llama-3.1-8B", "g6e.xlarge", 1, "vllm"),
        ("meta-llama/Llama-3.1-8B", "inf2.48xlarge", 8, "neuron"),
        ("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 4, "neuron"),
    ],
)
def test_a_larger_max_num_seqs_never_lowers_saturated_throughput_when_memory_allows(
    model: str, instance: str, tp: int, engine: str
):
    # given
    seqs = (4, 8, 16, 32)
    served = []
    for n in seqs:
        cfg = HardwareConfig.create(model, instance, tp, engine=engine, max_model_len=1536, max_num_seqs=n)
        sm = StepModel.for_config(cfg)
        assert sm.max_num_seqs == n  # memory allows it
        # when: saturated (more users than sequences)
        res = simulate(
            sm, ClosedLoop(64), TokenDistribution.fixed(1000), TokenDistribution.fixed(200), n_requests=256
        )
        served.append(res.output_tokens_per_s)
    # then
    assert all(b >= a * 0.999 for a, b in itertools.pairwise(served)), served


@pytest.mark.parametrize(
    ("model", "instance", "tp", "engine", "concurrency"),
    [
        ("meta-llama/Llama-3.1-8B", "g6e.xlarge", 1, "vllm", 1),
        ("meta-llama/Llama-3.1-8B", "g5.xlarge", 1, "vllm", 32),
        ("meta-llama/Llama-3.1-70B", "p5.48xlarge", 4, "vllm", 64),
        ("meta-llama/Llama-3.1-8B", "inf2.48xlarge", 24, "neuron", 4),
        ("gpt-oss-120b", "trn2.48xlarge", 16, "neuron", 8),
        ("gpt-oss-120b", "p5.48xlarge", 1, "vllm", 16),
    ],
)
def test_every_interval_contains_the_point_prediction(
    model: str, instance: str, tp: int, engine: str, concurrency: int
):
    # when
    quant = "mxfp4" if "gpt-oss" in model and engine == "vllm" else "bf16"
    out = predict(model, instance, tp, quant, engine, 1000, 200, concurrency=concurrency)
    # then
    bands = out["intervals"]
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        point = out[key]["mean"] if isinstance(out[key], dict) else out[key]
        assert bands[key]["low"] <= point <= bands[key]["high"], (key, bands[key], point)
        assert bands[key]["basis"]


def test_sizing_predict_takes_the_serving_flags_and_states_what_it_simulated(
    capsys: pytest.CaptureFixture[str],
):
    # when
    rc = main(
        [
            "predict",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--instance",
            "g6e.xlarge",
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--concurrency",
            "4",
            "--max-num-seqs",
            "32",
            "--max-num-batched-tokens",
            "1024",
            "--max-model-len",
            "8192",
            "--gpu-memory-utilization",
            "0.8",
            "--kv-cache-dtype",
            "fp8",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    # then
    assert rc == 0
    s = out["serving"]
    assert (s["max_num_seqs"], s["max_num_batched_tokens"], s["max_model_len"]) == (32, 1024, 8192)
    assert (s["gpu_memory_utilization"], s["kv_cache_dtype"]) == (0.8, "fp8")
    assert s["image"] and s["engine"] == "vllm" and "lnc" not in s


def test_sizing_predict_refuses_a_max_model_len_below_the_request(capsys: pytest.CaptureFixture[str]):
    # when
    rc = main(
        [
            "predict",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--instance",
            "g6e.xlarge",
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--concurrency",
            "1",
            "--max-model-len",
            "512",
        ]
    )
    # then
    assert rc == 2 and "max_model_len" in capsys.readouterr().err


def test_the_catalog_states_nvfp4_only_where_blackwell_runs_it():
    # given
    cat = load_catalog()
    # then
    assert cat.accelerators["b200"].supports("nvfp4") and cat.accelerators["b200"].fp4_tflops
    assert not cat.accelerators["h100"].supports("nvfp4") and cat.accelerators["h100"].supports("mxfp4")


def _cv_data(rows: list[tuple[str, str, str, float, bool]]) -> dict:
    """A profile whose leave-one-source-out rows are (family, engine, metric, predicted/measured, MoE)."""
    return {
        "version": "test",
        "cross_validation": {
            "rows": [
                {"row_id": f"R{i}", "family": f, "engine": e, "metric": m, "measured": 100.0,
                 "predicted": 100.0 * r, "moe": moe}
                for i, (f, e, m, r, moe) in enumerate(rows)
            ]
        },
    }  # fmt: skip


def test_a_mixture_of_experts_model_states_the_error_of_its_own_class_not_the_dense_models():
    # given a Neuron family whose dense models are predicted within 10% and whose MoE models (on two Neuron
    # generations) from a third to three times the measurement
    dense = [("neuron-v2", "neuron", "tpot", 0.9 + 0.2 * i / 29, False) for i in range(30)]
    moe = [
        ("neuron-v2" if i % 2 else "neuron-v3", "neuron", "tpot", 0.33 * 9 ** (i / 11), True)
        for i in range(12)
    ]
    data = _cv_data(dense + moe)
    # when the intervals of a dense and of a MoE model on that family are stated
    dense_band = interval_for("neuron-v2", "neuron", data)["tpot"]
    moe_band = interval_for("neuron-v2", "neuron", data, moe=True)["tpot"]
    # then the dense model's interval is its class's alone, and the MoE model's spans its class's spread (over
    # every Neuron family, too few on one), widened, and says so
    assert 0.85 <= dense_band["ratio"][0] < dense_band["ratio"][1] <= 1.15  # 0.92-1.08, widened 1.3x
    assert dense_band["rows"] == 30
    assert moe_band["ratio"][0] < 0.5 and moe_band["ratio"][1] > 2.0
    assert moe_band["rows"] == 12
    assert "MoE" in moe_band["basis"] and "widened" in moe_band["basis"]


def test_a_class_with_few_held_out_rows_falls_back_to_both_classes_of_its_kind_widened():
    # given a GPU family with dense rows only and 3 MoE rows in all
    dense = [("hopper", "vllm", "ttft", 0.8 + 0.4 * i / 24, False) for i in range(25)]
    moe = [("hopper", "vllm", "ttft", r, True) for r in (0.5, 1.0, 2.0)]
    data = _cv_data(dense + moe)
    # when a MoE model's interval is stated
    band = interval_for("hopper", "vllm", data, moe=True)["ttft"]
    dense_band = interval_for("hopper", "vllm", data)["ttft"]
    # then it rests on every held-out GPU TTFT row of both classes, widened beyond the dense models' band
    assert band["rows"] == 28
    assert band["basis"].startswith("every gpu family's models of both classes, widened")
    assert band["ratio"][0] < dense_band["ratio"][0] and band["ratio"][1] > dense_band["ratio"][1]


def test_a_gpu_moe_models_fallback_interval_is_not_stretched_by_neuron_rows():
    # given GPU TPOTs of both classes within 20% (two MoE rows), and Neuron rows whose harnesses disagree 4x
    dense = [("hopper", "vllm", "tpot", 0.8 + 0.4 * i / 24, False) for i in range(25)]
    moe = [("hopper", "vllm", "tpot", r, True) for r in (0.9, 1.1)]
    neuron = [("neuron-v2", "neuron", "tpot", 0.25 if i % 2 else 4.0, i % 3 == 0) for i in range(60)]
    data = _cv_data(dense + moe + neuron)
    # when a GPU MoE model's TPOT interval is stated
    band = interval_for("hopper", "vllm", data, moe=True)["tpot"]
    # then it rests on the 27 GPU rows, widened, not on the Neuron rows' 16x spread
    assert band["rows"] == 27
    assert band["ratio"][1] / band["ratio"][0] < 2.0


def test_a_gpu_moe_models_fallback_interval_leaves_out_the_cpu_rows_of_our_own_engine():
    # given GPU dense TTFTs within 20%, three GPU MoE rows, and CPU rows (our own harness on tiny models) off by
    # 4x either way
    dense = [("hopper", "vllm", "ttft", 0.8 + 0.4 * i / 24, False) for i in range(25)]
    moe = [("hopper", "vllm", "ttft", r, True) for r in (0.9, 1.0, 1.1)]
    cpu = [("xeon-spr", "vllm", "ttft", 0.25 if i % 2 else 4.0, False) for i in range(40)]
    data = _cv_data(dense + moe + cpu)
    # when a GPU MoE model's interval and a CPU model's are stated
    gpu_band = interval_for("hopper", "vllm", data, moe=True)["ttft"]
    cpu_band = interval_for("xeon-spr", "vllm", data, moe=True)["ttft"]
    # then the GPU one rests on the 28 GPU rows only, and is not stretched to the CPU rows' 16x spread;
    # the CPU MoE model's rests on the CPU rows
    assert gpu_band["rows"] == 28
    assert gpu_band["ratio"][1] / gpu_band["ratio"][0] < 2.0
    assert cpu_band["rows"] == 40 and "cpu" in cpu_band["basis"].lower()


def test_sizing_predict_states_a_neuron_moe_models_interval_from_moe_rows(capsys: pytest.CaptureFixture[str]):
    # when a MoE and a dense model on Neuron are predicted with the shipped profile
    def intervals(model: str, instance: str, tp: int) -> dict:
        assert main(["predict", "--model", model, "--instance", instance, "--tp", str(tp), "--engine", "neuron",
                     "--input-tokens", "1500", "--output-tokens", "250", "--concurrency", "1", "--json"]) == 0  # fmt: skip
        return json.loads(capsys.readouterr().out)["intervals"]

    moe = intervals("Qwen/Qwen3-30B-A3B", "trn2.48xlarge", 4)
    dense = intervals("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 4)
    # then the MoE model's TPOT interval is stated from MoE rows, and is wider than the dense model's
    assert "MoE" in moe["tpot_ms"]["basis"]
    assert "MoE" not in dense["tpot_ms"]["basis"]
    width = lambda b: b["ratio_p10_p90"][1] / b["ratio_p10_p90"][0]  # noqa: E731
    assert width(moe["tpot_ms"]) > width(dense["tpot_ms"])


def test_a_family_no_held_out_row_measured_states_its_kinds_band_widened_as_its_profile_is():
    # given GPU TPOTs held out on Hopper only
    data = _cv_data([("hopper", "vllm", "tpot", 0.8 + 0.4 * i / 29, False) for i in range(30)])
    # when a Hopper model's interval and a B200's (no row of its own: Hopper's profile carried over) are stated
    hopper = interval_for("hopper", "vllm", data)["tpot"]
    blackwell = interval_for("blackwell", "vllm", data)["tpot"]
    # then the B200's rests on the same rows, widened, and says why
    assert blackwell["rows"] == hopper["rows"] == 30
    assert blackwell["ratio"][0] < hopper["ratio"][0] and blackwell["ratio"][1] > hopper["ratio"][1]
    assert (
        "blackwell has no held-out rows" in blackwell["basis"] and "no held-out rows" not in hopper["basis"]
    )
