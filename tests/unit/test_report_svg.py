"""The report's own chart helpers: round-number ticks that cover the data, and charts that are well-formed SVG
whose data survive (points past the axes are clipped, not dropped from the page's logic)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from sizing.report import svg

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(finite, st.floats(min_value=1e-3, max_value=1e6))
def test_ticks_are_ascending_round_numbers_inside_the_range(lo: float, span: float) -> None:
    # given
    hi = lo + span
    # when
    ticks = svg.nice_ticks(lo, hi)
    # then
    assert 2 <= len(ticks) <= 12
    assert ticks == sorted(ticks)
    step = ticks[1] - ticks[0]
    assert all(lo - step * 1e-6 <= t <= hi + step * 1e-6 for t in ticks)
    assert step <= span


def test_an_axis_from_data_starts_at_zero_and_ends_on_a_tick_above_the_data() -> None:
    # when
    axis = svg.axis_for([3.0, 7.2, 9.1])
    # then
    assert axis.lo == 0.0
    assert axis.hi >= 9.1
    assert axis.ticks()[-1] <= axis.hi


def _marks(text: str) -> list[ET.Element]:
    root = ET.fromstring(text)
    return [el for el in root.iter() if "mark" in (el.get("class") or "").split()]


def test_an_xy_chart_is_svg_with_a_mark_per_point_and_line() -> None:
    # given
    s = svg.Series("a", [(0.5, 100.0), (1.0, 150.0), (2.0, 900.0)])
    # when
    text = svg.xy_chart(
        "c",
        "title <&>",
        x_label="x",
        y_label="y",
        series=[s],
        ref_lines=[svg.RefLine(500.0, "SLO")],
        markers=[svg.Marker(1.0, 150.0, "chosen", shape="star")],
    )
    # then: one polyline, three points, one star; the title is escaped
    assert len(_marks(text)) == 1 + 3 + 1
    assert "title &lt;&amp;&gt;" in text


def test_a_log_axis_covers_values_spanning_decades() -> None:
    # when
    axis = svg.axis_for([5_000.0, 400_000.0], log=True)
    ticks = axis.ticks()
    # then
    assert axis.lo < 5_000 and axis.hi > 400_000
    assert 10_000 in ticks and 100_000 in ticks


def test_a_bar_chart_has_one_bar_per_category_and_group() -> None:
    # when
    text = svg.bar_chart(
        "b",
        "bars",
        categories=[f"{h:02d}" for h in range(24)],
        groups=[svg.BarGroup("nodes", [2.0] * 24, "#000"), svg.BarGroup("replicas", [3.0] * 24, "#111")],
        y_label="count",
        line=svg.Series("demand", [(h, float(h)) for h in range(24)]),
    )
    # then
    assert len(_marks(text)) == 48 + 1


def test_counts_get_whole_number_ticks() -> None:
    # given: replicas by hour are 1 or 2
    text = svg.bar_chart(
        "b",
        "replicas",
        categories=["00", "01"],
        groups=[svg.BarGroup("replicas", [1.0, 2.0], "#000")],
        y_label="n",
    )
    # when
    root = ET.fromstring(text)
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("text-anchor") == "end"]
    # then
    assert labels and all(label is not None and label.isdigit() for label in labels)


def test_a_chart_carries_the_data_it_plots_and_draws_each_marker_where_its_data_says() -> None:
    # given: a curve, a star on its second point, an SLO line and a capacity line
    from sizing.report.reading import chart_geometry

    curve = svg.Series("curve <1>", [(0.5, 100.0), (1.0, 150.0), (2.0, 900.0)])
    text = svg.xy_chart(
        "c",
        "t",
        x_label="x",
        y_label="y",
        series=[curve, svg.Series("tests", [(0.8, 120.0)], kind="points", marker="square")],
        ref_lines=[svg.RefLine(500.0, "SLO"), svg.RefLine(1.6, "capacity", axis="x")],
        markers=[svg.Marker(1.0, 150.0, "chosen", shape="star", series="curve <1>")],
        x_axis=svg.Axis(0.0, 2.5),
        y_axis=svg.Axis(0.0, 1000.0),
    )
    # when
    geo = chart_geometry(text)["c"]
    # then: the data come back exactly, the star names its curve
    assert geo.series == {"curve <1>": curve.points, "tests": [(0.8, 120.0)]}
    assert sorted(geo.refs) == [("x", 1.6, "capacity"), ("y", 500.0, "SLO")]
    (star,) = geo.markers
    assert (star.shape, star.x, star.y, star.series) == ("star", 1.0, 150.0, "curve <1>")
    # and the star is drawn at that point: x = 1.0 of 0..2.5, y = 150 of 0..1000 inside the plot area
    left, right = svg.MARGIN_LEFT, svg.WIDTH - svg.MARGIN_RIGHT
    top, bottom = svg.MARGIN_TOP, svg.HEIGHT - svg.MARGIN_BOTTOM
    assert star.px is not None
    assert abs(star.px[0] - (left + 0.4 * (right - left))) < 0.2
    assert abs(star.px[1] - (bottom - 0.15 * (bottom - top))) < 0.2


def _label_boxes(chart: str) -> list[tuple[float, float, float, float]]:
    """The boxes of the marker labels a chart prints (font-weight 600 texts), as a reader sees them."""
    root = ET.fromstring(chart)
    boxes = []
    for t in root.iter("{http://www.w3.org/2000/svg}text"):
        if t.get("font-weight") != "600":
            continue
        x, y, w = float(t.get("x", 0)), float(t.get("y", 0)), svg.CHAR_W * len(t.text or "")
        left = x - w if t.get("text-anchor") == "end" else x
        boxes.append((left, y - 10, left + w, y + 2))
    return boxes


def test_marker_labels_never_overlap() -> None:
    # given markers crowded at nearly the same spot, as Pareto points of one cost are
    markers = [svg.Marker(1.0 + i * 0.01, 1000.0 + i, f"#{i + 1} p5.48xlarge") for i in range(6)]
    # when the chart is drawn
    chart = svg.xy_chart(
        "crowded",
        "t",
        x_label="x",
        y_label="y",
        series=[svg.Series("s", [(0.0, 0.0), (2.0, 2000.0)], "#000")],
        markers=markers,
    )
    boxes = _label_boxes(chart)
    # then every label printed stands clear of the others (a crowded one is left to its tooltip)
    assert boxes
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
