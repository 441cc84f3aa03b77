"""The `sizing` command line: workload and catalog commands, exit code 2 on bad input, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sizing.catalog.loading import OVERLAY_ENV, reset_cache
from sizing.cli import PROCESS_ENVIRONMENT, main
from sizing.results import EstimateResult
from sizing.store.schema import load_template

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_workload_json_prints_the_derived_figures(capsys, examples_dir):
    assert main(["workload", str(examples_dir / "chatbot.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["peak_rps"] == pytest.approx(8.3333, rel=1e-4)
    assert out["model"] == "meta-llama/Llama-3.1-70B"


def test_bad_spec_exits_2_naming_the_field(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump({"model": "llama-3.1-8b", "users": {"total": -1}, "tokens": {}, "slo": {}}))
    assert main(["workload", str(f)]) == 2
    err = capsys.readouterr().err
    assert "users.total" in err and "Traceback" not in err


def test_unknown_model_exits_2_with_suggestions(tmp_path, capsys, examples_dir):
    raw = yaml.safe_load((examples_dir / "chatbot.yaml").read_text())
    raw["model"] = "llama-3.1-80b"
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(raw))
    assert main(["workload", str(f)]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_unknown_command_or_flag_exits_2():
    with pytest.raises(SystemExit) as exc:
        main(["workload", "--nope"])
    assert exc.value.code == 2


def test_catalog_listings_as_json(capsys):
    assert main(["catalog", "instances", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(r["instance_type"] == "inf2.48xlarge" and r["devices"] == 24 for r in rows)
    assert main(["catalog", "models", "--json"]) == 0
    assert any(r["id"] == "Qwen/Qwen3-30B-A3B" for r in json.loads(capsys.readouterr().out))


def test_add_model_writes_to_an_overlay_and_the_model_resolves(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(OVERLAY_ENV, str(tmp_path))
    reset_cache()
    try:
        rc = main(
            ["catalog", "add-model", str(FIXTURES / "llama-3.1-8b.config.json"), "--id", "acme/support-8b"]
        )
        assert rc == 0
        from sizing.catalog import load_catalog

        assert load_catalog().model("acme/support-8b").layers == 32
    finally:
        reset_cache()


def test_add_model_with_a_broken_config_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(OVERLAY_ENV, str(tmp_path))
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 10}')
    assert main(["catalog", "add-model", str(bad), "--id", "acme/x"]) == 2
    assert not (tmp_path / "models.yaml").exists()
    reset_cache()


def test_estimate_says_how_far_the_best_architectures_prediction_may_be_off(tmp_path, capsys):
    # GIVEN a small workload on 8B hardware
    f = tmp_path / "chat.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "model": "llama-3.1-8b",
                "users": {"total": 2000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
                "tokens": {"input": {"mean": 800, "p95": 2000}, "output": {"mean": 150, "p95": 400}},
                "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 20}},
                "constraints": {"instance_families": ["g6e"], "deployments": ["eks"]},
            }
        )
    )
    # WHEN it is estimated
    assert main(["estimate", str(f), "--top", "3"]) == 0
    out = capsys.readouterr().out
    # THEN beside the best architecture the table says the typical error of its predictions and where it comes from
    line = next(ln for ln in out.splitlines() if "typically within" in ln)
    assert "TTFT ±" in line and "TPOT ±" in line and "calibration: l40s" in line


#: a replica's rates, which the table does not show
RATES = {"rps": 1.0, "rps_slo_limit": 1.2, "rps_at_peak": 0.7, "kv_cache_tokens": 100000}


def test_the_estimate_table_shows_in_flight_both_headrooms_the_tuning_and_the_sizes_folded_in(
    monkeypatch, capsys, examples_dir
):
    # GIVEN an estimate result whose best row was tuned and also fits on a dearer size
    import sizing.plan.search

    arch = {
        "rank": 1, "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand", "model": "m", "deployment": "eks",
        "instance_type": "g6e.xlarge", "tensor_parallel": 1, "quantization": "fp8", "engine": "vllm",
        "meets_slo": True, "replicas": {"min": 2, "peak": 3, "mean": 2.5},
        "per_replica": {"max_concurrency": 16.3, "in_flight": 3.4, **RATES},
        "predicted": {"ttft_ms": {"p95": 161.0}, "tpot_ms": {"p95": 10.8}, "e2e_s": {"p95": 1.48}},
        "headroom_pct": 67.9,
        "headroom": {"load_pct": 67.9, "latency": {"e2e_s.p95": 40.9}, "tightest": "e2e_s.p95", "tightest_pct": 40.9},
        "tuning": {"searched": 4, "summary": "max_num_seqs 128 instead of 256: capacity +12%", "changed": {"max_num_seqs": [256, 128]}},
        "also_fits_on": [{"instance_type": "g6e.2xlarge", "usd_per_month": 2500.0}],
        "cost": {"usd_per_hour_peak": 2.7, "usd_per_month": 2000.0},
    }  # fmt: skip
    older = {
        **arch,
        "rank": 2,
        "per_replica": {"max_concurrency": 9.0, **RATES},
        "headroom": None,
        "tuning": None,
    }
    older.pop("also_fits_on")
    result = {
        "workload": {
            "name": "w", "model": "m", "peak_rps": 2.0, "peak_concurrency": 4.0, "avg_rps": 1.0,
            "input_tokens": {"mean": 200}, "output_tokens": {"mean": 20}, "slo": {},
        },
        "search": {"hardware_options": 1, "simulated": 1, "feasible": 2, "seconds": 0.1},
        "architectures": [arch, older],
        "rejected": [],
        "summary": "The answer costs 3.9x the cheapest hardware that fits in memory.",
    }  # fmt: skip
    typed = EstimateResult.model_validate(result)
    monkeypatch.setattr(sizing.plan.search, "estimate", lambda *a, **k: typed)
    # WHEN the table is printed
    assert main(["estimate", str(examples_dir / "chatbot.yaml")]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("1 "))
    # THEN "in flight" is the simulation's count at the operating point, and headroom shows load and latency
    assert " 3.4 " in row and "16.3" not in row
    assert "68% load, e2e p95 41%" in row
    # AND a result written before those fields falls back to what it has
    old_row = next(ln for ln in out.splitlines() if ln.startswith("2 "))
    assert " 9.0 " in old_row and "68% load" in old_row
    # AND the row's tuning, the sizes folded into it and the result's summary are printed
    note = next(ln for ln in out.splitlines() if ln.startswith("  #1 "))
    assert note.startswith(
        "  #1 estimated; needs EC2 quota 'Running On-Demand G and VT instances' of 12 vCPUs"
    )
    assert note.endswith(
        "; max_num_seqs 128 instead of 256: capacity +12%; also fits on g6e.2xlarge ($2,500/month)"
    )
    assert "The answer costs 3.9x the cheapest hardware" in out


def test_the_cli_and_the_functions_start_with_the_same_process_settings():
    # given the settings the CLI applies before pydantic and numpy load
    # when the deployed functions' Globals are read
    variables = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    # then every function starts with the same values (pydantic's plugin scan off, one OpenBLAS thread)
    assert {k: str(variables.get(k)) for k in PROCESS_ENVIRONMENT} == PROCESS_ENVIRONMENT


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            {
                "name": "nightly-summaries",
                "model": "llama-3.1-8b",
                "users": {"total": 200, "peak_active_fraction": 0.1, "requests_per_active_hour": 20},
                "tokens": {"input": {"mean": 4000, "p95": 8000}, "output": {"mean": 300, "p95": 500}},
                "slo": {"e2e_s": {"p99": 86400}},
                "constraints": {"data_residency": "geography"},
            },
            id="day-long-deadline",
        ),
        pytest.param(
            {
                "model": "llama-3.1-8b",
                "preset": "batch",
                "rate": {"peak_rps": 0.2},
                "tokens": {"input": {"mean": 2000, "p95": 4000}, "output": {"mean": 300, "p95": 600}},
                "slo": {"e2e_s": {"p99": 86400}},
                "constraints": {"data_residency": "geography"},
            },
            id="batch-preset",
        ),
    ],
)
def test_the_table_renders_a_bedrock_batch_job_that_has_no_per_request_latency(tmp_path, capsys, spec):
    # GIVEN a workload whose deadline lets Bedrock's batch inference (no TTFT or TPOT, a completion window) rank
    f = tmp_path / "batch.yaml"
    f.write_text(yaml.safe_dump(spec))
    # WHEN it is estimated as the default table
    assert main(["estimate", str(f)]) == 0
    out = capsys.readouterr()
    # THEN the table prints, the batch row shows "-" where it has no figure and its window in hours
    assert "Traceback" not in out.err
    row = next(ln for ln in out.out.splitlines() if ln.split()[:2][1:] == ["bedrock"] and " h " in ln)
    cells = row.split()
    assert "24.0" in cells and "per-token" in cells
    # replicas, in flight, TTFT, TPOT and headroom: none applies to a batch job
    assert cells.count("-") >= 4


@pytest.mark.parametrize("as_json", [False, True])
def test_predict_exits_3_when_the_deployment_does_not_fit(capsys, as_json):
    # GIVEN a 70B model on one 24 GB GPU
    argv = ["predict", "--model", "llama-3.1-70b", "--instance", "g6.xlarge", "--input-tokens", "500",
            "--output-tokens", "100", "--concurrency", "1"]  # fmt: skip
    # WHEN it is predicted
    rc = main([*argv, "--json"] if as_json else argv)
    out = capsys.readouterr().out
    # THEN it says so and exits 3 (neither success nor bad input), in the table and in the JSON
    assert rc == 3
    assert (json.loads(out)["fits"] is False) if as_json else "does not fit" in out


def test_the_table_says_why_bedrock_is_not_ranked_when_it_was_considered(tmp_path, capsys):
    # GIVEN an 8B chat whose data must stay in eu-west-1, where Bedrock does not offer that model
    spec = {
        "model": "llama-3.1-8b",
        "users": {"total": 2000},
        "tokens": {"input": {"mean": 800, "p95": 2000}, "output": {"mean": 150, "p95": 400}},
        "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 20}},
        "constraints": {"region": "eu-west-1", "data_residency": "in-region"},
    }
    f = tmp_path / "eu.yaml"
    f.write_text(yaml.safe_dump(spec))
    # WHEN it is estimated as the table
    assert main(["estimate", str(f)]) == 0
    out = capsys.readouterr().out
    # THEN Bedrock's absence is explained, not silent
    line = next(ln for ln in out.splitlines() if ln.startswith("Bedrock:"))
    assert "eu-west-1" in line and "not offered" in line
