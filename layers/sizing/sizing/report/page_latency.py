"""The report's latency section: predicted latency curves per architecture against the SLO, with the load
test's measured points beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from markupsafe import Markup

from sizing.base.text import ORIGIN_LABELS
from sizing.base.vocabulary import ENDPOINT, TWIN  # what served a load test's figures (`measured.origin`)
from sizing.orchestrate.contracts import StepRecord
from sizing.report import svg
from sizing.report.curves import Curve
from sizing.report.page_base import (
    METRIC_NAMES,
    METRIC_UNITS,
    UNIT_FMT,
    Y_CAP_POINT_FACTOR,
    Y_CAP_SLO_FACTOR,
    Page,
    Section,
    _section,
    origin_label,
    rps,
    short_label,
    shown_percentile,
    slo_limit,
    slo_targets,
    winner_index,
)
from sizing.results import Architecture, EstimateResult


def chart_targets(result: EstimateResult) -> list[tuple[str, str, float]]:
    """(metric, percentile, limit) of each SLO target as the latency charts draw it (the percentile shown)."""
    out = []
    for m in ("ttft_ms", "tpot_ms", "e2e_s"):
        q = shown_percentile(result, m)
        limit = slo_limit(result, m, q)
        if limit is not None:
            out.append((m, q, limit))
    return out


def _figure(s: StepRecord, metric: str, q: str) -> float | None:
    """The level's `metric` at percentile `q` (None when it states none)."""
    v: float | None = getattr(s.distribution(metric), q, None)
    return v


def _measured_points(steps: Sequence[StepRecord], metric: str, q: str) -> list[tuple[float, float]]:
    return sorted(
        (float(s.requests_per_s), float(v))
        for s in steps
        if (v := _figure(s, metric, q)) is not None and s.requests_per_s
    )


def _step_label(cid: str, pg: Page) -> str:
    """What served a candidate's load-test steps: its architecture's origin, else measured."""
    a = next((x for x in pg.typed.architectures if x.id == cid), None)
    return origin_label(a, pg.twin_run) if a is not None else ORIGIN_LABELS[ENDPOINT]


@dataclass
class _Plot:
    """What one latency chart draws: its series, operating points, and the highest y it must show."""

    series: list[svg.Series]
    markers: list[svg.Marker]
    tops: list[float]


def _curve_marks(
    plot: _Plot,
    c: Curve,
    color: str,
    metric: str,
    q: str,
    by_id: dict[str, tuple[int, Architecture]],
    winner: bool,
) -> None:
    """The operating point of a curve's first architecture at peak (a star for the chosen one, else a ring)."""
    f = UNIT_FMT[METRIC_UNITS[metric]]
    first = by_id.get(c.architecture_ids[0]) if c.architecture_ids else None
    op = c.operating
    y = op.value(metric, q) if op is not None else None
    if first is None or op is None or y is None:
        return
    _, a = first
    x = op.offered_rps
    tip = f"operating point of {short_label(a)} at peak: {x:.2f} req/s offered per replica, {f(y)}"
    table = getattr(getattr(a.predicted, metric), q, None)
    if not c.matches_table and isinstance(table, int | float):
        tip += f" (re-simulated; the table says {f(float(table))})"
    label = f"{'chosen' if winner else '#' + str(a.rank)}: {x:.2f} req/s, {f(y)}"
    shape: Literal["star", "ring"] = "star" if winner else "ring"
    plot.markers.append(svg.Marker(x, y, label, color, shape, tip, show_label=winner, series=c.label))
    plot.tops.append(y)


def _latency_plot(
    pg: Page,
    metric: str,
    q: str,
    curves: list[Curve],
    measured: dict[str, list[StepRecord]],
    winner_curve: Curve | None,
) -> _Plot:
    f = UNIT_FMT[METRIC_UNITS[metric]]
    by_id = {a.id: (i, a) for i, a in enumerate(pg.typed.architectures)}
    plot = _Plot([], [], [])
    for k, c in enumerate(curves):
        color = svg.PALETTE[k % len(svg.PALETTE)]
        pts = [(p.offered_rps, v) for p in c.points if (v := p.value(metric, q)) is not None]
        tips = [
            f"{c.label}: offered {p.offered_rps:.2f} req/s, served {p.requests_per_s:.2f} req/s, "
            f"{METRIC_NAMES[metric]} {q} {f(v)}"
            for p in c.points
            if (v := p.value(metric, q)) is not None
        ]
        plot.series.append(svg.Series(c.label, pts, color, "line", tips=tips))
        _curve_marks(plot, c, color, metric, q, by_id, c is winner_curve)
        for cid in c.architecture_ids:
            mpts = _measured_points(measured.get(cid) or [], metric, q)
            if mpts:
                label = f"{c.label} ({_step_label(cid, pg)})"
                plot.series.append(svg.Series(label, mpts, color, "points", marker="square"))
                plot.tops += [y for _, y in mpts]
    # measured candidates that have no predicted curve (e.g. an external endpoint)
    curve_ids = {i for c in curves for i in c.architecture_ids}
    for j, (cid, steps) in enumerate(sorted(measured.items())):
        mpts = _measured_points(steps, metric, q) if cid not in curve_ids else []
        if mpts:
            color = svg.PALETTE[(len(curves) + j) % len(svg.PALETTE)]
            label = f"{cid} ({_step_label(cid, pg)})"
            plot.series.append(svg.Series(label, mpts, color, "line", marker="square"))
            plot.tops += [y for _, y in mpts]
    return plot


def _latency_chart(
    metric: str, q: str, plot: _Plot, limit: float | None, capacity: tuple[float, str, str] | None
) -> Markup:
    """The SVG of one latency chart (drawn by `svg`, its texts escaped there)."""
    f = UNIT_FMT[METRIC_UNITS[metric]]
    refs = [svg.RefLine(limit, f"SLO {q} {f(limit)}")] if limit is not None else []
    if capacity is not None:
        x_cap, m_cap, q_cap = capacity
        label = f"SLO capacity {x_cap:.2f} req/s ({METRIC_NAMES[m_cap]} {q_cap})"
        refs.append(svg.RefLine(x_cap, label, axis="x", color=svg.MUTED))
    y_hi = max((limit or 0.0) * Y_CAP_SLO_FACTOR, max(plot.tops, default=0.0) * Y_CAP_POINT_FACTOR) or max(
        p[1] for s in plot.series for p in s.points
    )
    return Markup(
        svg.xy_chart(
            f"latency-{metric}",
            f"{METRIC_NAMES[metric]} {q} against offered load per replica",
            x_label="offered load per replica (requests/s)",
            y_label=f"{METRIC_NAMES[metric]} {q} ({METRIC_UNITS[metric]})",
            series=plot.series,
            ref_lines=refs,
            markers=plot.markers,
            y_axis=svg.axis_for([0.0, y_hi], pad=0.0),
        )
    )


def _latency_caption(
    pg: Page,
    measured: dict[str, list[StepRecord]],
    winner_curve: Curve | None,
    capacity: tuple[float, str, str] | None,
) -> dict[str, Any]:
    """What a latency chart's caption says beyond its metric: what the squares are, the chosen curve's capacity,
    the planner's own figure for it when they differ, and whether the curves are the table's simulations."""
    table = winner_curve.slo_limit_rps if winner_curve is not None else None
    x_cap = capacity[0] if capacity is not None else None
    return {
        "kinds": " / ".join(sorted({_step_label(cid, pg) for cid in measured})) if measured else "",
        "capacity": (METRIC_NAMES[capacity[1]], capacity[2]) if capacity is not None else None,
        "table_rps": f"{table:.2f}" if table is not None and x_cap is not None else "",
        "crossing_rps": (
            f"{x_cap:.2f}" if table is not None and x_cap is not None and abs(table - x_cap) >= 0.005 else ""
        ),
        "winner": winner_curve is not None,
        "resimulated": winner_curve is not None and not winner_curve.matches_table,
    }


def _latency(pg: Page, curves: list[Curve], measured: dict[str, list[StepRecord]]) -> Section:
    if not curves and not measured:
        return _section("latency.html", charts=[], empty=True)
    archs = pg.typed.architectures
    by_id = {a.id: a for a in archs}
    wi = winner_index(pg.typed)
    winner_id = archs[wi].id if wi is not None else None
    winner_curve = next(
        (c for c in curves if c.architecture_ids and c.architecture_ids[0] == winner_id), None
    )
    crossing = winner_curve.capacity(chart_targets(pg.typed)) if winner_curve is not None else None
    # the dotted line is the table's capacity (the planner's search), so the chart and the table say one figure;
    # where the chart's longer simulations cross the target elsewhere, the caption says where
    capacity = crossing
    if crossing is not None and winner_curve is not None and winner_curve.slo_limit_rps is not None:
        capacity = (float(winner_curve.slo_limit_rps), crossing[1], crossing[2])
    metrics = ["ttft_ms", "e2e_s"]
    if any(m == "tpot_ms" for m, _, _ in slo_targets(pg.typed)):
        metrics.insert(1, "tpot_ms")
    charts = []
    for metric in metrics:
        q = shown_percentile(pg.typed, metric)
        plot = _latency_plot(pg, metric, q, curves, measured, winner_curve)
        if any(s.points for s in plot.series):
            svg_text = _latency_chart(metric, q, plot, slo_limit(pg.typed, metric, q), capacity)
            charts.append({"metric": metric, "name": f"{METRIC_NAMES[metric]} {q}", "svg": svg_text})
    shared = [(c.label, [f"#{by_id[i].rank}" for i in c.architecture_ids if i in by_id]) for c in curves]
    return _section(
        "latency.html",
        empty=False,
        charts=charts,
        caption=_latency_caption(pg, measured, winner_curve, crossing),
        matches_table=winner_curve is not None and winner_curve.matches_table,
        shared=[(label, ", ".join(ranks)) for label, ranks in shared if ranks],
        steps=_measurements(measured, pg) if measured else None,
    )


def _step_figure(s: StepRecord, metric: str, q: str) -> str:
    v = _figure(s, metric, q)
    return UNIT_FMT[METRIC_UNITS[metric]](float(v)) if v is not None else "—"


def _measurements(measured: dict[str, list[StepRecord]], pg: Page) -> dict[str, Any]:
    """The load-test steps, one row each."""
    names = {a.id: short_label(a) for a in pg.typed.architectures}
    metrics = [(m, shown_percentile(pg.typed, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")]
    rows = []
    for cid, steps in measured.items():
        for s in steps:
            target = s.target.model_dump() if s.target is not None else {}
            rows.append(
                {
                    "cells": [
                        names.get(cid, cid),
                        _step_label(cid, pg),
                        ", ".join(f"{k} {v:g}" for k, v in target.items()),
                        rps(float(s.requests_per_s or 0)),
                        *(_step_figure(s, m, q) for m, q in metrics),
                        str(s.failed),
                    ],
                    "meets_slo": s.meets_slo,
                }
            )
    head = ["candidate", "figures", "load step", "served"]
    head += [f"{METRIC_NAMES[m]} {q}" for m, q in metrics] + ["errors", "meets SLO"]
    twins = ORIGIN_LABELS[TWIN] in {_step_label(cid, pg) for cid in measured}
    return {"head": head, "rows": rows, "twins": twins}
