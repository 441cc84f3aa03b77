"""The HTML report: one self-contained, well-formed page that shows the answer, says exactly what the result says,
and draws every chart with data in it -- for an EKS winner, a Bedrock winner, a measured run and an infeasible
workload."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sizing.errors import InvalidInput
from sizing.plan import estimate
from sizing.report import render_report, render_run_report, run_result, write_report
from sizing.report.page import NAV, lookup, short_label
from sizing.report.reading import read_report, shown_number
from sizing.workload import parse_spec

# A small search space (Llama 3.1 8B on g5/g6e, plus Bedrock) keeps the planner's run around a second.
SMALL: dict[str, Any] = {
    "name": "chat-8b",
    "model": "llama-3.1-8b",
    "users": {"total": 4000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "traffic": {"profile": "business-hours"},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 1500}, "e2e_s": {"p95": 20}},
    "constraints": {
        "instance_families": ["g6e", "g5"],
        "deployments": ["eks", "sagemaker", "bedrock"],
        "quantizations": ["bf16", "fp8"],
    },
}
CHARTS = ("latency-ttft_ms", "latency-e2e_s", "pareto", "schedule", "cost-breakdown")


@pytest.fixture(scope="module")
def planned() -> dict[str, Any]:
    return estimate(parse_spec(SMALL))


@pytest.fixture(scope="module")
def eks_first(planned: dict[str, Any]) -> dict[str, Any]:
    """The same answer without Bedrock, so an EKS architecture ranks first."""
    result = copy.deepcopy(planned)
    result["architectures"] = [a for a in result["architectures"] if a["deployment"] != "bedrock"]
    for rank, a in enumerate(result["architectures"], start=1):
        a["rank"] = rank
    assert result["architectures"], "the small workload must have EKS answers"
    return result


@pytest.fixture(scope="module")
def eks_html(eks_first: dict[str, Any]) -> str:
    return render_report(eks_first)


def _section(html: str, sid: str) -> str:
    start = html.index(f'<section id="{sid}"')
    return html[start : html.index("</section>", start)]


def test_the_report_is_one_well_formed_page_that_loads_nothing_from_outside(
    eks_first: dict[str, Any], eks_html: str
) -> None:
    # when
    view = read_report(eks_html)
    # then
    assert view.faults == []
    assert view.external == []
    assert view.sections == [sid for sid, _ in NAV]
    assert view.result == json.loads(json.dumps(eks_first, default=str))


def test_rendering_leaves_the_result_as_it_was(eks_first: dict[str, Any]) -> None:
    # given
    before = copy.deepcopy(eks_first)
    # when
    render_report(eks_first)
    # then
    assert eks_first == before


def test_every_chart_is_drawn_with_data(eks_html: str) -> None:
    # when
    view = read_report(eks_html)
    # then: each chart has lines, points or bars in it
    for chart in CHARTS:
        assert view.charts.get(chart, 0) > 0, f"{chart} is missing or empty: {view.charts}"
    # one predicted curve per distinct accelerator configuration, each with several rates
    assert view.charts["latency-ttft_ms"] >= 2 * 5


def test_every_figure_on_the_page_is_the_results_own(eks_first: dict[str, Any], eks_html: str) -> None:
    # when
    view = read_report(eks_html)
    # then: each tagged figure equals the value at its path, and its text shows that value (rounded)
    assert len(view.figures) > 100
    for f in view.figures:
        assert lookup(eks_first, f.path) == f.value, f.path
        shown = shown_number(f.text)
        assert shown is not None, f"{f.path}: no number in {f.text!r}"
        number, rounding = shown
        assert abs(number - f.value * f.scale) <= rounding + 1e-9, (
            f"{f.path}: page shows {f.text!r} for {f.value}"
        )
    paths = {f.path for f in view.figures}
    for a in range(len(eks_first["architectures"])):
        assert f"architectures.{a}.cost.usd_per_month" in paths
        assert f"architectures.{a}.predicted.ttft_ms.p95" in paths
        assert f"architectures.{a}.predicted.e2e_s.p95" in paths
        # beside each predicted latency, how far such a prediction typically is off
        assert f"architectures.{a}.calibration.expected_error.ttft" in paths
    assert {
        "workload.peak_rps",
        "workload.slo.ttft_ms.p95",
        "architectures.0.cost.breakdown.compute_usd_per_month",
    } <= paths
    assert {f"architectures.0.cost.schedule.replicas_by_hour.{h}" for h in range(24)} <= paths


def test_the_answer_comes_first_and_names_the_cheapest_architecture_and_its_cost(
    eks_first: dict[str, Any], eks_html: str
) -> None:
    # given
    best = eks_first["architectures"][0]
    html = eks_html
    # then
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert short_label(best) in answer
    assert 'data-path="architectures.0.cost.usd_per_month"' in answer


def test_the_winners_manifests_are_in_the_report(eks_first: dict[str, Any], eks_html: str) -> None:
    # when
    manifests = _section(eks_html, "manifests")
    # then: Karpenter node classes and the serving objects, labelled with the architecture
    for kind in ("kind: EC2NodeClass", "kind: NodePool", "kind: Deployment", "kind: Service"):
        assert kind in manifests
    assert eks_first["architectures"][0]["instance_type"] in manifests


def test_manifests_given_by_the_caller_replace_the_rendered_ones(eks_first: dict[str, Any]) -> None:
    # when
    html = render_report(
        eks_first, manifests={"deployment.yaml": "kind: Deployment\nmetadata: {name: mine}\n"}
    )
    # then
    manifests = _section(html, "manifests")
    assert "deployment.yaml" in manifests and "name: mine" in manifests
    assert "EC2NodeClass" not in manifests


def test_a_bedrock_winner_is_reported_with_the_best_eks_fleet_beside_it(planned: dict[str, Any]) -> None:
    # given: the planner ranks Bedrock first for this small workload
    if planned["architectures"][0]["deployment"] != "bedrock":
        pytest.skip("Bedrock does not rank first for this workload any more")
    # when
    html = render_report(planned)
    view = read_report(html)
    # then: the answer is Bedrock, priced per token; the schedule and the manifests are the best EKS fleet's
    assert view.faults == []
    assert "Bedrock" in html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert view.charts.get("schedule", 0) > 0 and view.charts.get("pareto", 0) > 0
    assert "kind: NodePool" in _section(html, "manifests")
    assert "best-ranked EKS architecture" in _section(html, "manifests")


def test_measured_steps_are_plotted_beside_the_predicted_curve(eks_first: dict[str, Any]) -> None:
    # given: three load-test steps of the winner, the last one over the TTFT SLO
    best = eks_first["architectures"][0]
    steps = [
        {
            "step": i,
            "target": {"rate_rps": r},
            "requests_per_s": r,
            "ttft_ms": {"p50": t / 2, "p95": t, "p99": t * 1.2},
            "tpot_ms": {"p50": 20.0, "p95": 25.0, "p99": 30.0},
            "e2e_s": {"p50": 4.0, "p95": 6.0, "p99": 7.0},
            "errors": {},
            "meets_slo": t <= 1500,
            "candidate_id": best["id"],
        }
        for i, (r, t) in enumerate([(0.5, 300.0), (1.0, 600.0), (2.0, 1800.0)])
    ]
    # when
    html = render_report(eks_first, measurements=steps)
    # then: the measured points are in the latency charts and listed step by step
    latency = _section(html, "latency")
    assert "(measured)" in latency
    assert latency.count('<rect class="mark"') >= 3
    assert "Load-test steps" in latency and "1,800 ms" in latency
    assert '<span class="miss">no</span>' in latency


def test_a_measured_architecture_shows_measured_beside_predicted(eks_first: dict[str, Any]) -> None:
    # given
    result = copy.deepcopy(eks_first)
    measured = copy.deepcopy(result["architectures"][0]["predicted"])
    measured["ttft_ms"]["p95"] = 1234.0
    measured.update({"when": "2026-11-30T10:00:00+00:00", "how": "locust against the twin"})
    result["architectures"][0]["measured"] = measured
    # when
    html = render_report(result, curves=False)
    # then
    ranked = _section(html, "ranked")
    assert "measured" in ranked
    assert 'data-path="architectures.0.measured.ttft_ms.p95" data-value="1234.0">1,234 ms' in ranked
    assert "Measured:" in html[html.index('<div class="answer') : html.index('<section id="workload"')]


def test_an_infeasible_workload_says_so_and_why(eks_first: dict[str, Any]) -> None:
    # given
    result = copy.deepcopy(eks_first)
    result["architectures"] = []
    result["infeasible"] = {
        "binding": "ttft_ms.p95",
        "closest": {"value": 2100.0, "on": "g6e.xlarge TP1 fp8"},
        "message": "TTFT p95 cannot go below 2.1 s on any candidate",
    }
    # when
    html = render_report(result)
    view = read_report(html)
    # then
    assert view.faults == []
    assert "No architecture meets the SLOs." in html
    assert "TTFT p95 cannot go below 2.1 s on any candidate" in html
    assert "The binding SLO target is TTFT p95 (≤ 1,500 ms)" in html
    assert 'data-path="infeasible.closest.value" data-value="2100.0">2,100 ms' in html
    assert view.charts.get("pareto") is None


def test_text_from_the_workload_cannot_inject_markup(eks_first: dict[str, Any]) -> None:
    # given
    result = copy.deepcopy(eks_first)
    result["workload"]["name"] = "<script>alert('x')</script>"
    result["rejected"].append({"id": "x</td><b>", "kind": "slo", "reason": "<img src=http://evil>"})
    # when
    html = render_report(result, curves=False)
    view = read_report(html)
    # then
    assert "<script>alert" not in html
    assert "<img src=http://evil>" not in html
    assert view.faults == [] and view.external == []


def test_write_report_writes_the_page_and_returns_its_path(eks_first: dict[str, Any], tmp_path) -> None:
    # when
    path = write_report(eks_first, tmp_path / "out" / "report.html", curves=False)
    # then
    assert path == tmp_path / "out" / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_runs_payload_reports_its_workload_and_plots_its_candidates_steps(
    eks_first: dict[str, Any],
) -> None:
    # given: a run whose candidate c0 measured the best architecture at three concurrency levels
    best = copy.deepcopy(eks_first["architectures"][0])
    records = [
        {"step": i, "target": {"concurrency": c}, "requests": 50, "errors": {}, "requests_per_s": r,
         "ttft_ms": {"p50": 90.0, "p95": 120.0 * (i + 1), "p99": 150.0 * (i + 1)},
         "tpot_ms": {"p50": 12.0, "p95": 14.0, "p99": 15.0},
         "e2e_s": {"p50": 2.0, "p95": 3.0 + i, "p99": 4.0 + i}}
        for i, (c, r) in enumerate([(2.0, 0.9), (4.0, 1.7), (8.0, 2.1)])
    ]  # fmt: skip
    best["measured"] = {
        **{m: dict(records[1][m]) for m in ("ttft_ms", "tpot_ms", "e2e_s")},
        "capacity_rps": 1.7,
        "levels": [{"target": r["target"], "requests_per_s": r["requests_per_s"]} for r in records],
    }
    payload = {
        "run": {"run_id": "r-1", "status": "SUCCEEDED", "spec": SMALL, "updated_at": "2026-11-30T10:00:00Z"},
        "ranking": {"status": "ok", "failed": []},
        "architectures": [best],
        "measurements": [
            {"run_id": "r-1", "candidate_id": "c0", "seq": str(i), "record": r} for i, r in enumerate(records)
        ],
    }
    # when
    result, steps, wm = run_result(payload)
    html = render_run_report(payload)
    view = read_report(html)
    # then: the workload comes from the run's spec; c0's steps are the best architecture's measured points
    assert wm is not None and result["workload"]["peak_rps"] == pytest.approx(wm.peak_rps, rel=1e-3)
    assert len(steps) == 3 and view.faults == []
    assert "run r-1" in html
    latency = _section(html, "latency")
    assert f"{best['instance_type']} TP{best['tensor_parallel']}" in latency and "(measured)" in latency
    assert view.charts["latency-ttft_ms"] > 3
    assert any(f.path == "workload.peak_rps" for f in view.figures)


def test_the_exports_can_be_saved_from_the_page_itself(eks_first: dict[str, Any], eks_html: str) -> None:
    # given
    import base64
    import re

    from sizing.report import export_csv

    # when
    link = re.search(
        r'download="architectures.csv" href="data:text/csv;charset=utf-8;base64,([^"]+)"', eks_html
    )
    # then: the link carries exactly the CSV export, and result.json comes from the embedded result
    assert link is not None
    assert base64.b64decode(link.group(1)).decode("utf-8") == export_csv(eks_first)
    assert 'id="download-json" download="result.json"' in eks_html


HARDWARE_KEYS = {
    "model",
    "instance_type",
    "tensor_parallel",
    "quantization",
    "engine",
    "per_replica",
    "accelerator",
}


def test_a_result_that_cannot_be_reported_is_a_clear_input_error(eks_first: dict[str, Any]) -> None:
    # given
    result = copy.deepcopy(eks_first)
    del result["architectures"][0]["id"]
    # when / then
    with pytest.raises(InvalidInput) as err:
        render_report(result)
    assert [p.field for p in err.value.problems] == ["result.architectures.0.id"]
    with pytest.raises(InvalidInput):
        render_report(eks_first, measurements={"not": "a list"})  # type: ignore[arg-type]


def test_an_incomplete_architecture_still_renders_or_is_refused_cleanly(eks_first: dict[str, Any]) -> None:
    # given: each field of the best architecture in turn missing, then null
    keys = [k for k in eks_first["architectures"][0] if k != "id"]
    for key in keys:
        for variant in ("missing", "null"):
            result = copy.deepcopy(eks_first)
            if variant == "missing":
                del result["architectures"][0][key]
            else:
                result["architectures"][0][key] = None
            # when
            html = render_report(result, manifests={}, curves=key in HARDWARE_KEYS and variant == "null")
            # then: a well-formed page whose figures are still the result's own
            view = read_report(html)
            assert view.faults == [], (key, variant)
            assert all(lookup(result, f.path) == f.value for f in view.figures), (key, variant)
