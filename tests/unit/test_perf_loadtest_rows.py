"""The product's own load tests as calibration rows: what a run records, and `sizing calibrate --from-run`, which
keeps real measurements and refuses a twin's (a twin serves at the estimator's own pace)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from test_perf_reference import BASE as REFERENCE_ROW

from sizing.catalog import load_catalog
from sizing.cli import main
from sizing.orchestrate.merge import calibration_rows
from sizing.perf.calibration import profile_for
from sizing.perf.calrows import LOADTEST_ROWS_NAME, CalRow, read_rows
from sizing.perf.fit import predict_row, row_config
from sizing.perf.memory import memory_fit
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec

#: an architecture as a run's ranking holds it: Llama-3.1-8B in fp8 on one L40S, served with the model's context
#: (with what every architecture states: its predictions, whether it meets the SLOs, and its cost)
ARCH = {
    "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand",
    "deployment": "eks",
    "engine": "vllm",
    "accelerator": "l40s",
    "tensor_parallel": 1,
    "model": "meta-llama/Llama-3.1-8B",
    "quantization": "fp8",
    "serving": {
        "model": "meta-llama/Llama-3.1-8B",
        "image": "vllm/vllm-openai:v0.11.0",
        "tensor_parallel": 1,
        "quantization": "fp8",
        "max_model_len": 131072,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 2048,
        "gpu_memory_utilization": 0.9,
    },
    "predicted": {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": {}},
    "meets_slo": True,
    "cost": {"usd_per_month": 1300.0},
}
SPEC = {
    "name": "loadtest-rows",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"mean": 800, "p95": 2400}, "output": {"mean": 120, "p95": 300}},
    "slo": {"ttft_ms": {"p95": 2000}},
}


def _record(users: int, ttft_ms: float) -> dict:
    """One measured sweep level, as the load test stores it."""
    return {
        "target": {"concurrency": users},
        "requests": 40 * users,
        "input_tokens": 790.0,
        "output_tokens": 118.0,
        "ttft_ms": {"mean": ttft_ms, "p95": 2 * ttft_ms},
        "tpot_ms": {"mean": 14.0},
        "e2e_s": {"mean": 1.9},
        "output_tokens_per_s": 60.0 * users,
        "requests_per_s": 0.5 * users,
    }


def _rows(origin: str, run_id: str = "0123456789abcdef") -> list[dict]:
    wm = build_model(parse_spec(SPEC), "meta-llama/Llama-3.1-8B")
    return calibration_rows(
        ARCH, [_record(2, 90.0), _record(8, 160.0)], "c1", run_id, origin, wm, load_catalog()
    )


def test_a_measured_level_becomes_a_row_of_the_deployment_as_served_and_the_lengths_as_drawn():
    # GIVEN two measured levels of a real server
    rows = [CalRow.model_validate(r) for r in _rows("loadtest")]
    # THEN each is a calibration row named after the run, with the server's context and batch limit
    assert [r.row_id for r in rows] == ["LT-01234567-c1-2", "LT-01234567-c1-8"]
    assert all("0123456789abcdef" in r.source for r in rows)
    assert rows[0].max_model_len == 131072 and rows[0].max_num_seqs == 256
    assert (rows[0].load, rows[0].load_value, rows[0].origin) == ("closed", 2, "loadtest")
    # AND the lengths keep the spread the client drew (the workload's lognormal: mean 800, p95 2400)
    assert rows[0].input_sigma == pytest.approx(0.93, abs=0.01)
    assert rows[0].output_sigma is not None and rows[0].output_sigma > 0


def test_a_level_in_lock_step_states_the_groups_it_measured():
    # GIVEN a 16-user level whose users went out in groups of 4.3 (request-weighted), and one at random phases
    wm = build_model(parse_spec(SPEC), "meta-llama/Llama-3.1-8B")
    levels = [{**_record(16, 300.0), "lockstep_group": g} for g in (4.3, None)]
    raw = calibration_rows(ARCH, levels, "c1", "0123456789abcdef", "loadtest", wm, load_catalog())
    grouped, spread = (CalRow.model_validate(r) for r in raw)
    # THEN the first row starts its users together, in groups of 4; the second spreads them
    assert (grouped.start, grouped.lockstep_group) == ("together", 4)
    assert (spread.start, spread.lockstep_group) == ("spread", None)
    # AND simulated in its groups of 4 (the calibration sends all 16 at once), its first tokens wait less
    prof = profile_for("l40s", "vllm")
    in_groups = predict_row(grouped, prof, in_groups=True)
    at_once = predict_row(grouped, prof)
    assert in_groups["ttft"] < at_once["ttft"]
    assert predict_row(spread, prof, in_groups=True) == predict_row(spread, prof)


def test_a_row_records_what_the_server_reported_not_what_the_estimate_assumed():
    # GIVEN a level measured on a server that reported its own context, batch limit and KV capacity
    facts = {
        "endpoint": "http://127.0.0.1:8000",
        "max_model_len": 4096,
        "max_num_seqs": 128,
        "kv_cache_tokens": 524288,
        "version": "0.32.0",
    }
    wm = build_model(parse_spec(SPEC), "meta-llama/Llama-3.1-8B")
    raw = calibration_rows(ARCH, [{**_record(4, 80.0), "server_facts": facts}], "c1", "0123456789abcdef",
                           "loadtest", wm, load_catalog())  # fmt: skip
    row = CalRow.model_validate(raw[0])
    # THEN the row carries the server's figures, and its simulated deployment holds exactly that KV cache
    assert (row.max_model_len, row.max_num_seqs, row.kv_cache_tokens) == (4096, 128, 524288)
    cfg = row_config(row)
    assert cfg.kv_cache_tokens == 524288
    assert memory_fit(cfg).kv_cache_tokens == 524288


def test_a_managed_service_gives_no_rows():
    # GIVEN a measured Bedrock architecture (the service does not say what hardware served it)
    bedrock = {**ARCH, "id": "bedrock:llama-3.1-8b", "deployment": "bedrock", "accelerator": None}
    # THEN it gives no calibration rows
    assert calibration_rows(bedrock, [_record(2, 90.0)], "c2", "0123456789abcdef") == []


def test_a_row_without_a_stated_context_covers_its_long_prompts():
    # GIVEN a load-test row with lognormal prompts and no stated max_model_len
    row = CalRow.model_validate({**_rows("loadtest")[0], "max_model_len": None})
    assert row.input_sigma is not None
    # WHEN its deployment is configured for the simulation
    cfg = row_config(row)
    # THEN the context holds the 99th-percentile prompt, not just the mean one
    p99 = row.input_tokens * math.exp(2.326 * row.input_sigma - row.input_sigma**2 / 2)
    assert cfg.max_model_len is not None and cfg.max_model_len > p99 > 2 * row.input_tokens


def _result(tmp_path, name: str, rows: list[dict], run_id: str = "0123456789abcdef") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"run": {"run_id": run_id}, "ranking": {"calibration_rows": rows}}))
    return str(path)


def _reference(tmp_path) -> Path:
    path = tmp_path / "reference.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(REFERENCE_ROW))
        w.writeheader()
        w.writerow(REFERENCE_ROW)
    return path


def test_calibrate_keeps_a_real_runs_rows_once_and_fits_on_them(tmp_path, capsys):
    # GIVEN a run that measured a real server
    result = _result(tmp_path, "result.json", _rows("loadtest"))
    out = tmp_path / "profile" / "calibration.json"
    out.parent.mkdir()
    args = [
        "calibrate",
        "--reference",
        str(_reference(tmp_path)),
        "--out",
        str(out),
        "--no-cv",
        "--workers",
        "1",
    ]
    # WHEN it is imported into a calibration, twice
    assert main([*args, "--from-run", result]) == 0
    assert main([*args, "--from-run", result]) == 0
    # THEN its rows are kept beside the profile, once
    kept = read_rows(out.parent / LOADTEST_ROWS_NAME)
    assert [r.row_id for r in kept] == ["LT-01234567-c1-2", "LT-01234567-c1-8"]
    assert "0 load-test rows added" in capsys.readouterr().err
    # AND the profile was fitted on them beside the reference row
    profile = json.loads(out.read_text())
    assert profile["rows"]["usable"] == 3
    # AND a later calibration without --from-run still includes them
    assert main(args) == 0
    assert json.loads(out.read_text())["rows"]["usable"] == 3


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("twin", "local twins"),
        ("old", "recorded before load-test rows said"),
        ({"ranking": {}}, "not a sizing run result"),
        ({"ranking": {"calibration_rows": []}}, "measured no load level"),
        (
            {"ranking": {"calibration_rows": [{"row_id": "X", "engine": "vllm"}]}},
            "row X is not a calibration",
        ),
        ("{not json", "not a JSON run result"),
    ],
)
def test_calibrate_refuses_what_is_not_a_real_measurement_and_writes_nothing(tmp_path, capsys, content, says):
    # GIVEN a twin-measured run, rows recorded before they said what they measured, a file that is not a run
    # result, an empty run, a broken row, or not JSON
    good = _result(tmp_path, "good.json", _rows("loadtest", "feedfacecafe0000"), "feedfacecafe0000")
    if content == "twin":
        bad = _result(tmp_path, "twin.json", _rows("twin"))
    elif content == "old":
        old_rows = [{**r, "source": "llm-sizing load test " + ARCH["id"]} for r in _rows("loadtest")]
        bad = _result(tmp_path, "old.json", old_rows)
    else:
        path = tmp_path / "bad.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        bad = str(path)
    out = tmp_path / "calibration.json"
    # WHEN it is imported together with a good run
    args = ["calibrate", "--reference", str(_reference(tmp_path)), "--out", str(out), "--no-cv"]
    code = main([*args, "--from-run", good, "--from-run", bad])
    # THEN the command exits 2 naming the file and the problem, and writes neither rows nor profile
    err = capsys.readouterr().err
    assert code == 2 and says in err and bad in err
    assert not (tmp_path / LOADTEST_ROWS_NAME).exists() and not out.exists()


def test_calibration_drops_twin_rows_that_reach_it_by_another_path(tmp_path):
    from sizing.perf.calrows import add_rows
    from sizing.perf.procedure import run_calibration

    # GIVEN a row file that holds a twin's rows (written by hand, not through --from-run)
    rows_file = tmp_path / "rows.csv"
    add_rows([CalRow.model_validate(r) for r in _rows("twin")], rows_file)
    # WHEN a calibration includes it
    result = run_calibration(_reference(tmp_path), [rows_file], "2026-01-01", cv=False)
    # THEN only the reference row is fitted on, and each twin row is listed with its reason
    assert result["rows"]["usable"] == 1
    reasons = dict(result["rows"]["excluded"])
    assert all("twin" in reasons[r["row_id"]] for r in _rows("twin"))


def test_a_level_whose_prompts_shared_a_cached_prefix_gives_no_reference_row():
    # GIVEN two levels whose prompts all started with the same 600 tokens, on a server that caches prefixes, and
    # the same levels on one that does not
    cached = {**ARCH, "serving": {**ARCH["serving"], "enable_prefix_caching": True}}
    levels = [
        {**_record(2, 60.0), "shared_prefix_tokens": 600},
        {**_record(8, 110.0), "shared_prefix_tokens": 600},
    ]
    # WHEN they become calibration rows
    with_cache = calibration_rows(cached, levels, "c1", "0123456789abcdef")
    without = calibration_rows(ARCH, levels, "c1", "0123456789abcdef")
    # THEN the cached levels give none (the reference fit simulates no prefix cache: the cache's saving would read
    # as the estimator's error), and the uncached ones are rows as any level
    assert with_cache == []
    assert [r["load_value"] for r in without] == [2, 8]
