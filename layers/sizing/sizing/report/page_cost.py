"""The report's cost/latency chart (the Pareto front) and the schedule-and-cost section: the fleet by hour
and the monthly cost broken down."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from sizing.report import svg
from sizing.report.page_base import (
    BREAKDOWN_LABELS,
    HOURS,
    LOG_COST_RATIO,
    MAX_PARETO_LABELS,
    Page,
    Section,
    _section,
    count,
    feasible,
    plain,
    sec,
    short_label,
    slo_limit,
    two,
    usd,
    winner_index,
)
from sizing.results import Architecture, rank_cost


def _e2e_p95(a: Architecture) -> float | None:
    """The predicted end-to-end p95 the cost chart places an architecture at."""
    return a.predicted.e2e_s.p95


def _pareto_points(archs: list[Architecture]) -> tuple[list[svg.Series], list[float]]:
    """The feasible architectures as (e2e p95, monthly cost) points: the others, then the Pareto front's steps."""
    pts_all, tips_all, front = [], [], []
    for a in archs:
        e2e = _e2e_p95(a)
        if e2e is None:
            continue
        pt = (float(e2e), rank_cost(a))
        tip = f"#{a.rank} {short_label(a)}: {usd(pt[1])}/month, e2e p95 {sec(pt[0])}"
        if a.pareto:
            front.append((pt, tip))
        else:
            pts_all.append(pt)
            tips_all.append(tip)
    front.sort()
    series = [
        svg.Series("other feasible architectures", pts_all, "#9aa3ad", "points", tips=tips_all),
        svg.Series("Pareto front", [p for p, _ in front], svg.PALETTE[0], "step", tips=[t for _, t in front]),
    ]
    return series, [p[0] for p in pts_all] + [p[0] for p, _ in front]


def _pareto(pg: Page) -> Section:
    wi = winner_index(pg.typed)
    if wi is None:
        return _section("pareto.html", chart=None)
    archs = [a for a in pg.typed.architectures if feasible(a)]
    series, xs = _pareto_points(archs)
    costs = [p[1] for s in series for p in s.points if p[1] > 0]
    log = bool(costs) and max(costs) / min(costs) >= LOG_COST_RATIO
    w = pg.typed.architectures[wi]
    markers = []
    w_e2e = _e2e_p95(w)
    if w_e2e is not None:
        tip = f"chosen: {short_label(w)}"
        markers.append(
            svg.Marker(float(w_e2e), rank_cost(w), f"#{w.rank} chosen", svg.PALETTE[5], "star", tip)
        )
    labelled = [a for a in archs if a.pareto and a is not w and _e2e_p95(a) is not None][:MAX_PARETO_LABELS]
    for a in labelled:
        x, tip = float(_e2e_p95(a) or 0.0), f"#{a.rank} {short_label(a)}"
        markers.append(svg.Marker(x, rank_cost(a), f"#{a.rank}", svg.PALETTE[0], "ring", tip))
    limit = slo_limit(pg.typed, "e2e_s", "p95")
    refs = [svg.RefLine(limit, f"SLO e2e p95 {sec(limit)}", axis="x")] if limit is not None else []
    chart = svg.xy_chart(
        "pareto",
        "Monthly cost against p95 end-to-end latency",
        x_label="predicted end-to-end latency p95 (s)",
        y_label="monthly cost (USD" + (", log scale)" if log else ")"),
        series=series,
        ref_lines=refs,
        markers=markers,
        x_axis=svg.axis_for(xs + ([limit] if limit else [])),
        y_log=log,
    )
    marked = [(str(a.rank), short_label(a)) for a in [w, *labelled]]
    return _section("pareto.html", chart=Markup(chart), marked=marked)


def _fleet_schedule(pg: Page, idx: int, wi: int) -> dict[str, Any] | None:
    """The hour-by-hour replicas and nodes of architecture `idx` against demand: a chart and its table."""
    w = pg.typed.workload
    hourly = w.hourly_rps
    a = pg.typed.architectures[idx]
    sched = a.cost.schedule
    if sched is None:
        return None
    groups = [
        svg.BarGroup("nodes", [float(x) for x in sched.nodes_by_hour], svg.PALETTE[0]),
        svg.BarGroup("replicas", [float(x) for x in sched.replicas_by_hour], svg.PALETTE[4]),
    ]
    groups = [g for g in groups if len(g.values) == len(HOURS)]
    if not groups:
        return None
    demand = svg.Series(
        "demand (req/s)", [(h, float(v)) for h, v in enumerate(hourly)], svg.PALETTE[5], "line"
    )
    chart = svg.bar_chart(
        "schedule",
        f"Replicas and nodes by hour of day ({w.timezone or 'local time'})",
        categories=HOURS,
        groups=groups,
        y_label="count",
        line=demand if len(hourly) == len(HOURS) else None,
        line_label="requests/s",
    )
    rows: list[list[Any]] = []
    for key, label, vals in (
        ("replicas_by_hour", "replicas", sched.replicas_by_hour),
        ("nodes_by_hour", "nodes", sched.nodes_by_hour),
    ):
        rows.append(
            [label, *(pg.n(f"architectures.{idx}.cost.schedule.{key}.{h}", count) for h in range(len(vals)))]
        )
    rows.append(["req/s", *(pg.n(f"workload.hourly_rps.{h}", two) for h in range(len(hourly)))])
    return {
        "chart": Markup(chart),
        "label": short_label(a),
        "best_fleet": idx != wi,
        "timezone": w.timezone or "local time",
        "rows": rows,
    }


def _demand_schedule(pg: Page) -> dict[str, Any] | None:
    """Demand by hour alone (a Bedrock winner has no fleet to schedule)."""
    hourly = pg.typed.workload.hourly_rps
    if len(hourly) != len(HOURS):
        return None
    chart = svg.bar_chart(
        "schedule",
        "Demand by hour of day",
        categories=HOURS,
        groups=[svg.BarGroup("requests/s", [float(v) for v in hourly], svg.PALETTE[5])],
        y_label="requests/s",
    )
    return {"chart": Markup(chart)}


def _cost_breakdown(pg: Page, wi: int) -> dict[str, Any]:
    """The chosen architecture's monthly cost: its parts, then the total under each pricing option."""
    a0 = pg.typed.architectures[wi]
    c = a0.cost
    bd = c.breakdown
    parts = [
        (BREAKDOWN_LABELS.get(k, k.replace("_", " ")), float(v))
        for k, v in bd.items()
        if k.endswith("_usd_per_month") and isinstance(v, int | float)
    ]
    bars = [(label, v, svg.PALETTE[i % len(svg.PALETTE)]) for i, (label, v) in enumerate(parts)]
    options = [
        ("Per token (Bedrock)" if a0.deployment == "bedrock" else "On-demand", c.usd_per_month),
        ("Spot above the base", c.usd_per_month_spot),
        ("1-year savings plan", c.usd_per_month_savings_plan_1y),
    ]
    bars += [(label, float(v), "#7a8796") for label, v in options if isinstance(v, int | float)]
    chart = (
        svg.hbar_chart("cost-breakdown", "Monthly cost of the chosen architecture", rows=bars) if bars else ""
    )
    w0 = f"architectures.{wi}"
    items = [
        (
            BREAKDOWN_LABELS.get(k, k.replace("_", " ")),
            pg.n(f"{w0}.cost.breakdown.{k}", usd if "usd" in k else plain),
        )
        for k in bd
    ]
    items += [
        (label, pg.n(f"{w0}.cost.{k}", usd))
        for label, k in (
            ("Per hour at peak", "usd_per_hour_peak"),
            ("Per month, on-demand", "usd_per_month"),
            ("Per month, spot above the base", "usd_per_month_spot"),
            ("Per month, 1-year savings plan", "usd_per_month_savings_plan_1y"),
            ("Per million output tokens", "usd_per_million_output_tokens"),
            ("Per user per month", "usd_per_user_month"),
        )
    ]
    return {"chart": Markup(chart) if chart else None, "label": short_label(a0), "entries": items}


def _schedule_and_cost(pg: Page) -> Section:
    archs = pg.typed.architectures
    wi = winner_index(pg.typed)
    if wi is None:
        return _section("cost.html", empty=True)
    idx = next((i for i, a in enumerate(archs) if i >= wi and feasible(a) and a.cost.schedule), None)
    fleet = _fleet_schedule(pg, idx, wi) if idx is not None else None
    demand = _demand_schedule(pg) if idx is None else None
    return _section(
        "cost.html", empty=False, fleet=fleet, demand=demand, hours=HOURS, breakdown=_cost_breakdown(pg, wi)
    )
