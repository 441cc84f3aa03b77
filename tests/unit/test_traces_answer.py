"""What a trace changes in the answer: the estimate states it against Poisson arrivals at the same means (figures
and which way), the report shows the recorded trace with its hourly chart, and the API reads no trace file on its
server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sizing.orchestrate.steps import _load_plan
from sizing.plan.search import estimate
from sizing.plan.traceeffect import compare, poisson_twin, with_effect
from sizing.report import render_report
from sizing.results import EstimateResult
from sizing.service.api import _server_file
from sizing.traces import samples
from sizing.workload.derived import resolve
from sizing.workload.parse import parse_spec

MODEL = "llama-3.1-8b"


def arch(aid: str, replicas: int, ttft: float, cost: float) -> dict[str, Any]:
    return {
        "id": aid,
        "model": MODEL,
        "deployment": "eks",
        "engine": "vllm",
        "meets_slo": True,
        "replicas": {"peak": replicas, "min": 2, "mean": replicas},
        "predicted": {"ttft_ms": {"p95": ttft}, "tpot_ms": {}, "e2e_s": {"p95": 3.0}},
        "cost": {"usd_per_hour_peak": cost / 730.5, "usd_per_month": cost},
    }


def result(*archs: dict[str, Any]) -> EstimateResult:
    return EstimateResult.model_validate({"workload": {}, "architectures": list(archs)})


def test_the_comparison_says_which_way_bursts_moved_replicas_ttft_and_cost():
    # given the same workload estimated with its bursty trace and with Poisson arrivals at the same means
    traced = result(arch("eks:g6e", 3, 900.0, 3000.0))
    poisson = result(arch("eks:g6e", 2, 500.0, 2000.0))
    # when they are compared
    effect = compare(traced, poisson)
    # then the answer gives both figures and the direction of each
    assert (
        effect["trace_best"]["replicas_peak"] == 3 and effect["poisson_on_trace_best"]["replicas_peak"] == 2
    )
    assert "raises the best monthly cost from $2,000 to $3,000" in effect["summary"]
    assert "raises the peak replicas of eks:g6e from 2 to 3" in effect["summary"]
    assert "raises its TTFT p95 at peak from 500 ms to 900 ms" in effect["summary"]


def test_a_spec_without_a_replayed_trace_has_no_poisson_twin(tmp_path: Path):
    # given specs without a trace, and with a trace not replayed
    plain = parse_spec(
        {"model": MODEL, "rate": {"peak_rps": 1}, "tokens": {"input": {"fixed": 9}, "output": {"fixed": 9}},
         "slo": {"e2e_s": {"p95": 9}}}
    )  # fmt: skip
    unreplayed = parse_spec(
        {
            "model": MODEL,
            "trace": {"path": str(tmp_path / "t.jsonl"), "replay": False},
            "slo": {"e2e_s": {"p95": 9}},
        }
    )
    # when their Poisson twins are asked for, then there is none: nothing to compare
    assert poisson_twin(plain) is None
    assert poisson_twin(unreplayed) is None


@pytest.fixture(scope="module")
def traced_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = samples.write(
        tmp_path_factory.mktemp("trace") / "bursty.jsonl",
        "mooncake",
        samples.synthetic(2000, seed=5, rate=2.0, gaps="bursty", groups=0),
    )
    spec = parse_spec(
        {
            "model": MODEL,
            "trace": {"path": str(path)},
            "slo": {"ttft_ms": {"p95": 800}, "e2e_s": {"p95": 20}},
            "constraints": {"instance_families": ["g6e"], "deployments": ["eks"]},
        }
    )
    return with_effect(spec, estimate(spec), lambda twin: estimate(twin)).document()


def test_an_estimate_of_a_bursty_trace_is_at_least_as_conservative_as_poisson(traced_result: dict[str, Any]):
    # given the estimate of a bursty trace with its comparison
    effect = traced_result["workload"]["trace"]["effect"]
    trace, poisson = effect["trace_best"], effect["poisson_on_trace_best"]
    # then on the same architecture the trace needs no fewer replicas, and predicts no lower TTFT
    assert trace is not None and poisson is not None
    assert trace["replicas_peak"] >= poisson["replicas_peak"]
    # (within the sampling noise of two simulations of one operating point, 1%: their arrivals are other draws)
    assert trace["ttft_ms_p95"] >= 0.99 * poisson["ttft_ms_p95"]
    assert effect["summary"].startswith("against Poisson at the same means, the trace")


def test_the_report_shows_the_recorded_trace_and_its_hours(traced_result: dict[str, Any]):
    # given an estimate built from a trace
    # when its report is rendered
    html = render_report(traced_result)
    # then the workload section names the trace, its digest and what it changed, with the hourly chart
    assert "Recorded trace" in html
    assert traced_result["workload"]["trace"]["digest"] in html
    assert "Against Poisson at the same means" in html
    assert 'data-chart="trace-hours"' in html


def test_the_api_reads_no_trace_file_on_its_server():
    # given specs naming a local trace and an S3 one
    local = {"model": MODEL, "trace": {"path": "/etc/passwd"}, "slo": {"e2e_s": {"p95": 9}}}
    remote = {"model": MODEL, "trace": {"path": "s3://bucket/logs/"}, "slo": {"e2e_s": {"p95": 9}}}
    # when the API checks them, then the local one is refused by field and the S3 one is let through
    problem = _server_file(local)
    assert problem is not None and problem.field == "trace.path" and "s3://" in problem.message
    assert _server_file(remote) is None
    assert _server_file({"spec": local}) is not None


def test_a_runs_load_test_drives_the_traces_lengths_not_the_defaults(tmp_path: Path):
    # given a spec whose lengths come only from a trace
    path = samples.write(tmp_path / "t.jsonl", "mooncake", samples.synthetic(500, seed=2, input_mean=3000))
    spec = parse_spec({"model": MODEL, "trace": {"path": str(path)}, "slo": {"e2e_s": {"p95": 30}}})
    workload = resolve(spec).derived()
    # when a run plans its load tests
    plan = _load_plan(spec, workload)
    # then they send the trace's lengths (its mean and p95) and its shared prefix
    assert plan.input_tokens is not None and plan.output_tokens is not None
    assert plan.input_tokens.mean == pytest.approx(workload["input_tokens"]["mean"])
    assert plan.input_tokens.p95 == pytest.approx(workload["input_tokens"]["p95"])
    assert plan.shared_prefix_tokens == workload["shared_prefix_tokens"] > 0


def test_a_trace_too_short_for_the_slos_percentile_is_said_in_the_answer(tmp_path: Path, capsys):
    from sizing.cli import main

    # given a trace of 40 requests and an SLO on TTFT p99 (which needs 100)
    samples.write(tmp_path / "few.jsonl", "mooncake", samples.synthetic(40, seed=1, rate=1.0))
    (tmp_path / "few.yaml").write_text(
        f"model: {MODEL}\ntrace: {{path: few.jsonl}}\nslo: {{ttft_ms: {{p99: 1000}}, e2e_s: {{p95: 20}}}}\n"
        "constraints: {deployments: [eks], instance_types: [g6e.xlarge]}\n"
    )
    # when it is estimated
    rc = main(["estimate", str(tmp_path / "few.yaml")])
    out = capsys.readouterr().out
    # then the answer says the trace is too short for the SLO's p99 (and for the p99 of its lengths), not p95
    assert rc == 0
    assert "too few requests for the SLO's p99 (40 in the trace; p99 needs 100)" in out
    assert "too few requests for p99 (40 in the trace; p99 needs 100)" in out
    assert "SLO's p95" not in out
