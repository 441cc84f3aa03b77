"""The latency charts tell the truth at a glance: the chosen architecture's star is a point of its own curve, at
the table's figures, and the capacity line stands where that curve first crosses an SLO line -- read from the
charts themselves, in their own units (offered requests/s per replica on x)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from sizing.plan.search import estimate
from sizing.report import render_report
from sizing.report.reading import ChartGeometry, MarkerGeometry, chart_geometry
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.parse import load_spec, parse_spec
from sizing.workload.spec import WorkloadSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: The workload of the issue: the star sat ~1.1 s above its curve and the capacity line was off the crossing.
CHAT_8B: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "users": {"total": 2000},
    "preset": "chat",
    "slo": {"ttft_ms": {"p95": 300}},
}
#: Half the last digit the planner keeps of a predicted figure (ms to 0.1, seconds to 0.001) and of a rate (4
#: decimals).
TABLE_ROUNDING = {"ttft_ms": 0.05, "tpot_ms": 0.05, "e2e_s": 0.0005}
RATE_ROUNDING = 0.00005


def _specs() -> list[tuple[str, WorkloadSpec]]:
    return [
        ("chat-8b-2000-users", parse_spec(CHAT_8B)),
        ("chatbot.yaml", load_spec(EXAMPLES / "chatbot.yaml")),
    ]


@pytest.fixture(scope="module", params=_specs(), ids=lambda p: p[0])
def sized(request: pytest.FixtureRequest) -> tuple[dict[str, Any], WorkloadModel]:
    spec = request.param[1]
    return estimate(spec).document(), resolve(spec)


def _value_at(points: list[tuple[float, float]], x: float) -> float:
    """The polyline's y at x (linear between its vertices)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    raise AssertionError(f"x={x} is outside the curve ({points[0][0]} .. {points[-1][0]})")


def _crossing(points: list[tuple[float, float]], level: float) -> float | None:
    """Where the polyline first rises above `level`: between the last vertex at or below it and the next one."""
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if y0 <= level < y1:
            return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
        if y0 > level:
            return None
    return None


def _star(geo: ChartGeometry) -> MarkerGeometry:
    stars = [m for m in geo.markers if m.shape == "star"]
    assert len(stars) == 1, geo.markers
    return stars[0]


def _latency_charts(html: str) -> dict[str, ChartGeometry]:
    charts = {k: v for k, v in chart_geometry(html).items() if k.startswith("latency-")}
    assert {"latency-ttft_ms", "latency-e2e_s"} <= set(charts)
    return charts


def _chosen(result: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in result["architectures"] if a.get("meets_slo") and a["deployment"] != "bedrock")


def _drop_bedrock(result: dict[str, Any]) -> dict[str, Any]:
    """The result with self-hosted answers only, so an architecture with a curve is the chosen one."""
    out = dict(result)
    out["architectures"] = [a for a in result["architectures"] if a["deployment"] != "bedrock"]
    return out


def test_the_star_is_a_point_of_its_own_curve_at_the_tables_figures(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given
    result, wm = sized
    result = _drop_bedrock(result)
    chosen = _chosen(result)
    # when
    charts = _latency_charts(render_report(result, workload=wm, manifests={}))
    # then: in every latency chart the star sits on its curve, at the operating point and the table's figure
    for name, geo in charts.items():
        metric = name.removeprefix("latency-")
        star = _star(geo)
        curve = geo.series[star.series]
        assert star.y == pytest.approx(_value_at(curve, star.x), rel=1e-9, abs=1e-9), name
        assert abs(star.x - chosen["per_replica"]["rps_at_peak"]) <= RATE_ROUNDING, name
        assert abs(star.y - chosen["predicted"][metric]["p95"]) <= TABLE_ROUNDING[metric] + 1e-9, name


def test_every_operating_point_is_on_its_own_curve(sized: tuple[dict[str, Any], WorkloadModel]) -> None:
    # given
    result, wm = sized
    # when
    charts = _latency_charts(render_report(_drop_bedrock(result), workload=wm, manifests={}))
    # then: the other architectures' rings too
    for name, geo in charts.items():
        assert len(geo.markers) >= 2, name
        for m in geo.markers:
            assert m.y == pytest.approx(_value_at(geo.series[m.series], m.x), rel=1e-9, abs=1e-9), (name, m)


def test_the_capacity_line_is_the_tables_capacity_near_where_the_chosen_curve_first_crosses_an_slo(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given
    result, wm = sized
    result = _drop_bedrock(result)
    # when
    charts = _latency_charts(render_report(result, workload=wm, manifests={}))
    # then: one capacity line, at the same rate in every chart: the table's capacity (the chart and the table say
    # one figure), within the simulations' sampling noise of the first crossing of an SLO line by the chosen curve
    crossings = []
    lines = set()
    for geo in charts.values():
        curve = geo.series[_star(geo).series]
        verticals = [at for axis, at, _ in geo.refs if axis == "x"]
        assert len(verticals) == 1
        lines.add(verticals[0])
        for axis, at, _ in geo.refs:
            if axis == "y" and (x := _crossing(curve, at)) is not None:
                crossings.append(x)
    assert len(lines) == 1 and crossings
    line = lines.pop()
    assert line == pytest.approx(result["architectures"][0]["per_replica"]["rps_slo_limit"], rel=1e-9)
    assert line == pytest.approx(min(crossings), rel=0.15)


def test_the_operating_point_is_left_of_the_capacity_line_by_the_load_headroom(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given
    result, wm = sized
    result = _drop_bedrock(result)
    # when
    geo = _latency_charts(render_report(result, workload=wm, manifests={}))["latency-ttft_ms"]
    # then: the star is left of the line -- the gap a reader sees is the spare load
    line = next(at for axis, at, _ in geo.refs if axis == "x")
    assert _star(geo).x < line


def test_a_report_from_the_json_alone_still_puts_the_star_on_its_curve(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given: no workload model, as `sizing estimate --report` and a stored result render it
    result, _ = sized
    # when
    charts = _latency_charts(render_report(_drop_bedrock(result), manifests={}))
    # then: the curve is re-simulated from the result's figures, and the star is still one of its points
    for name, geo in charts.items():
        star = _star(geo)
        curve = geo.series[star.series]
        assert star.y == pytest.approx(_value_at(curve, star.x), rel=1e-9, abs=1e-9), name
        line = next(at for axis, at, _ in geo.refs if axis == "x")
        crossings = [x for axis, at, _ in geo.refs if axis == "y" and (x := _crossing(curve, at)) is not None]
        if crossings:
            assert line <= min(crossings) + 1e-9, name


def test_the_x_axis_is_offered_load_for_curve_star_and_line(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given
    result, wm = sized
    # when
    html = render_report(_drop_bedrock(result), workload=wm, manifests={})
    # then
    for name in ("latency-ttft_ms", "latency-e2e_s"):
        svg = html[html.index(f'data-chart="{name}"') :]
        svg = svg[: svg.index("</svg>")]
        assert "offered load per replica (requests/s)" in svg


def test_the_page_says_whether_its_curves_are_the_tables_own_simulations(
    sized: tuple[dict[str, Any], WorkloadModel],
) -> None:
    # given
    result, wm = sized
    result = _drop_bedrock(result)
    # when
    with_workload = render_report(result, workload=wm, manifests={})
    json_only = render_report(result, manifests={})
    # then: with the planner's workload the curves are its simulations; without it the page does not claim so
    section = with_workload[with_workload.index('<section id="latency"') :]
    assert "simulated as for the ranked table" in section and "re-simulated" not in section
    section = json_only[json_only.index('<section id="latency"') :]
    if "re-simulated from its rounded figures" not in section:
        assert "simulated as for the ranked table" in section
