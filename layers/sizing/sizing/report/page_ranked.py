"""The report's ranking and serving sections: every architecture that meets the SLOs, cheapest first, and the
engine configuration each runs; the CSV downloads."""

from __future__ import annotations

import base64
from typing import Any

from markupsafe import Markup

from sizing.base.vocabulary import TWIN  # what served a load test's figures (`measured.origin`)
from sizing.report.export import export_csv, rejected_csv
from sizing.report.page_answer import (
    _at_level,
)
from sizing.report.page_base import (
    EXPECTED_ERROR_KEY,
    METRIC_NAMES,
    METRIC_UNITS,
    MISSING,
    UNIT_FMT,
    Num,
    Page,
    Section,
    Span,
    _metric_name,
    _section,
    _span,
    _str,
    count,
    feasible,
    fine_share,
    lookup,
    measured_origin,
    origin_label,
    origin_labels,
    pct,
    rps,
    sec,
    share,
    short_label,
    shown_percentile,
    slo_limit,
    tenths,
    token_count,
    usd,
    was_measured,
)
from sizing.results import Architecture


def _also_fits(pg: Page, a: Architecture, p: str) -> list[tuple[str, Num]]:
    """`also fits: g6e.2xlarge $3,371`: dearer instance sizes with the same performance, folded into the row."""
    return [
        (x.instance_type, pg.n(f"{p}.also_fits_on.{j}.usd_per_month", usd))
        for j, x in enumerate(a.also_fits_on)
        if x.instance_type
    ]


def _tightest(pg: Page, p: str) -> tuple[Num, str]:
    """The tightest SLO target's margin below its limit, and its name."""
    target = lookup(pg.r, p + ".headroom.tightest")
    if not isinstance(lookup(pg.r, p + ".headroom.tightest_pct"), int | float):
        return MISSING, ""
    name = " ".join(_metric_name(target)) if isinstance(target, str) and "." in target else ""
    return pg.n(p + ".headroom.tightest_pct", pct), name


def _load_headroom(pg: Page, p: str) -> Num:
    if isinstance(lookup(pg.r, p + ".headroom.load_pct"), int | float):
        return pg.n(p + ".headroom.load_pct", pct)
    return pg.n(p + ".headroom_pct", pct)


def _rank(pg: Page, a: Architecture, p: str) -> Num | None:
    """The rank of an architecture in the ranking; None for one that missed an SLO when measured (a ✗)."""
    return pg.n(p + ".rank", count) if feasible(a) else None


def _ranked_metric(pg: Page, a: Architecture, p: str, m: str, q: str) -> dict[str, Any]:
    """One latency cell of a ranked row: the prediction, its typical error, and the load test's figure."""
    r = pg.r
    f = UNIT_FMT[METRIC_UNITS[m]]
    err = f"{p}.calibration.expected_error.{EXPECTED_ERROR_KEY[m]}" if m in EXPECTED_ERROR_KEY else ""
    limit = slo_limit(pg.typed, m, q)
    mv = lookup(r, f"{p}.measured.{m}.{q}")
    return {
        "predicted": pg.n(f"{p}.predicted.{m}.{q}", f),
        # how far such a prediction typically is from a measurement (cross-validated median error)
        "error": pg.num(err, share, scale=100) if err else None,
        "measured": pg.n(f"{p}.measured.{m}.{q}", f, missing=""),
        "miss": limit is not None and isinstance(mv, int | float) and mv > limit,
        "title": origin_label(a, pg.twin_run) if was_measured(a) else "",
        "at_level": _at_level(pg, p, m, q, f) if isinstance(mv, int | float) else None,
    }


def _ranked_row(pg: Page, i: int, a: Architecture, metrics: list[tuple[str, str]]) -> dict[str, Any]:
    r = pg.r
    p = f"architectures.{i}"
    reps: Span = ()
    reps_mean = None
    if a.replicas is not None:
        reps = _span(pg, p + ".replicas")
        if lookup(r, p + ".replicas.min") != lookup(r, p + ".replicas.peak"):
            reps_mean = pg.n(p + ".replicas.mean", count)
    twin = measured_origin(a, pg.twin_run) == TWIN
    row = pg.rows[i]
    return {
        "rank": _rank(pg, a, p),
        "id": a.id,
        "label": short_label(a),
        "qualifiers": row.qualifier_text(),
        "quota_requests": [q.request for q in row.quotas if q.request],
        "spot": a.capacity_type == "spot",
        "missed": "" if feasible(a) else ("when simulated (twin)" if twin else "when measured"),
        "twin": twin,
        "also_fits": _also_fits(pg, a, p),
        "replicas": reps,
        "replicas_mean": reps_mean,
        "metrics": [_ranked_metric(pg, a, p, m, q) for m, q in metrics],
        "capacity": pg.n(p + ".per_replica.rps_slo_limit", rps),
        "capacity_measured": pg.n(p + ".measured.capacity_rps", rps, missing=""),
        "costs": [
            pg.n(p + ".cost." + k, usd)
            for k in (
                "usd_per_month",
                "usd_per_month_spot",
                "usd_per_month_savings_plan_1y",
                "usd_per_million_output_tokens",
                "usd_per_user_month",
            )
        ],
        "load_headroom": _load_headroom(pg, p),
        "tightest": _tightest(pg, p),
        "pareto": bool(a.pareto),
    }


def _search(pg: Page) -> dict[str, Any] | None:
    s = pg.typed.search
    if s is None or not s.model_fields_set:
        return None
    return {
        "options": pg.n("search.hardware_options", count),
        "simulated": pg.n("search.simulated", count),
        "feasible": pg.n("search.feasible", count),
        "seconds": pg.n("search.seconds", sec) if s.seconds is not None else None,
    }


def _ranked(pg: Page) -> Section:
    r = pg.r
    archs = pg.typed.architectures
    if not archs:
        return _section("ranked.html", rows=[])
    metrics = [(m, shown_percentile(pg.typed, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")]
    heads = []
    for m, q in metrics:
        limit = slo_limit(pg.typed, m, q)
        heads.append(
            {
                "name": f"{METRIC_NAMES[m]} {q}",
                "slo": UNIT_FMT[METRIC_UNITS[m]](limit) if limit is not None else "",
            }
        )
    return _section(
        "ranked.html",
        rows=[_ranked_row(pg, i, a, metrics) for i, a in enumerate(archs)],
        heads=heads,
        tested=" / ".join(origin_labels(pg.typed, pg.twin_run)),
        search=_search(pg),
        twins=TWIN in {measured_origin(a, pg.twin_run) for a in archs},
        errors=any(
            a.calibration is not None and "expected_error" in a.calibration.model_fields_set for a in archs
        ),
        downloads=_downloads(r),
    )


def _refused(pg: Page, p: str) -> tuple[Num | str, str]:
    """The share of requests the server refuses (input + output over max_model_len), and what the context covers."""
    refused = lookup(pg.r, p + ".context.refused_share")
    if isinstance(refused, bool) or not isinstance(refused, int | float):
        return MISSING, ""
    covers = _str(lookup(pg.r, p + ".context.covers"))
    if refused <= 0:
        return "none", covers
    return pg.n(p + ".context.refused_share", fine_share, scale=100), covers


def _serving(pg: Page) -> Section:
    """Each architecture's serving configuration as deployed, what the tuning changed, and the load it carries."""
    rows = []
    for i, a in enumerate(pg.typed.architectures):
        if a.deployment == "bedrock":
            continue
        p = f"architectures.{i}"
        kv = a.serving.kv_cache_dtype if a.serving is not None else None
        prefix = a.serving.enable_prefix_caching if a.serving is not None else None
        rows.append(
            {
                "rank": _rank(pg, a, p),
                "label": short_label(a),
                "figures": [
                    pg.n(p + ".serving.max_model_len", token_count),
                    pg.n(p + ".serving.max_num_seqs", count),
                    pg.n(p + ".serving.max_num_batched_tokens", token_count),
                ],
                "kv_cache_dtype": str(kv) if isinstance(kv, str) else MISSING,
                "prefix_caching": ("on" if prefix else "off") if isinstance(prefix, bool) else MISSING,
                "in_flight": pg.n(p + ".per_replica.in_flight", tenths),
                "max_concurrency": pg.n(p + ".per_replica.max_concurrency", tenths),
                "refused": _refused(pg, p),
                "tuning": _str(a.tuning.summary if a.tuning is not None else None) or MISSING,
            }
        )
    return _section("serving.html", rows=rows)


def _data_uri(text: str, mime: str) -> Markup:
    """A data: URI of `text` (base64: nothing in it to escape)."""
    return Markup(
        f"data:{mime};charset=utf-8;base64,{base64.b64encode(text.encode('utf-8')).decode('ascii')}"
    )


def _downloads(result: dict[str, Any]) -> dict[str, Markup]:
    """The CSV exports as data: URIs, so the page itself saves them (the JSON is saved from the embedded result
    by a two-line script, so the page does not carry the result twice)."""
    return {
        "architectures": _data_uri(export_csv(result), "text/csv"),
        "rejected": _data_uri(rejected_csv(result), "text/csv"),
    }
