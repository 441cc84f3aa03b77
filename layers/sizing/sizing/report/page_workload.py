"""The report's workload section: the workload as modelled, and what a recorded trace says about it."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from sizing.report import svg
from sizing.report.page_base import (
    HOURS,
    METRIC_NAMES,
    METRIC_UNITS,
    UNIT_FMT,
    Page,
    Section,
    _section,
    count,
    plain,
    rps,
    sec,
    slo_targets,
    token_count,
)
from sizing.results.blocks import PrefixReuse, TraceFigures
from sizing.workload.derived import WorkloadModel


def _workload(pg: Page, wl: WorkloadModel | None) -> Section:
    w = pg.typed.workload
    if not w.model_fields_set:
        return _section("workload.html", empty=True)
    said: list[tuple[str, Any]] = [("Workload", w.name or ""), ("Model", w.model or "")]
    if wl is not None and wl.spec.users is not None:
        u = wl.spec.users
        said += [
            ("Users", f"{u.total:,}"),
            ("Active in the busiest hour", f"{u.peak_active_fraction:.0%}"),
            ("Requests per active user-hour", f"{u.requests_per_active_hour:g}"),
        ]
    if wl is not None:
        said.append(("Traffic profile", str(wl.spec.traffic.profile or "custom weights")))
    said.append(("Time zone", w.timezone or ""))
    for m, q, _limit in slo_targets(pg.typed):
        f = UNIT_FMT.get(METRIC_UNITS.get(m, ""), plain)
        said.append((f"SLO {METRIC_NAMES.get(m, m)} {q}", ["≤ ", pg.n(f"workload.slo.{m}.{q}", f)]))
    said += [("Note", n) for n in w.notes]
    tech = {
        "peak_rps": pg.n("workload.peak_rps", rps),
        "avg_rps": pg.n("workload.avg_rps", rps),
        "peak_concurrency": pg.n("workload.peak_concurrency", count),
        "peak_active_users": pg.n("workload.peak_active_users", count),
        "think_time_s": pg.n("workload.think_time_s", sec),
        "requests_per_day": pg.n("workload.requests_per_day", count),
        "requests_per_month": pg.n("workload.requests_per_month", count),
        "input_tokens_per_s_peak": pg.n("workload.input_tokens_per_s_peak", token_count),
        "output_tokens_per_s_peak": pg.n("workload.output_tokens_per_s_peak", token_count),
    }
    tokens = []
    for side, block in (("input_tokens", w.input_tokens), ("output_tokens", w.output_tokens)):
        kind = (block.kind or "") if block is not None else ""
        figs = [pg.n(f"workload.{side}.{k}", token_count) for k in ("mean", "p50", "p95", "p99")]
        tokens.append([side.replace("_", " "), kind, *figs])
    return _section("workload.html", empty=False, said=said, tech=tech, tokens=tokens, trace=_trace(w.trace))


def _burst_text(t: TraceFigures, window: str) -> str:
    b = t.burstiness.get(window)
    if b is None:
        return "the trace is too short to tell"
    return f"peak-to-mean {b.peak_to_mean}, index of dispersion {b.index_of_dispersion} (Poisson 1)"


def _trace(t: TraceFigures | None) -> dict[str, Any] | None:
    """The recorded trace the workload was built from: its facts, what it changed against Poisson, and its
    requests per second by hour (a chart). Counts and hashes only: a trace's text is never in the result."""
    if t is None:
        return None
    reuse = t.prefix_reuse or PrefixReuse()
    said: list[tuple[str, Any]] = [
        ("Trace", f"{t.source or ''} ({t.format or ''})"),
        ("Digest", t.digest or ""),
        ("Requests", f"{t.requests or 0:,} over {float(t.span_s or 0) / 3600:.2f} h"),
        ("Busiest hour", f"{float(t.busiest_hour_rps or 0):.3g} requests/s"),
        ("Burstiness at 1 s", _burst_text(t, "1s")),
        ("Burstiness at 1 min", _burst_text(t, "1min")),
        (
            "Prefix reuse",
            f"{float(reuse.prefix_hit_share or 0):.0%} of prompt tokens cached before"
            f" (from {reuse.source or 'none'})",
        ),
    ]
    if t.effect is not None and t.effect.summary:
        said.append(("Against Poisson at the same means", t.effect.summary))
    rates = [float(x) for x in t.hourly_rps]
    chart = ""
    if len(rates) == len(HOURS) and max(rates, default=0) > 0:
        chart = svg.bar_chart(
            "trace-hours",
            f"Recorded requests/s by {t.hours or 'hour of day'}",
            categories=HOURS,
            groups=[svg.BarGroup("requests/s", rates, svg.PALETTE[0])],
            y_label="requests/s",
        )
    return {"said": said, "chart": Markup(chart) if chart else None, "hours": t.hours or "hour"}
