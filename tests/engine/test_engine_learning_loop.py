"""The learning loop on the real engine: `sizing run --endpoint URL --hardware H` measures the server, H the catalog
instance this machine counts as (c7i.large on a Sapphire Rapids Xeon, c6a.large on an EPYC Milan, m7a.medium on an EPYC Genoa:
`sizing.catalog.hostcpu`), stores its levels under that hardware, refits, and the next `sizing estimate` for the hardware reads what it learned (a
profile folder keeps it between the two commands: SIZING_CALIBRATION_DIR).

Bounds are loose: the box is shared, so the test asks that the refit's own leave-one-level-out error falls, not by
how much; benchmarks/engine.py `learning` prints the error before and after at the grid's levels of other lengths
and loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.cpu import box_instance

from sizing.learn.correction import MIN_TEAM_IMPROVEMENT
from sizing.perf.calrows import CalRow

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / ".engine" / "models" / "catalog"


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
    # measured as the instance this machine is (not another CPU's, which the refit's screen exists to refuse)
    box = box_instance()
    hardware, family = box.instance_type, box.instance_type.split(".")[0]
    model = f"sizing-engine/{served}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "engine-learning",
                "model": model,
                "rate": {"peak_rps": 2},
                # short requests: a level's window holds five predicted answers, and on a core without a matrix
                # unit 256/64 answers took ~9 s (43 s windows, 3 min 22 s for the test)
                "tokens": {"input": {"mean": 128, "p95": 170}, "output": {"mean": 32, "p95": 45}},
                "slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 30}},
                "constraints": {
                    "deployments": ["eks"],
                    "quantizations": ["bf16"],
                    "engines": ["vllm"],
                    "instance_families": [family],
                },
            }
        )
    )
    env = {
        **os.environ,
        "SIZING_CATALOG_DIR": str(OVERLAY),
        "SIZING_CALIBRATION_DIR": str(tmp_path / "profiles"),
    }
    # WHEN the run measures the engine as that instance
    run = _sizing(
        ["run", str(spec), "--endpoint", engine_url, "--hardware", hardware, "--out", str(tmp_path / "run"),
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
    assert rows and all(r.accelerator == box.accelerator and r.kv_cache_tokens == engine_facts.kv_cache_tokens
                        for r in rows)  # fmt: skip
    version = json.loads(next((tmp_path / "profiles").rglob(f"versions/{refit['version']}.json")).read_text())
    team = version["cross_validation"]["team"]
    adopted = refit["status"] == "adopted"
    reasons = version["decision"]["reasons"]
    # AND it is adopted exactly as the rule says: at each measured level held out of the refit in turn (leave one
    # level out) the correction predicts this server better than the profile alone did, by more than a point, and
    # the reference rows' error (this hardware's own grid among them) worsens by no more than a point
    team_better = (
        team["after"]["overall"]["mdape"] < team["before"]["overall"]["mdape"] - MIN_TEAM_IMPROVEMENT
    )
    reference_worse = any("worsens" in r for r in reasons)
    assert adopted == (team_better and not reference_worse), reasons

    # AND the next estimate for that hardware reads what the run learned, or, not adopted, the profile alone
    est = _sizing(["estimate", str(spec), "--json"], env, timeout=120)
    assert est.returncode == 0, est.stderr[-2000:]
    on_hw = [a for a in json.loads(est.stdout)["architectures"] if a["instance_type"] == hardware]
    assert on_hw
    assert on_hw[0]["basis"] in (("calibrated", "measured") if adopted else ("modelled",)), on_hw[0]["basis"]
