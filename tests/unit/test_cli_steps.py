"""`sizing steps`: a server's engine steps rebuilt from a load test's records, against the estimator's step time."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from support.engine_steps import engine_run

from sizing.cli import main

MODEL, INSTANCE = "meta-llama/Llama-3.2-1B", "c7i.large"


def _results(tmp_path: Path, levels: int = 2, n: int = 40, answer: tuple[int, int] = (10, 40)) -> Path:
    """A `sizing loadtest --save-requests` folder: `levels` Poisson levels of `n` requests on the test engine of
    `support.engine_steps` (20 ms a step + 1 ms a running sequence + 0.2 ms a prompt token)."""
    rng = random.Random(5)
    lines = []
    for level in range(levels):
        t, arrivals = 0.0, []
        for _ in range(n):
            t += rng.expovariate(6.0)
            arrivals.append((t, 200, rng.randint(*answer)))
        records, _truth = engine_run(arrivals, seed=level)
        lines += [json.dumps({**dataclasses.asdict(r), "step": level}) for r in records]
    (tmp_path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_steps_of_a_load_test_are_set_beside_the_estimators_step_time(tmp_path, capsys):
    # GIVEN a load test's saved requests, two levels on an engine whose decode step of one sequence takes 21 ms
    folder = _results(tmp_path)
    # WHEN `sizing steps` reads them for the deployment it served, with a fit of the step time
    code = main(["steps", str(folder), "--model", MODEL, "--instance", INSTANCE, "--fit", "--json"])
    out = json.loads(capsys.readouterr().out)
    # THEN the levels' steps are rebuilt and timed, each kind with the engine's own time beside the model's, and
    # the fitted step time models the steps closer than the estimator did
    assert code == 0
    assert out["levels"] == 2 and out["timed"] > 0.8 * out["rebuilt"] > 100
    one = next(k for k in out["kinds"] if k["kind"] == "decode only, 1 seq")
    assert one["measured_ms"]["p50"] == pytest.approx(21.0, abs=0.6)
    assert one["modelled_ms"] > 0 and one["ratio"] == pytest.approx(one["modelled_ms"] / 21.0, rel=0.05)
    assert out["fit"]["mdape_after"] < out["fit"]["mdape_before"]
    assert set(out["fit"]["factors"]) == {"compute_eff", "bandwidth_eff", "step_overhead_s", "seq_overhead_s"}


def test_the_table_names_each_kind_of_step(tmp_path, capsys):
    # WHEN read without --json
    assert main(["steps", str(_results(tmp_path)), "--model", MODEL, "--instance", INSTANCE]) == 0
    text = capsys.readouterr().out
    # THEN it says what was read and for what, and a line per kind of step
    assert "Llama-3.2-1B on c7i.large" in text and "steps timed of" in text
    assert "decode only, 1 seq" in text and "1 prompt" in text and "median error" in text


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ("missing", "no requests.jsonl in"),
        ("garbage", "requests.jsonl line 2 is not a request record"),
        ("empty", "holds no requests"),
    ],
)
def test_a_folder_that_is_not_a_load_tests_is_one_line_and_exit_2(tmp_path, capsys, setup: str, said: str):
    # GIVEN a folder without saved requests, one with a line that is not a record, and one with none
    if setup == "garbage":
        _results(tmp_path, levels=1, n=3)
        lines = (tmp_path / "requests.jsonl").read_text().splitlines()
        (tmp_path / "requests.jsonl").write_text("\n".join([lines[0], "[1, 2", *lines[1:]]) + "\n")
    elif setup == "empty":
        (tmp_path / "requests.jsonl").write_text("\n")
    # WHEN `sizing steps` reads it
    code = main(["steps", str(tmp_path), "--model", MODEL, "--instance", INSTANCE])
    err = capsys.readouterr().err
    # THEN it exits 2 with one line naming the problem, and no trace
    assert code == 2 and said in err and "Traceback" not in err


def test_too_few_steps_to_fit_is_said_with_the_count(tmp_path, capsys):
    # GIVEN one level of three requests of 10-token answers
    folder = _results(tmp_path, levels=1, n=3, answer=(10, 10))
    # WHEN a fit is asked of them
    code = main(["steps", str(folder), "--model", MODEL, "--instance", INSTANCE, "--fit"])
    # THEN exit 2: the fit needs more steps than three short answers give
    assert code == 2 and "timed steps; a step fit needs 50 or more" in capsys.readouterr().err


def test_an_unknown_model_is_refused_by_name(tmp_path, capsys):
    code = main(
        ["steps", str(_results(tmp_path, levels=1)), "--model", "acme/none-7b", "--instance", INSTANCE]
    )
    assert code == 2 and "acme/none-7b" in capsys.readouterr().err
