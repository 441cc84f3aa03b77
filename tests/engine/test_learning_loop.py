"""The learning loop on the real engine: `sizing run --endpoint URL --hardware c7i.large` measures the server, stores
its levels under that hardware, refits, and the next `sizing estimate` for the hardware reads what it learned (a
profile folder keeps it between the two commands: SIZING_CALIBRATION_DIR).

Bounds are loose: the box is shared, so the test asks that the refit moves the estimate towards this server at a
level the run did not measure (measured in the same test, minutes apart), not by how much (benchmarks/engine.py
`learning` prints the before/after table)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sizing.learn.correction import corrected, lookup
from sizing.perf.calibration import family_of, load_profiles, profile_for
from sizing.perf.fit import measured, predict_row
from sizing.perf.reference import CalRow

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / ".engine" / "models" / "catalog"
HARDWARE = "c7i.large"
ACCELERATOR = "xeon-spr-c7i.large"


def _sizing(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sizing.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_run_on_the_engine_is_learned_from_and_the_next_estimate_for_its_hardware_reads_it(
    engine_url, engine_facts, tmp_path
):
    # GIVEN the engine's model as a catalog model (build_models.py's overlay), a workload on it, and a folder
    # that keeps the team's profiles between commands
    served = engine_facts.served_models[0]
    if not (OVERLAY / "models.yaml").is_file():
        pytest.skip("the engine's catalog overlay is missing: run `make engine`")
    model = f"sizing-engine/{served}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "engine-learning",
                "model": model,
                "rate": {"peak_rps": 2},
                "tokens": {"input": {"mean": 256, "p95": 350}, "output": {"mean": 64, "p95": 90}},
                "slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 30}},
                "constraints": {"deployments": ["eks"], "quantizations": ["bf16"], "engines": ["vllm"]},
            }
        )
    )
    env = {
        **os.environ,
        "SIZING_CATALOG_DIR": str(OVERLAY),
        "SIZING_CALIBRATION_DIR": str(tmp_path / "profiles"),
    }
    # WHEN the run measures the engine as c7i.large
    run = _sizing(
        ["run", str(spec), "--endpoint", engine_url, "--hardware", HARDWARE, "--out", str(tmp_path / "run"),
         "--json", "--step-seconds", "6", "--warmup-seconds", "2"],
        env, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    learning = result["ranking"]["learning"]
    # THEN its levels are stored under that hardware and refitted from
    assert learning["measured_levels"] >= 2, learning
    refit = learning["refit"]
    assert refit["status"] in ("adopted", "candidate"), refit
    rows = [CalRow.model_validate(r) for r in result["ranking"]["calibration_rows"]]
    assert rows and all(r.accelerator == ACCELERATOR and r.kv_cache_tokens == engine_facts.kv_cache_tokens
                        for r in rows)  # fmt: skip
    if refit["status"] != "adopted":
        pytest.fail(f"the refit was not adopted: {refit['reasons']}")

    # AND the next estimate for that hardware reads what the run learned
    est = _sizing(["estimate", str(spec), "--json"], env, timeout=120)
    assert est.returncode == 0, est.stderr[-2000:]
    on_hw = [a for a in json.loads(est.stdout)["architectures"] if a["instance_type"] == HARDWARE]
    assert on_hw and on_hw[0]["basis"] in ("calibrated", "measured")

    # AND at a level the run did not measure (a longer prompt, more streams), its correction moves the prediction
    # towards the server
    other = _sizing(
        ["loadtest", "--endpoint", engine_url, "--concurrency", "8", "--input-tokens", "512", "--output-tokens",
         "96", "--duration", "8", "--warmup", "2", "--out", str(tmp_path / "other"), "--json"],
        env, timeout=300,
    )  # fmt: skip
    assert other.returncode == 0, other.stderr[-2000:]
    step = json.loads(other.stdout)[0]
    row = CalRow.model_validate(
        {**rows[0].model_dump(), "row_id": "other", "input_tokens": step["input_tokens"],
         "output_tokens": step["output_tokens"], "input_sigma": None, "output_sigma": None, "load_value": 8,
         "ttft_ms": step["ttft_ms"]["mean"], "tpot_ms": step["tpot_ms"]["mean"], "e2e_s": step["e2e_s"]["mean"],
         "output_tokens_per_s": step["output_tokens_per_s"], "requests_per_s": step["requests_per_s"]}
    )  # fmt: skip
    os.environ["SIZING_CALIBRATION_DIR"] = env["SIZING_CALIBRATION_DIR"]
    try:
        from sizing.learn import profiles

        profiles.invalidate()
        adopted = profiles.active() or {}
    finally:
        del os.environ["SIZING_CALIBRATION_DIR"]
        profiles.invalidate()
    hit = lookup(adopted.get("corrections") or {}, family_of(ACCELERATOR), "vllm", model)
    assert hit is not None
    got = predict_row(row, profile_for(ACCELERATOR, "vllm", load_profiles()))
    want = measured(row)
    for metric in ("tpot", "throughput"):
        before = abs(got[metric] - want[metric]) / want[metric]
        after = abs(corrected(metric, got[metric], hit[1]) - want[metric]) / want[metric]
        assert after <= before + 0.05, (metric, before, after)
