"""The HTML report: one self-contained, well-formed page that shows the answer, says exactly what the result says,
and draws every chart with data in it -- for an EKS winner, a Bedrock winner, a measured run and an infeasible
workload."""

from __future__ import annotations

import copy
import json
import re
from html import unescape
from html.parser import HTMLParser
from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.plan import estimate
from sizing.report import render_report, render_run_report, run_result, write_report
from sizing.report.page import NAV, lookup, short_label
from sizing.report.reading import read_report, shown_number
from sizing.results import Architecture
from sizing.workload.parse import parse_spec

# A small search space (Llama 3.1 8B on g5/g6e, SageMaker and Bedrock) keeps the planner's run around a second.
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
        # Bedrock serves Llama 3.1 8B in us-east-1 only through its geography cross-Region profile
        "data_residency": "geography",
    },
}
CHARTS = ("latency-ttft_ms", "latency-e2e_s", "pareto", "schedule", "cost-breakdown")


@pytest.fixture(scope="module")
def planned() -> dict[str, Any]:
    return estimate(parse_spec(SMALL)).document()


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
    assert short_label(Architecture.model_validate(best)) in answer
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
    # given: the answer with its best Bedrock architecture first (the planner ranks it first for this workload,
    # $1,104 a month against $2,814 for the best EKS fleet; the test puts it first should that change)
    result = copy.deepcopy(planned)
    archs = result["architectures"]
    bedrock = next((a for a in archs if a["deployment"] == "bedrock"), None)
    assert bedrock is not None, "the small workload must have a Bedrock answer"
    result["architectures"] = [bedrock] + [a for a in archs if a is not bedrock]
    for rank, a in enumerate(result["architectures"], start=1):
        a["rank"] = rank
    # when
    html = render_report(result)
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


def _visible(html: str) -> str:
    """The page's text as a reader sees it: no tags, attributes, styles or the embedded JSON."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    text = re.sub(r"<title\b.*?</title>", " ", text, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", text)).split())


def _with_load_test(result: dict[str, Any], **measured: Any) -> dict[str, Any]:
    """The result with its first architecture load-tested: TTFT p95 1,234 ms at the level that met the SLOs."""
    out = copy.deepcopy(result)
    # the planner's own note on Bedrock ("assumed until measured") speaks of measuring, not of these figures
    out["assumptions"].pop("bedrock_latency", None)
    figures = copy.deepcopy(out["architectures"][0]["predicted"])
    figures["ttft_ms"]["p95"] = 1234.0
    figures.update({"when": "2026-11-30T10:00:00+00:00", "capacity_rps": 2.5, **measured})
    out["architectures"][0]["measured"] = figures
    return out


def _steps(arch_id: str) -> list[dict[str, Any]]:
    return [
        {
            "step": i,
            "target": {"concurrency": c},
            "requests_per_s": r,
            "ttft_ms": {"p50": 100.0, "p95": 200.0 * (i + 1), "p99": 300.0 * (i + 1)},
            "tpot_ms": {"p50": 20.0, "p95": 25.0, "p99": 30.0},
            "e2e_s": {"p50": 4.0, "p95": 6.0, "p99": 7.0},
            "errors": {},
            "meets_slo": True,
            "candidate_id": arch_id,
        }
        for i, (c, r) in enumerate([(2, 0.8), (4, 1.5)])
    ]


def test_an_endpoints_figures_are_labelled_measured_beside_predicted(eks_first: dict[str, Any]) -> None:
    # given: a load test of a real server
    result = _with_load_test(eks_first, origin="endpoint", how="locust against a vLLM endpoint")
    # when
    html = render_report(result, curves=False)
    # then
    ranked = _section(html, "ranked")
    assert "measured" in ranked and "simulated (twin)" not in ranked
    assert 'data-path="architectures.0.measured.ttft_ms.p95" data-value="1234.0">1,234 ms' in ranked
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert "Measured at the highest load level that met the SLOs:" in answer


def test_a_twins_figures_are_simulated_twin_everywhere_never_measured(eks_first: dict[str, Any]) -> None:
    # given: a run against local twins, with its steps plotted
    best = eks_first["architectures"][0]
    result = _with_load_test(eks_first, origin="twin", how="Locust sweep")
    # when
    html = render_report(result, measurements=_steps(best["id"]), manifests={}, curves=False)
    # then: table headers, the answer, the legend, the steps table and the notes say simulated (twin)
    assert "simulated (twin)" in _section(html, "ranked")
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert "Simulated (twin) at the highest load level that met the SLOs:" in answer
    latency = _section(html, "latency")
    assert "(simulated (twin))" in latency  # the chart's legend
    assert "<td>simulated (twin)</td>" in latency  # the load-test steps
    assert "simulated (twin)" in _section(html, "assumptions")
    # and nowhere does the page call them measured
    assert re.search(r"\bmeasured\b", _visible(html), re.I) is None


def test_figures_without_an_origin_from_a_twin_run_are_simulated_twin(eks_first: dict[str, Any]) -> None:
    # given: figures recorded before `origin`, in a run whose calibration rows say it measured local twins
    result = _with_load_test(eks_first, how="Locust sweep")
    result["calibration_rows"] = [{"row_id": "LT-c0-2", "origin": "twin"}]
    # when
    html = render_report(result, manifests={}, curves=False)
    # then
    assert "simulated (twin)" in _section(html, "ranked")
    assert re.search(r"\bmeasured\b", _visible(html), re.I) is None


def test_the_prediction_at_the_measured_level_stands_beside_the_measured_figure(
    eks_first: dict[str, Any],
) -> None:
    # given: the run re-simulated the estimator at the load level it measured
    at_level = {"ttft_ms": {"p50": 90.0, "p95": 1187.5, "p99": 1400.0}}
    result = _with_load_test(eks_first, origin="endpoint", predicted_at_level=at_level)
    # when
    html = render_report(result, curves=False)
    # then: in the table and in the answer, next to the measured 1,234 ms
    path = 'data-path="architectures.0.measured.predicted_at_level.ttft_ms.p95" data-value="1187.5">1,188 ms'
    ranked = _section(html, "ranked")
    measured_at = ranked.index('data-path="architectures.0.measured.ttft_ms.p95"')
    assert path in ranked[measured_at : measured_at + 400]
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert path in answer and "predicted at that load" in answer


def _with_figures(result: dict[str, Any]) -> dict[str, Any]:
    """The result with the figures of issue 19 stated on its first architecture: the simulation's concurrency, an
    e2e close to its SLO, a tuned serving configuration, a refused share, dearer sizes that also fit, and why the
    cheaper hardware was excluded."""
    out = copy.deepcopy(result)
    a = out["architectures"][0]
    a["per_replica"]["in_flight"] = 3.1
    a["headroom"] = {
        "load_pct": 43.9,
        "latency": {"ttft_ms.p95": 48.5, "e2e_s.p95": 3.0},
        "tightest": "e2e_s.p95",
        "tightest_pct": 3.0,
    }
    a["headroom_pct"] = 43.9
    a["serving"] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "engine": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "tensor_parallel": 1,
        "quantization": "fp8",
        "kv_cache_dtype": "fp8",
        "max_model_len": 15104,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 1024,
        "gpu_memory_utilization": 0.92,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
    }
    a["tuning"] = {
        "searched": 10,
        "changed": {"max_num_batched_tokens": [2048, 1024]},
        "summary": "max_num_batched_tokens 1024 instead of 2048: TPOT p95 38 → 29 ms, capacity +22%",
        "default_usd_per_month": 3400.0,
        "capacity_gain_pct": 22.0,
    }
    a["context"] = {
        "max_model_len": 15104,
        "covers": "p99.9 of input + output (15,092 tokens)",
        "refused_share": 0.0125,
        "model_context": 131072,
    }
    a["also_fits_on"] = [{"instance_type": "g6e.2xlarge", "usd_per_month": 3371.01}]
    out["summary"] = "The answer costs 2.2x the cheapest hardware: g5.xlarge misses e2e p95 5.1 s > 4 s."
    out["why_not_cheaper"] = [
        {"option": "g5.xlarge TP1 bf16 vllm", "usd_per_month": 1271.14, "reason": "e2e p95 5.1 s > 4 s"}
    ]
    return out


def test_both_headrooms_are_shown_and_named(eks_first: dict[str, Any]) -> None:
    # given: 43.9% of the load capacity free, but e2e p95 only 3% below its SLO
    result = _with_figures(eks_first)
    # when
    html = render_report(result, curves=False, manifests={})
    # then: neither figure stands alone unnamed
    answer = _visible(html[html.index('<div class="answer') : html.index('<section id="workload"')])
    assert "load headroom 43.9% (capacity left free at peak)" in answer
    assert (
        "latency headroom TTFT p95 48.5% below its SLO, end-to-end p95 3.0% below its SLO (tightest)"
        in answer
    )
    ranked = _section(html, "ranked")
    assert "load headroom" in ranked and "latency headroom" in ranked
    assert 'data-path="architectures.0.headroom.tightest_pct" data-value="3.0">3.0%' in ranked
    view = read_report(html)
    assert all(lookup(result, f.path) == f.value for f in view.figures)
    assert "architectures.0.headroom.latency.e2e_s.p95" in {f.path for f in view.figures}


def test_the_simulations_concurrency_tuning_and_serving_settings_are_shown(eks_first: dict[str, Any]) -> None:
    # given
    result = _with_figures(eks_first)
    # when
    html = render_report(result, curves=False, manifests={})
    # then: in flight is the simulation's, beside what the tuning changed and the settings deployed
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert (
        'data-path="architectures.0.per_replica.in_flight" data-value="3.1">3.1</span> requests in flight'
        in answer
    )
    assert "max_num_batched_tokens 1024 instead of 2048: TPOT p95 38 → 29 ms, capacity +22%" in _visible(
        answer
    )
    serving = _section(html, "serving")
    for path, text in (
        ("serving.max_model_len", "15,104"),
        ("serving.max_num_seqs", "256"),
        ("serving.max_num_batched_tokens", "1,024"),
        ("per_replica.in_flight", "3.1"),
        ("context.refused_share", "1.2%"),
    ):
        assert f'data-path="architectures.0.{path}"' in serving and text in serving, path
    row = _visible(serving)
    assert "fp8" in row and " on " in row and "capacity +22%" in row
    assert "covers p99.9 of input + output (15,092 tokens)" in row


def test_the_reason_the_answer_is_not_cheaper_is_near_the_top(eks_first: dict[str, Any]) -> None:
    # given
    result = _with_figures(eks_first)
    # when
    html = render_report(result, curves=False, manifests={})
    # then: in the answer block, before any section
    answer = html[html.index('<div class="answer') : html.index('<section id="workload"')]
    assert "The answer costs 2.2x the cheapest hardware" in answer
    assert "g5.xlarge TP1 bf16 vllm" in answer and "e2e p95 5.1 s &gt; 4 s" in answer
    assert 'data-path="why_not_cheaper.0.usd_per_month" data-value="1271.14">$1,271' in answer


def test_dearer_sizes_that_also_fit_are_named_in_the_row(eks_first: dict[str, Any]) -> None:
    # given
    result = _with_figures(eks_first)
    # when
    ranked = _section(render_report(result, curves=False, manifests={}), "ranked")
    # then
    assert "also fits on: g6e.2xlarge" in _visible(ranked)
    assert 'data-path="architectures.0.also_fits_on.0.usd_per_month" data-value="3371.01">$3,371' in ranked


def test_an_older_result_without_the_new_figures_still_reports(eks_first: dict[str, Any]) -> None:
    # given: a result from before serving settings, tuning, headroom blocks, in-flight counts and summaries
    result = copy.deepcopy(eks_first)
    for k in ("summary", "why_not_cheaper"):
        result.pop(k, None)
    for a in result["architectures"]:
        for k in ("headroom", "tuning", "context", "also_fits_on", "placement", "catalog_model"):
            a.pop(k, None)
        if a.get("per_replica"):
            a["per_replica"].pop("in_flight", None)
        if a.get("serving"):
            a["serving"] = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "max_model_len": None}
    # when
    html = render_report(result, manifests={})
    view = read_report(html)
    # then: a complete page; the load headroom is still shown and named, nothing made up
    assert view.faults == []
    assert all(lookup(result, f.path) == f.value for f in view.figures)
    assert view.charts.get("latency-ttft_ms", 0) > 0
    answer = _visible(html[html.index('<div class="answer') : html.index('<section id="workload"')])
    assert "load headroom" in answer and "latency headroom" not in answer and "in flight" not in answer


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


HOSTILE = '<script>alert(1)</script>" onmouseover="alert(2)'


class _Elements(HTMLParser):
    """Every element of a page as the browser would build it: (tag, attributes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def test_hostile_names_come_out_as_text_in_the_page_and_in_its_attributes(eks_first: dict[str, Any]) -> None:
    # given a workload, model, architecture id, rejected candidate, summary and tuning note that each hold markup and
    # a double quote that would end an attribute
    result = copy.deepcopy(eks_first)
    result["workload"]["name"] = HOSTILE
    result["workload"]["model"] = HOSTILE
    result["architectures"][0]["id"] = HOSTILE
    result["architectures"][0]["tuning"] = {"summary": HOSTILE}
    result["summary"] = HOSTILE
    result["rejected"].append({"id": HOSTILE, "kind": "memory", "reason": HOSTILE})
    # when
    html = render_report(result, curves=False, manifests={"x.yaml": HOSTILE})
    parser = _Elements()
    parser.feed(html)
    # then no element or attribute was injected: the page's own two scripts only, no event handler anywhere
    tags = [tag for tag, _ in parser.elements]
    assert tags.count("script") == 2
    assert not any(name.startswith("on") for _, attrs in parser.elements for name in attrs)
    # and each hostile text reads back whole, where the page puts it
    assert "Sizing report — " + HOSTILE in unescape(html[html.index("<h1>") : html.index("</h1>")])
    titles = [
        attrs.get("title") for tag, attrs in parser.elements if tag == "span" and attrs.get("class") == "id"
    ]
    assert HOSTILE in titles
    view = read_report(html)
    assert view.faults == []
    assert view.result is not None and view.result["workload"]["name"] == HOSTILE


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
    records: list[dict[str, Any]] = [
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


#: What every architecture of a result states (`sizing.results.Architecture`): without one it cannot be reported
#: (an architecture that does not name its model serves the workload's).
REQUIRED_KEYS = {"deployment", "engine", "meets_slo", "cost"}


def test_a_result_that_cannot_be_reported_is_a_clear_input_error(eks_first: dict[str, Any]) -> None:
    # given
    result = copy.deepcopy(eks_first)
    del result["architectures"][0]["id"]
    # when / then
    with pytest.raises(InvalidInput) as err:
        render_report(result)
    assert [p.field for p in err.value.problems] == ["result.architectures.0.id"]
    with pytest.raises(InvalidInput):
        render_report(eks_first, measurements={"not": "a list"})


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
            if key in REQUIRED_KEYS:
                # when / then: a field every architecture states is refused by its name
                with pytest.raises(InvalidInput) as err:
                    render_report(result, manifests={}, curves=False)
                assert [p.field for p in err.value.problems] == [f"result.architectures.0.{key}"], (
                    key,
                    variant,
                )
                continue
            # when
            html = render_report(result, manifests={}, curves=key in HARDWARE_KEYS and variant == "null")
            # then: a well-formed page whose figures are still the result's own
            view = read_report(html)
            assert view.faults == [], (key, variant)
            assert all(lookup(result, f.path) == f.value for f in view.figures), (key, variant)
