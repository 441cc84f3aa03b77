"""Every example workload gets a report: the planner's real answer renders as a well-formed page whose charts all
have data and whose figures are the result's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.examples import EXAMPLES, example_estimate

from sizing.report import render_report
from sizing.report.page import lookup
from sizing.report.reading import chart_geometry, read_report, shown_number

CHARTS = ("latency-ttft_ms", "latency-e2e_s", "pareto", "schedule", "cost-breakdown")


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_renders_a_complete_report(example: Path) -> None:
    # given
    result = example_estimate(example.stem)
    # when
    html = render_report(result)
    view = read_report(html)
    # then
    assert view.faults == [] and view.external == []
    if result["architectures"]:
        for chart in CHARTS:
            assert view.charts.get(chart, 0) > 0, f"{example.stem}: {chart} missing or empty"
    for f in view.figures:
        assert lookup(result, f.path) == f.value, f.path
        shown = shown_number(f.text)
        assert shown is not None and abs(shown[0] - f.value * f.scale) <= shown[1] + 1e-9, (
            f.path,
            f.text,
            f.value,
        )
    # and every operating point drawn is a point of its own curve
    for name, geo in chart_geometry(html).items():
        if not name.startswith("latency-"):
            continue
        for m in geo.markers:
            curve = geo.series[m.series]
            assert (m.x, m.y) in curve, f"{example.stem} {name}: {m.label} is off its curve"
