"""`sizing steps` end to end on a server whose step time is known: a twin serving the estimator's own step model,
load-tested by the product's load generator with every request kept. The steps rebuilt from the client's records
must be the model's steps, to the twin's own timing noise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sizing.cli import main
from sizing.loadtest import run_sweep
from sizing.perf.config import HardwareConfig
from sizing.twin import TwinHandle, start_twin

pytestmark = pytest.mark.integration

MODEL, INSTANCE = "llama-3.1-8b", "g6e.xlarge"
#: The twin sleeps its modelled step time on a shared box: its steps run a few per cent behind the model when the box
#: is busy (the load test flags more than 5%); a step kind's median within this share of the model's.
STEP_SHARE = 0.12


@pytest.fixture
def twin() -> Iterator[TwinHandle]:
    handle = start_twin(HardwareConfig.create(MODEL, INSTANCE, 1), served_model=MODEL)
    yield handle
    handle.stop()


def test_the_steps_rebuilt_from_a_load_test_of_a_twin_are_its_model_steps(
    twin: TwinHandle, tmp_path: Path, capsys
):
    # GIVEN a load test of 2 and 8 streams against a twin of the deployment, every request kept
    run_sweep(
        twin.url, MODEL, [2, 8], out_dir=tmp_path, input_tokens=512, output_tokens=64, duration_s=6.0,
        warmup_s=1.0, quiet=True, save_requests=True,
    )  # fmt: skip
    # WHEN `sizing steps` reads the folder for that deployment
    assert main(["steps", str(tmp_path), "--model", MODEL, "--instance", INSTANCE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # THEN the folder keeps each level's warm-up requests beside its window's, marked, and only the window's count
    steps = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    saved = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    for step in steps:
        opens = step["started_at"] + step["warmup_s"]
        mine = [r for r in saved if r["step"] == step["step"]]
        warm = [r for r in mine if r.get("warmup")]
        assert warm and all(step["started_at"] <= r["start"] < opens for r in warm)
        assert all(r["start"] >= opens for r in mine if not r.get("warmup"))
        assert len(mine) - len(warm) == step["requests"] - step["unfinished"]
    # and nearly every rebuilt step is timed, and each kind's time is the step model's own
    assert out["levels"] == 2 and out["timed"] >= 0.9 * out["rebuilt"] > 100
    assert out["median_ratio"] == pytest.approx(1.0, abs=STEP_SHARE)
    decode = [k for k in out["kinds"] if k["kind"].startswith("decode only")]
    assert decode, out["kinds"]
    for k in decode:
        assert k["ratio"] == pytest.approx(1.0, abs=STEP_SHARE), k
