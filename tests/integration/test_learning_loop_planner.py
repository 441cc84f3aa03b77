"""The planner answers a measured configuration from its measurement (`basis: measured`), on moto.

As in test_learning_loop.py: the "endpoint" is the estimator's own step model with every step 30% slower, which
stands for a g6e.xlarge server measured by one run at three closed-loop levels around the estimator's knee (half,
at, one and a half times the predicted SLO-limit concurrency). Its true open-loop SLO capacity is the planner's
search run on that slowed replica: what a sizing should land near."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import pytest
from support.learning import SLOWDOWN, SPEC, dist, known_timing, learning_stack, slowed

from sizing.catalog import load_catalog
from sizing.learn.loop import after_collect
from sizing.perf.calibration import PROFILE_PATH, load_profiles, profile_for
from sizing.perf.replica import replica_of
from sizing.perf.simulator import bounds
from sizing.perf.step import StepModel
from sizing.plan import estimate, search
from sizing.plan.capacity import max_rate_under_slo
from sizing.store import SizingStore
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec

#: the learning loop's workload at a load that needs several replicas, so a capacity change shows in their count
BUSY = {**SPEC, "rate": {"peak_rps": 40}}
LEVEL_FACTORS = (0.5, 1.0, 1.5)


@pytest.fixture
def aws():
    with learning_stack() as stack:
        yield stack


def measure(store: SizingStore, spec_raw: dict[str, Any], tune: bool = False) -> dict[str, Any]:
    """The ranking's first architecture measured once on the 30%-slower server, stored and refitted in-process as
    CollectAndRank does; its estimate (before the measurement), levels and true open-loop capacity. At the engine's
    defaults unless `tune`: the configuration the re-estimates below answer without tuning."""
    cat = load_catalog()
    spec = parse_spec(spec_raw)
    before = estimate(spec, catalog=cat, tune=tune).document()
    arch = before["architectures"][0]
    knee = arch["per_replica"]["max_concurrency"]
    levels = sorted({max(1, math.ceil(knee * f)) for f in LEVEL_FACTORS})
    wm = build_model(spec, cat.model(spec.model).id)
    steps = []
    for i, c in enumerate(levels):
        sim = known_timing(arch, wm, cat, c, SLOWDOWN)
        record = {
            "step": i,
            "target": {"concurrency": c},
            "requests": 1000,
            "errors": {},
            **{m: dist(getattr(sim, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")},
            "input_tokens": wm.input_tokens.mean,
            "output_tokens": wm.output_tokens.mean,
            "requests_per_s": sim.requests_per_s,
            "output_tokens_per_s": sim.output_tokens_per_s,
            "serving": arch["serving"],
            "engine_version": "0.11.0",
            "served_model": arch["model"],
        }
        steps.append({"candidate_id": "c1", "record": record})
    learning = after_collect(
        store=store,
        backend="local",
        architectures=before["architectures"],
        measured=[{"candidate_id": "c1", "status": "MEASURED", "applies_to": [arch["id"]]}],
        steps=steps,
        run_id="0123456789abcdef",
        origin="endpoint",
        wm=wm,
        catalog=cat,
    )
    assert learning["refit"]["status"] == "adopted", learning["refit"]
    cfg = replica_of(arch, cat)
    ref = profile_for(cfg.parts(cat).accelerator.id, cfg.engine, load_profiles(str(PROFILE_PATH)))
    slow = StepModel.for_config(cfg, profile=slowed(ref, SLOWDOWN), catalog=cat)
    top = bounds(slow, wm.input_tokens.mean, wm.output_tokens.mean).max_requests_per_s
    truth = max_rate_under_slo(slow, wm, top).rate_rps
    return {"before": arch, "levels": levels, "truth": truth}


def sizing_estimate(spec_raw: dict[str, Any], tmp_path: Any, capsys: Any) -> dict[str, Any]:
    from sizing.cli import main

    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_raw))
    assert main(["estimate", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sizing_estimate_answers_the_measured_configuration_from_its_measurement(
    aws, tmp_path, capsys, monkeypatch
):
    # given a g6e.xlarge server 30% slower than the estimate, measured once at three levels and refitted
    store, profiles = aws
    run = measure(store, BUSY)
    shipped = run["before"]["per_replica"]["rps_slo_limit"]

    # when the same workload is estimated again from the command line, at the engine's defaults (tuning on the
    # refitted profile may rank a neighbouring configuration the team did not measure, estimated cheaper)
    monkeypatch.setattr(search, "estimate", functools.partial(estimate, tune=False))
    result = sizing_estimate(BUSY, tmp_path, capsys)

    # then the measured configuration is answered from its measurement, naming the run, levels and token shape
    arch = next(a for a in result["architectures"] if a["serving"] == run["before"]["serving"])
    assert arch["basis"] == "measured"
    m = arch["measurement"]
    assert m["run_id"] == "0123456789abcdef" and m["candidate_id"] == "c1"
    assert set(m["levels"]) <= set(run["levels"]) and len(m["levels"]) == 2
    assert m["token_shape"] == {"input_tokens": 800.0, "output_tokens": 150.0} and m["token_distance"] == 0.0
    assert profiles.adopted()["version"] in arch["profile_version"]
    assert any("closed-loop levels understate an open-loop tail" in n for n in arch["notes"])

    # and its capacity follows the measured levels, not the shipped profile: the lower of the measured edge and
    # the open-loop edge of the estimator rescaled to them, nearer the server's true capacity than the estimate
    capacity = arch["per_replica"]["rps_slo_limit"]
    assert capacity == pytest.approx(min(m["edge"]["requests_per_s"], m["open_loop_rps"]), rel=1e-3)
    assert capacity < 0.8 * shipped
    assert abs(capacity - run["truth"]) < abs(shipped - run["truth"])
    assert abs(capacity / run["truth"] - 1) <= 0.15
    # so more replicas serve the same peak
    assert arch["replicas"]["peak"] == math.ceil(40 / arch["per_replica"]["rps"])
    assert arch["replicas"]["peak"] > run["before"]["replicas"]["peak"]
    assert arch["meets_slo"] is True


def test_a_neighbouring_token_shape_stays_calibrated(aws, tmp_path, capsys):
    # given the same measured run
    store, profiles = aws
    measure(store, BUSY)

    # when a workload with another token shape on the same hardware is estimated
    other = {**BUSY, "tokens": {"input": {"mean": 300, "p95": 700}, "output": {"mean": 300, "p95": 600}}}
    result = sizing_estimate(other, tmp_path, capsys)

    # then its architecture rests on the team's refitted profile, not on the measurement
    arch = result["architectures"][0]
    assert arch["basis"] == "calibrated"
    assert arch["measurement"] is None
    assert profiles.adopted()["version"] in arch["profile_version"]


def test_a_tail_slo_the_closed_loop_understates_is_sized_by_the_rescaled_open_loop_edge(aws):
    # given a tight TTFT SLO, where Poisson arrivals queue prefills that a closed loop never bunches
    store, _ = aws
    spec_raw = {**BUSY, "slo": {"ttft_ms": {"p95": 300}}}
    run = measure(store, spec_raw)

    # when the workload is estimated again at the engine's defaults (the configuration measured: tuning on the
    # refitted profile may rank a neighbouring configuration the team did not measure)

    arch = estimate(parse_spec(spec_raw), catalog=load_catalog(), tune=False).document()["architectures"][0]
    assert arch["serving"] == run["before"]["serving"]

    # then the capacity is the rescaled open-loop edge, below the measured closed-loop one, near the true capacity
    m = arch["measurement"]
    assert arch["basis"] == "measured"
    assert m["decided_by"] == "open-loop edge of the rescaled model"
    assert arch["per_replica"]["rps_slo_limit"] < m["edge"]["requests_per_s"]
    assert abs(arch["per_replica"]["rps_slo_limit"] / run["truth"] - 1) <= 0.1


def test_an_slo_every_measured_level_meets_keeps_the_estimate_and_says_why(aws):
    # given an SLO so loose that every measured level meets it
    store, _ = aws
    spec_raw = {**BUSY, "slo": {"tpot_ms": {"p95": 200}}}
    measure(store, spec_raw)

    # when the workload is estimated again at the engine's defaults (the configuration measured)
    arch = estimate(parse_spec(spec_raw), catalog=load_catalog(), tune=False).document()["architectures"][0]

    # then the edge lies above the measured range: the architecture is calibrated, and says so
    assert arch["basis"] == "calibrated"
    assert any("above the measured range" in n and "0123456789abcdef" in n for n in arch["notes"])
