"""The report's answer section: the chosen architecture, its fleet, latency and headroom, what each SLO
target costs and why nothing cheaper was chosen."""

from __future__ import annotations

from typing import Any

from sizing.answer import AnswerRow
from sizing.base.vocabulary import TWIN  # what served a load test's figures (`measured.origin`)
from sizing.report.page_base import (
    METRIC_NAMES,
    METRIC_UNITS,
    UNIT_FMT,
    Fmt,
    Num,
    Page,
    Section,
    _metric_name,
    _section,
    _span,
    _str,
    lookup,
    measured_origin,
    origin_label,
    pct,
    short_label,
    shown_percentile,
    slo_limit,
    tenths,
    usd,
    was_measured,
    winner_index,
)
from sizing.results import Architecture


def _headroom(pg: Page, p: str) -> dict[str, Any]:
    """Both headrooms, named: spare load at peak, and how far the tightest SLO target's prediction is below it."""
    a = lookup(pg.r, p) or {}
    load_path = (
        f"{p}.headroom.load_pct"
        if isinstance(lookup(a, "headroom.load_pct"), int | float)
        else f"{p}.headroom_pct"
    )
    lat = lookup(a, "headroom.latency")
    items = []
    if isinstance(lat, dict):
        tightest = lookup(a, "headroom.tightest")
        for target, v in lat.items():
            if not isinstance(v, int | float) or isinstance(v, bool) or "." not in str(target):
                continue
            items.append(
                {
                    "name": " ".join(_metric_name(str(target))),
                    "fig": pg.n(f"{p}.headroom.latency.{target}", pct),
                    "tightest": target == tightest and len(lat) > 1,
                }
            )
    return {"load": pg.n(load_path, pct), "latency": items}


def _at_level(pg: Page, p: str, metric: str, q: str, fmt: Fmt) -> Num | None:
    """The estimator's figure at the load level the figure beside it was taken at (None without one)."""
    return pg.num(f"{p}.measured.predicted_at_level.{metric}.{q}", fmt)


def _why_not_cheaper(pg: Page) -> dict[str, Any]:
    rows = [
        (x.option, pg.n(f"why_not_cheaper.{i}.usd_per_month", usd), x.reason)
        for i, x in enumerate(pg.typed.why_not_cheaper)
    ]
    return {"summary": _str(pg.typed.summary), "rows": rows}


def _answer_fleet(pg: Page, a: Architecture, p: str, row: AnswerRow) -> dict[str, Any] | None:
    if a.replicas is None:
        return None
    return {
        "replicas": _span(pg, p + ".replicas"),
        "instances": _span(pg, p + ".instances"),
        "instance_type": str(a.instance_type),
        "capacity_type": a.capacity_type,
        # a job has no steady requests in flight (Little's law at its drain rate would read as thousands)
        "in_flight": pg.num(p + ".per_replica.in_flight", tenths)
        if row.figures.in_flight is not None
        else None,
        "headroom": _headroom(pg, p),
    }


def _answer_extras(pg: Page, a: Architecture, p: str) -> list[tuple[Num, str]]:
    cost = a.cost
    extras = []
    if cost.usd_per_month_spot is not None and a.capacity_type != "spot":
        extras.append((pg.n(p + ".cost.usd_per_month_spot", usd), "with spot above the base"))
    if cost.usd_per_month_savings_plan_1y is not None:
        extras.append((pg.n(p + ".cost.usd_per_month_savings_plan_1y", usd), "with a 1-year savings plan"))
    if cost.usd_per_user_month is not None:
        extras.append((pg.n(p + ".cost.usd_per_user_month", usd), "per user per month"))
    return extras


def _answer_latency(pg: Page, a: Architecture, p: str) -> list[dict[str, Any]]:
    out = []
    for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
        q = shown_percentile(pg.typed, metric)
        f = UNIT_FMT[METRIC_UNITS[metric]]
        limit = slo_limit(pg.typed, metric, q)
        from_test = a.measured is not None and getattr(a.measured, metric) is not None
        src = "measured" if from_test else "predicted"
        out.append(
            {
                "name": f"{METRIC_NAMES[metric]} {q}",
                "fig": pg.n(f"{p}.{src}.{metric}.{q}", f),
                "at_level": _at_level(pg, p, metric, q, f) if from_test else None,
                "slo": f(limit) if limit is not None else None,
            }
        )
    return out


def _answer(pg: Page) -> Section:
    r = pg.typed
    archs = r.architectures
    wi = winner_index(r)
    if wi is None:
        default = (
            "every measured candidate missed an SLO (see the ranking)"
            if archs
            else "no candidate meets the SLOs (see the rejected candidates)"
        )
        message = (r.infeasible.message if r.infeasible is not None else "") or default
        return _section(
            "answer.html", winner=None, message=message, why=_why_not_cheaper(pg), costs=_slo_costs(pg)
        )
    a = archs[wi]
    p = f"architectures.{wi}"
    row = pg.rows[wi]
    spot = a.capacity_type == "spot" and a.cost.usd_per_month_spot is not None
    basis = (
        origin_label(a, pg.twin_run).capitalize() + " at the highest load level that met the SLOs"
        if was_measured(a)
        else "Predicted at peak"
    )
    winner = {
        "label": short_label(a),
        "spot": pg.n(p + ".cost.usd_per_month_spot", usd) if spot else None,
        "on_demand": pg.n(p + ".cost.usd_per_month", usd),
        "fleet": _answer_fleet(pg, a, p, row),
        "qualifiers": row.qualifier_text(),
        "quotas": [(q.message, q.request or "") for q in row.quotas],
        "extras": _answer_extras(pg, a, p),
        "basis": basis,
        "latency": _answer_latency(pg, a, p),
        "twin": measured_origin(a, pg.twin_run) == TWIN,
        "tuning": _str(a.tuning.summary if a.tuning is not None else None),
    }
    return _section(
        "answer.html",
        winner=winner,
        ok=a.meets_slo,
        why=_why_not_cheaper(pg),
        costs=_slo_costs(pg),
    )


def _slo_costs(pg: Page) -> list[dict[str, Any]]:
    """What each stated SLO target costs (`slo_costs`): its line, the two monthly costs as figures, and whether it
    binds."""
    out = []
    for i, c in enumerate(pg.typed.slo_costs):
        if not c.line:
            continue
        out.append(
            {
                "line": c.line,
                "target": c.line.split(": ", 1)[0],
                "binding": c.binding,
                "base": pg.n(f"slo_costs.{i}.usd_per_month", usd),
                "relaxed": pg.n(f"slo_costs.{i}.relaxed_usd_per_month", usd),
            }
        )
    return out
