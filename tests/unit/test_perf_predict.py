"""`sizing predict`: the point-prediction contract of DESIGN.md."""

from __future__ import annotations

import json

import pytest

from sizing.cli import main
from sizing.perf.predict import predict

CONTRACT = {
    "model",
    "instance_type",
    "tensor_parallel",
    "quantization",
    "engine",
    "input_tokens",
    "output_tokens",
    "fits",
    "kv_cache_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2e_s",
    "output_tokens_per_s",
    "requests_per_s",
}
PERCENTILES = {"mean", "p50", "p95", "p99"}


def test_prediction_has_the_contract_keys():
    # when
    out = predict(
        "meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, "bf16", "vllm", 1000, 200, concurrency=8
    )
    # then
    assert set(out) >= CONTRACT
    assert out["concurrency"] == 8 and "request_rate" not in out
    for key in ("ttft_ms", "tpot_ms", "e2e_s"):
        assert set(out[key]) == PERCENTILES
    assert out["fits"] is True
    assert out["output_tokens_per_s"] > 0 and out["requests_per_s"] > 0
    assert out["calibration"]["family"] == "l40s"


def test_rate_load_reports_request_rate():
    out = predict(
        "meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, input_tokens=500, output_tokens=100, rate=2.0
    )
    assert out["request_rate"] == 2.0 and "concurrency" not in out


def test_a_large_concurrency_means_saturated():
    small = predict(
        "meta-llama/Llama-3.1-8B-Instruct", "g5.xlarge", 1, input_tokens=500, output_tokens=200, concurrency=4
    )
    big = predict(
        "meta-llama/Llama-3.1-8B-Instruct",
        "g5.xlarge",
        1,
        input_tokens=500,
        output_tokens=200,
        concurrency=5000,
    )
    assert big["saturated"] and not small["saturated"]
    assert big["output_tokens_per_s"] > small["output_tokens_per_s"]


def test_a_model_that_does_not_fit_is_an_answer(capsys: pytest.CaptureFixture[str]):
    # when 70B bf16 is asked on four 24 GB GPUs
    rc = main(
        [
            "predict",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--instance",
            "g5.12xlarge",
            "--tp",
            "4",
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--concurrency",
            "8",
            "--json",
        ]
    )
    # then it answers with fits false and the arithmetic, and exits 3: no usable deployment, not bad input
    out = json.loads(capsys.readouterr().out)
    assert rc == 3
    assert out["fits"] is False
    assert "GB" in out["memory"]["reason"]
    assert set(out) >= CONTRACT


def test_cli_prints_the_same_json_as_the_function(capsys: pytest.CaptureFixture[str]):
    args = [
        "--model",
        "llama-3.1-8b",
        "--instance",
        "g6.xlarge",
        "--input-tokens",
        "800",
        "--output-tokens",
        "150",
    ]
    rc = main(["predict", *args, "--rate", "0.5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out == json.loads(
        json.dumps(
            predict("llama-3.1-8b", "g6.xlarge", None, "bf16", "vllm", 800, 150, rate=0.5), default=str
        )
    )


def test_bad_input_exits_2_with_the_reason(capsys: pytest.CaptureFixture[str]):
    rc = main(
        [
            "predict",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--instance",
            "g5.12xlarge",
            "--tp",
            "3",
            "--input-tokens",
            "10",
            "--output-tokens",
            "10",
            "--concurrency",
            "1",
        ]
    )
    assert rc == 2
    assert "64 attention heads" in capsys.readouterr().err
    rc = main(
        [
            "predict",
            "--model",
            "llama-3.1-8b",
            "--instance",
            "g5.huge",
            "--input-tokens",
            "10",
            "--output-tokens",
            "10",
            "--concurrency",
            "1",
        ]
    )
    assert rc == 2
    assert "unknown instance type" in capsys.readouterr().err


def test_a_request_longer_than_the_models_context_is_refused(capsys: pytest.CaptureFixture[str]):
    rc = main(
        [
            "predict",
            "--model",
            "mistralai/Mistral-7B-v0.3",
            "--instance",
            "g6e.xlarge",
            "--input-tokens",
            "30000",
            "--output-tokens",
            "5000",
            "--concurrency",
            "1",
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "35,000" in err and "32,768" in err


def test_a_shared_prefix_is_served_from_the_prefix_cache_as_the_planner_sizes_it(
    capsys: pytest.CaptureFixture[str],
):
    # GIVEN 3,000-token prompts, 16 in flight on one L40S, with and without a 2,400-token prefix they all share
    def run(prefix: int) -> dict:
        assert (
            main(
                [
                    "predict",
                    "--model",
                    "llama-3.1-8b",
                    "--instance",
                    "g6e.xlarge",
                    "--input-tokens",
                    "3000",
                    "--output-tokens",
                    "200",
                    "--concurrency",
                    "16",
                    "--shared-prefix",
                    str(prefix),
                    "--json",
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)  # fmt: skip

    alone, shared = run(0), run(2400)
    # THEN the shared prefix turns prefix caching on and says so, and only the rest of each prompt is prefilled:
    # first tokens come sooner and the replica serves more
    assert shared["serving"]["enable_prefix_caching"] and not alone["serving"]["enable_prefix_caching"]
    assert shared["shared_prefix_tokens"] == 2400 and "shared_prefix_tokens" not in alone
    assert shared["ttft_ms"]["p50"] < 0.6 * alone["ttft_ms"]["p50"]
    assert shared["output_tokens_per_s"] > alone["output_tokens_per_s"]
    # AND a prefix as long as the prompt is refused, naming the field
    args = ["predict", "--model", "llama-3.1-8b", "--instance", "g6e.xlarge", "--input-tokens", "3000",
            "--output-tokens", "200", "--concurrency", "16", "--shared-prefix", "3000"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "shared_prefix" in err and "3,000 tokens" in err and "Traceback" not in err
