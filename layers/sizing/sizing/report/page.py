"""The HTML report of an estimate or a run: one self-contained page (inline CSS and SVG, no external asset).

Python computes what the page says (each section's values, below); the Jinja2 templates in `templates/` hold the
markup (`report.html` the layout, one template per section, `macros.html` the shared pieces) and escape every text
(autoescape). The SVG charts and the download links' data URIs are the only markup passed in as such.

Every figure the page prints from the result is wrapped as `<span class="n" data-path="architectures.0.cost.
usd_per_month" data-value="52341.86">$52,342</span>`, so a test (or a reader's script) can check the page says
exactly what the JSON says. The result itself is embedded as `<script type="application/json" id="sizing-result">`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jinja2 import Environment
from markupsafe import Markup

from sizing.answer import AnswerRow, answer_row, region_line
from sizing.base.errors import SizingError
from sizing.base.text import ORIGIN_LABELS
from sizing.base.vocabulary import ENDPOINT, TWIN  # what served a load test's figures (`measured.origin`)
from sizing.deploy.manifests import render, to_yaml
from sizing.report import svg
from sizing.report.curves import Curve, latency_curves
from sizing.report.export import export_csv, rejected_csv
from sizing.report.model import check_result
from sizing.report.templating import make_environment
from sizing.results import rank_cost
from sizing.workload.derived import WorkloadModel

METRIC_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "end-to-end"}
METRIC_UNITS = {"ttft_ms": "ms", "tpot_ms": "ms", "e2e_s": "s"}
#: Percentile shown for a metric the SLO does not bound (the one capacity planning usually quotes).
DEFAULT_PERCENTILE = "p95"
#: Percentiles the planner reports; an SLO on another (p90) is read at the next stricter one, as the planner does.
REPORTED_PERCENTILES = ("p50", "p95", "p99")
#: A latency chart's y axis stops at the larger of these multiples of the SLO limit and of the highest operating
#: (or measured) point: past saturation latency grows without bound and would flatten the part that matters,
#: while the curve's crossing of the SLO line stays in view.
Y_CAP_SLO_FACTOR = 1.6
Y_CAP_POINT_FACTOR = 2.0
#: Architectures labelled in the cost/latency chart: the Pareto front, at most this many (labels overlap beyond).
MAX_PARETO_LABELS = 6
#: Cost axis turns logarithmic when the dearest architecture costs this many times the cheapest.
LOG_COST_RATIO = 8.0
KIND_LABELS = {
    "memory": "do not fit in memory",
    "slo": "miss an SLO",
    "dominated": "cannot beat the ranked ones on cost (bound)",
    "unsupported": "unsupported combination",
    "quota": "over a Bedrock quota",
    "budget": "over budget",
}
BREAKDOWN_LABELS = {
    "compute_usd_per_month": "Compute (instances)",
    "control_plane_usd_per_month": "EKS control plane",
    "load_balancer_usd_per_month": "Load balancer",
    "input_usd_per_month": "Input tokens",
    "output_usd_per_month": "Output tokens",
}

Fmt = Callable[[float], str]


# --- formatting -----------------------------------------------------------------------------------------------
def usd(v: float) -> str:
    return f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}"


def ms(v: float) -> str:
    return f"{v:,.0f} ms" if abs(v) >= 100 else f"{v:,.1f} ms"


def sec(v: float) -> str:
    return f"{v:,.2f} s" if abs(v) < 100 else f"{v:,.1f} s"


def rps(v: float) -> str:
    return f"{v:,.2f} req/s"


def count(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def two(v: float) -> str:
    return f"{v:,.2f}"


def tenths(v: float) -> str:
    return f"{v:,.1f}"


def token_count(v: float) -> str:
    return f"{v:,.0f}"


def pct(v: float) -> str:
    return f"{v:,.1f}%"


def share(v: float) -> str:
    """A fraction as a percentage (0.31 -> 31%)."""
    return f"{v:.0%}"


def fine_share(v: float) -> str:
    """A small fraction as a percentage that does not round it away (0.0003 -> 0.03%)."""
    return f"{v * 100:.2f}%" if abs(v) < 0.01 else f"{v * 100:.1f}%"


def plain(v: float) -> str:
    return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"


UNIT_FMT: dict[str, Fmt] = {"ms": ms, "s": sec}
#: The calibration's expected-error key of a predicted latency metric (the estimator states none for e2e).
EXPECTED_ERROR_KEY = {"ttft_ms": "ttft", "tpot_ms": "tpot"}


def lookup(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (`architectures.0.cost.usd_per_month`) of the result; None if absent. A key that
    itself holds a dot (`headroom.latency` is keyed by `ttft_ms.p95`) is found too."""
    return _walk(result, path.split("."))


def _walk(cur: Any, parts: list[str]) -> Any:
    if not parts:
        return cur
    if isinstance(cur, list):
        try:
            return _walk(cur[int(parts[0])], parts[1:])
        except (ValueError, IndexError):
            return None
    if isinstance(cur, dict):
        for n in range(1, len(parts) + 1):
            key = ".".join(parts[:n])
            if key in cur:
                found = _walk(cur[key], parts[n:])
                if found is not None:
                    return found
        return None
    return None


@dataclass(frozen=True, slots=True)
class Num:
    """A figure of the result as the page prints it (`macros.html` `n`): tagged with its path and exact value, or
    a grey placeholder (`missing`) when the result has no finite number there."""

    path: str
    value: float | None
    text: str = ""
    scale: float = 1.0
    missing: str = "—"

    @property
    def value_repr(self) -> str:
        return repr(self.value)

    @property
    def scale_text(self) -> str:
        return f"{self.scale:g}"


#: The grey dash of a cell the result has nothing for.
MISSING = Num("", None)

Span = tuple[Num, ...]


class Page:
    """The result being reported; `n()` takes a number of it, tagged with its path."""

    def __init__(self, result: dict[str, Any]):
        self.r = result

    def n(self, path: str, fmt: Fmt = plain, missing: str = "—", scale: float = 1.0) -> Num:
        """`scale`: the text shows the value times this (`share` shows a fraction as a percentage: 100)."""
        v = lookup(self.r, path)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return Num(path, None, missing=missing)
        return Num(path, v, fmt(v), scale, missing)

    def num(self, path: str, fmt: Fmt = plain, **kw: Any) -> Num | None:
        """The figure at `path`, or None when the result has no number there."""
        return self.n(path, fmt, **kw) if isinstance(lookup(self.r, path), int | float) else None


# --- helpers --------------------------------------------------------------------------------------------------
def slo_targets(result: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(metric, percentile, limit) for every SLO target in the result's workload block."""
    out = []
    for metric, by_pct in ((result.get("workload") or {}).get("slo") or {}).items():
        if isinstance(by_pct, dict):
            for p, limit in by_pct.items():
                if isinstance(limit, int | float):
                    out.append((metric, p, float(limit)))
    return out


def shown_percentile(result: dict[str, Any], metric: str) -> str:
    """The percentile the SLO bounds for `metric` (the highest when several), else p95."""
    pcts = [p for m, p, _ in slo_targets(result) if m == metric]
    if not pcts:
        return DEFAULT_PERCENTILE
    best = max(pcts, key=lambda p: float(p[1:]))
    return best if best in REPORTED_PERCENTILES else DEFAULT_PERCENTILE


def slo_limit(result: dict[str, Any], metric: str, percentile: str) -> float | None:
    for m, p, limit in slo_targets(result):
        if m == metric and (p == percentile or (p not in REPORTED_PERCENTILES and percentile == "p95")):
            return limit
    return None


def short_label(a: dict[str, Any]) -> str:
    """`p5.48xlarge TP8 fp8 vllm (eks)`, `Bedrock <model id>`; the id when the parts are missing."""
    if a.get("deployment") == "bedrock":
        return f"Bedrock {(a.get('bedrock') or {}).get('model_id') or str(a.get('id', '')).split(':', 1)[-1]}"
    parts = (a.get("instance_type"), a.get("tensor_parallel"), a.get("quantization"), a.get("engine"))
    if not all(parts):
        return str(a.get("id", "?"))
    return f"{parts[0]} TP{parts[1]} {parts[2]} {parts[3]} ({a.get('deployment', '?')})"


def feasible(a: dict[str, Any]) -> bool:
    """In the ranking: meets its SLOs (a run lists measured failures after the ranking, with rank 0)."""
    return a.get("meets_slo", True) is not False and a.get("rank") != 0


def winner_index(result: dict[str, Any]) -> int | None:
    """Index of the chosen architecture: the best-ranked one that meets the SLOs."""
    return next((i for i, a in enumerate(result.get("architectures") or []) if feasible(a)), None)


def _twin_run(result: dict[str, Any]) -> bool:
    """The run says it load-tested local twins (for figures recorded before `measured.origin`)."""
    if result.get("origin") == TWIN or result.get("twins") is True:
        return True
    ranking = result.get("ranking")
    rows = result.get("calibration_rows") or (
        ranking.get("calibration_rows") if isinstance(ranking, dict) else None
    )
    return isinstance(rows, list) and any(isinstance(x, dict) and x.get("origin") == TWIN for x in rows)


def measured_origin(a: dict[str, Any], result: dict[str, Any]) -> str | None:
    """`twin` or `endpoint` for an architecture with load-test figures, None without. `measured.origin` says;
    without it, a run of local twins (or figures that say they came from a twin) is a twin's."""
    m = a.get("measured")
    if not isinstance(m, dict) or not m:
        return None
    origin = m.get("origin")
    if origin == TWIN:
        return TWIN
    if origin == ENDPOINT:
        return ENDPOINT
    if _twin_run(result) or TWIN in str(m.get("how") or "").lower():
        return TWIN
    return ENDPOINT


def origin_label(a: dict[str, Any], result: dict[str, Any]) -> str:
    """ "measured" or "simulated (twin)" for the architecture's load-test figures."""
    return ORIGIN_LABELS[measured_origin(a, result) or ENDPOINT]


def origin_labels(result: dict[str, Any]) -> list[str]:
    """The labels of every architecture's load-test figures, each once: ["simulated (twin)"], ["measured"], ..."""
    out: list[str] = []
    for a in result.get("architectures") or []:
        o = measured_origin(a, result)
        if o is not None and ORIGIN_LABELS[o] not in out:
            out.append(ORIGIN_LABELS[o])
    return out


def _str(v: Any) -> str:
    """A text of the result; "" for anything else."""
    return v if isinstance(v, str) and v else ""


def _levels_signature(levels: Sequence[dict[str, Any]]) -> tuple[tuple[str, float], ...]:
    """What identifies a candidate's sweep: its load targets and the throughput each served, in order."""
    sig = []
    for lv in levels:
        target = lv.get("target") or {}
        key = (
            ",".join(f"{k}={v:g}" for k, v in sorted(target.items()))
            if isinstance(target, dict)
            else str(target)
        )
        sig.append((key, round(float(lv.get("requests_per_s") or 0.0), 3)))
    return tuple(sorted(sig))


def measured_steps(
    measurements: Sequence[dict[str, Any]], result: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """Load-test step records by architecture id.

    Takes bare step records or the store's measurement items (`{candidate_id, record: {...}}`). A candidate id
    that is an architecture id is used as is; a run's own ids (c0, c1 ...) are matched to the architecture whose
    `measured.levels` is the same sweep; a record naming no candidate belongs to the measured architecture (or
    the best-ranked one). Unmatched candidates keep their own id."""
    archs = result.get("architectures") or []
    ids = {a["id"] for a in archs}
    default = next((a["id"] for a in archs if a.get("measured")), archs[0]["id"] if archs else "")
    by_candidate: dict[str, list[dict[str, Any]]] = {}
    for m in measurements:
        rec = m["record"] if isinstance(m.get("record"), dict) else m
        cid = m.get("candidate_id") or rec.get("candidate_id") or m.get("architecture_id") or default
        by_candidate.setdefault(str(cid), []).append(rec)
    signatures: dict[tuple[tuple[str, float], ...], str] = {}
    for a in archs:
        levels = (a.get("measured") or {}).get("levels")
        if levels:
            signatures.setdefault(_levels_signature(levels), a["id"])
    out: dict[str, list[dict[str, Any]]] = {}
    for cid, recs in by_candidate.items():
        arch_id = cid if cid in ids else signatures.get(_levels_signature(recs), cid)
        out.setdefault(arch_id, []).extend(recs)
    return out


def _floats(values: Any) -> list[float]:
    """Numbers of a list, 0 for gaps; [] when it is not a list."""
    if not isinstance(values, list):
        return []
    return [float(v) if isinstance(v, int | float) else 0.0 for v in values]


def _span(pg: Page, path: str) -> Span:
    """`min–peak` of a {min, peak} block, or one figure when they are equal."""
    lo, hi = lookup(pg.r, path + ".min"), lookup(pg.r, path + ".peak")
    if lo == hi:
        return (pg.n(path + ".peak", count),)
    return (pg.n(path + ".min", count), pg.n(path + ".peak", count))


# --- sections: each returns the values its template (`templates/<template>`) prints -----------------------------
Section = dict[str, Any]


def _section(template: str, **values: Any) -> Section:
    return {"template": template, **values}


def _metric_name(target: str) -> tuple[str, str]:
    """`ttft_ms.p95` -> ("TTFT", "p95")."""
    metric, q = target.split(".", 1)
    return METRIC_NAMES.get(metric, metric), q


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
        (
            str(x.get("option") or ""),
            pg.n(f"why_not_cheaper.{i}.usd_per_month", usd),
            str(x.get("reason") or ""),
        )
        for i, x in enumerate(pg.r.get("why_not_cheaper") or [])
        if isinstance(x, dict)
    ]
    return {"summary": _str(pg.r.get("summary")), "rows": rows}


def _answer_fleet(pg: Page, a: dict[str, Any], p: str, row: AnswerRow) -> dict[str, Any] | None:
    if not a.get("replicas"):
        return None
    return {
        "replicas": _span(pg, p + ".replicas"),
        "instances": _span(pg, p + ".instances"),
        "instance_type": str(a.get("instance_type")),
        "capacity_type": str(a.get("capacity_type")),
        # a job has no steady requests in flight (Little's law at its drain rate would read as thousands)
        "in_flight": pg.num(p + ".per_replica.in_flight", tenths)
        if row.figures.in_flight is not None
        else None,
        "headroom": _headroom(pg, p),
    }


def _answer_extras(pg: Page, a: dict[str, Any], p: str) -> list[tuple[Num, str]]:
    cost = a.get("cost") or {}
    extras = []
    if cost.get("usd_per_month_spot") is not None and a.get("capacity_type") != "spot":
        extras.append((pg.n(p + ".cost.usd_per_month_spot", usd), "with spot above the base"))
    if cost.get("usd_per_month_savings_plan_1y") is not None:
        extras.append((pg.n(p + ".cost.usd_per_month_savings_plan_1y", usd), "with a 1-year savings plan"))
    if cost.get("usd_per_user_month") is not None:
        extras.append((pg.n(p + ".cost.usd_per_user_month", usd), "per user per month"))
    return extras


def _answer_latency(pg: Page, a: dict[str, Any], p: str) -> list[dict[str, Any]]:
    m = a.get("measured")
    measured: dict[str, Any] = m if isinstance(m, dict) else {}
    out = []
    for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
        q = shown_percentile(pg.r, metric)
        f = UNIT_FMT[METRIC_UNITS[metric]]
        limit = slo_limit(pg.r, metric, q)
        from_test = bool(measured.get(metric))
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
    r = pg.r
    archs = r.get("architectures") or []
    wi = winner_index(r)
    if wi is None:
        default = (
            "every measured candidate missed an SLO (see the ranking)"
            if archs
            else "no candidate meets the SLOs (see the rejected candidates)"
        )
        message = str((r.get("infeasible") or {}).get("message") or default)
        return _section(
            "answer.html", winner=None, message=message, why=_why_not_cheaper(pg), costs=_slo_costs(pg)
        )
    a = archs[wi]
    p = f"architectures.{wi}"
    row = answer_row(a, r)
    spot = a.get("capacity_type") == "spot" and (a.get("cost") or {}).get("usd_per_month_spot") is not None
    basis = (
        origin_label(a, r).capitalize() + " at the highest load level that met the SLOs"
        if a.get("measured")
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
        "twin": measured_origin(a, r) == TWIN,
        "tuning": _str(lookup(a, "tuning.summary")),
    }
    return _section(
        "answer.html",
        winner=winner,
        ok=bool(a.get("meets_slo")),
        why=_why_not_cheaper(pg),
        costs=_slo_costs(pg),
    )


def _slo_costs(pg: Page) -> list[dict[str, Any]]:
    """What each stated SLO target costs (`slo_costs`): its line, the two monthly costs as figures, and whether it
    binds."""
    out = []
    for i, c in enumerate(pg.r.get("slo_costs") or []):
        if not isinstance(c, dict) or not c.get("line"):
            continue
        out.append(
            {
                "line": str(c["line"]),
                "target": str(c["line"]).split(": ", 1)[0],
                "binding": bool(c.get("binding")),
                "base": pg.n(f"slo_costs.{i}.usd_per_month", usd),
                "relaxed": pg.n(f"slo_costs.{i}.relaxed_usd_per_month", usd),
            }
        )
    return out


def _workload(pg: Page, wl: WorkloadModel | None) -> Section:
    w = pg.r.get("workload") or {}
    if not w:
        return _section("workload.html", empty=True)
    said: list[tuple[str, Any]] = [("Workload", str(w.get("name", ""))), ("Model", str(w.get("model", "")))]
    if wl is not None and wl.spec.users is not None:
        u = wl.spec.users
        said += [
            ("Users", f"{u.total:,}"),
            ("Active in the busiest hour", f"{u.peak_active_fraction:.0%}"),
            ("Requests per active user-hour", f"{u.requests_per_active_hour:g}"),
        ]
    if wl is not None:
        said.append(("Traffic profile", str(wl.spec.traffic.profile or "custom weights")))
    said.append(("Time zone", str(w.get("timezone", ""))))
    for m, q, _limit in slo_targets(pg.r):
        f = UNIT_FMT.get(METRIC_UNITS.get(m, ""), plain)
        said.append((f"SLO {METRIC_NAMES.get(m, m)} {q}", ["≤ ", pg.n(f"workload.slo.{m}.{q}", f)]))
    said += [("Note", str(n)) for n in w.get("notes") or []]
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
    for side in ("input_tokens", "output_tokens"):
        block = w.get(side)
        kind = str(block.get("kind", "")) if isinstance(block, dict) else ""
        figs = [pg.n(f"workload.{side}.{k}", token_count) for k in ("mean", "p50", "p95", "p99")]
        tokens.append([side.replace("_", " "), kind, *figs])
    return _section(
        "workload.html", empty=False, said=said, tech=tech, tokens=tokens, trace=_trace(w.get("trace"))
    )


def _burst_text(b: Any) -> str:
    if not isinstance(b, dict):
        return "the trace is too short to tell"
    return f"peak-to-mean {b.get('peak_to_mean')}, index of dispersion {b.get('index_of_dispersion')} (Poisson 1)"


def _trace(t: Any) -> dict[str, Any] | None:
    """The recorded trace the workload was built from: its facts, what it changed against Poisson, and its
    requests per second by hour (a chart). Counts and hashes only: a trace's text is never in the result."""
    if not isinstance(t, dict):
        return None
    reuse = t.get("prefix_reuse") or {}
    said: list[tuple[str, Any]] = [
        ("Trace", f"{t.get('source', '')} ({t.get('format', '')})"),
        ("Digest", str(t.get("digest", ""))),
        ("Requests", f"{int(t.get('requests') or 0):,} over {float(t.get('span_s') or 0) / 3600:.2f} h"),
        ("Busiest hour", f"{float(t.get('busiest_hour_rps') or 0):.3g} requests/s"),
        ("Burstiness at 1 s", _burst_text((t.get("burstiness") or {}).get("1s"))),
        ("Burstiness at 1 min", _burst_text((t.get("burstiness") or {}).get("1min"))),
        (
            "Prefix reuse",
            f"{float(reuse.get('prefix_hit_share') or 0):.0%} of prompt tokens cached before"
            f" (from {reuse.get('source', 'none')})",
        ),
    ]
    effect = t.get("effect")
    if isinstance(effect, dict) and effect.get("summary"):
        said.append(("Against Poisson at the same means", str(effect["summary"])))
    rates = _floats(t.get("hourly_rps"))
    chart = ""
    if len(rates) == len(HOURS) and max(rates, default=0) > 0:
        chart = svg.bar_chart(
            "trace-hours",
            f"Recorded requests/s by {t.get('hours', 'hour of day')}",
            categories=HOURS,
            groups=[svg.BarGroup("requests/s", rates, svg.PALETTE[0])],
            y_label="requests/s",
        )
    return {"said": said, "chart": Markup(chart) if chart else None, "hours": str(t.get("hours", "hour"))}


def _also_fits(pg: Page, p: str) -> list[tuple[str, Num]]:
    """`also fits: g6e.2xlarge $3,371`: dearer instance sizes with the same performance, folded into the row."""
    alts = lookup(pg.r, p + ".also_fits_on")
    if not isinstance(alts, list):
        return []
    return [
        (str(x.get("instance_type")), pg.n(f"{p}.also_fits_on.{j}.usd_per_month", usd))
        for j, x in enumerate(alts)
        if isinstance(x, dict) and x.get("instance_type")
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


def _rank(pg: Page, a: dict[str, Any], p: str) -> Num | None:
    """The rank of an architecture in the ranking; None for one that missed an SLO when measured (a ✗)."""
    return pg.n(p + ".rank", count) if feasible(a) else None


def _ranked_metric(pg: Page, a: dict[str, Any], p: str, m: str, q: str) -> dict[str, Any]:
    """One latency cell of a ranked row: the prediction, its typical error, and the load test's figure."""
    r = pg.r
    f = UNIT_FMT[METRIC_UNITS[m]]
    err = f"{p}.calibration.expected_error.{EXPECTED_ERROR_KEY[m]}" if m in EXPECTED_ERROR_KEY else ""
    limit = slo_limit(r, m, q)
    mv = lookup(r, f"{p}.measured.{m}.{q}")
    return {
        "predicted": pg.n(f"{p}.predicted.{m}.{q}", f),
        # how far such a prediction typically is from a measurement (cross-validated median error)
        "error": pg.num(err, share, scale=100) if err else None,
        "measured": pg.n(f"{p}.measured.{m}.{q}", f, missing=""),
        "miss": limit is not None and isinstance(mv, int | float) and mv > limit,
        "title": origin_label(a, r) if a.get("measured") else "",
        "at_level": _at_level(pg, p, m, q, f) if isinstance(mv, int | float) else None,
    }


def _ranked_row(pg: Page, i: int, a: dict[str, Any], metrics: list[tuple[str, str]]) -> dict[str, Any]:
    r = pg.r
    p = f"architectures.{i}"
    reps: Span = ()
    reps_mean = None
    if a.get("replicas"):
        reps = _span(pg, p + ".replicas")
        if lookup(r, p + ".replicas.min") != lookup(r, p + ".replicas.peak"):
            reps_mean = pg.n(p + ".replicas.mean", count)
    twin = measured_origin(a, r) == TWIN
    row = answer_row(a, r)
    return {
        "rank": _rank(pg, a, p),
        "id": str(a["id"]),
        "label": short_label(a),
        "qualifiers": row.qualifier_text(),
        "quota_requests": [q.request for q in row.quotas if q.request],
        "spot": a.get("capacity_type") == "spot",
        "missed": "" if feasible(a) else ("when simulated (twin)" if twin else "when measured"),
        "twin": twin,
        "also_fits": _also_fits(pg, p),
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
        "pareto": bool(a.get("pareto")),
    }


def _search(pg: Page) -> dict[str, Any] | None:
    s = pg.r.get("search") or {}
    if not s:
        return None
    return {
        "options": pg.n("search.hardware_options", count),
        "simulated": pg.n("search.simulated", count),
        "feasible": pg.n("search.feasible", count),
        "seconds": pg.n("search.seconds", sec) if s.get("seconds") is not None else None,
    }


def _ranked(pg: Page) -> Section:
    r = pg.r
    archs = r.get("architectures") or []
    if not archs:
        return _section("ranked.html", rows=[])
    metrics = [(m, shown_percentile(r, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")]
    heads = []
    for m, q in metrics:
        limit = slo_limit(r, m, q)
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
        tested=" / ".join(origin_labels(r)),
        search=_search(pg),
        twins=TWIN in {measured_origin(a, r) for a in archs},
        errors=any(isinstance(lookup(a, "calibration.expected_error"), dict) for a in archs),
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
    for i, a in enumerate(pg.r.get("architectures") or []):
        if a.get("deployment") == "bedrock":
            continue
        p = f"architectures.{i}"
        srv = a.get("serving") if isinstance(a.get("serving"), dict) else {}
        kv = srv.get("kv_cache_dtype")
        prefix = srv.get("enable_prefix_caching")
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
                "tuning": _str(lookup(a, "tuning.summary")) or MISSING,
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


def chart_targets(result: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(metric, percentile, limit) of each SLO target as the latency charts draw it (the percentile shown)."""
    out = []
    for m in ("ttft_ms", "tpot_ms", "e2e_s"):
        q = shown_percentile(result, m)
        limit = slo_limit(result, m, q)
        if limit is not None:
            out.append((m, q, limit))
    return out


def _measured_points(steps: Sequence[dict[str, Any]], metric: str, q: str) -> list[tuple[float, float]]:
    return sorted(
        (float(s["requests_per_s"]), float(s[metric][q]))
        for s in steps
        if isinstance(s.get(metric), dict) and s[metric].get(q) is not None and s.get("requests_per_s")
    )


def _step_label(cid: str, result: dict[str, Any]) -> str:
    """What served a candidate's load-test steps: its architecture's origin, else measured."""
    a = next((x for x in result.get("architectures") or [] if x.get("id") == cid), None)
    return origin_label(a, result) if a is not None else ORIGIN_LABELS[ENDPOINT]


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
    by_id: dict[str, tuple[int, dict[str, Any]]],
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
    table = lookup(a, f"predicted.{metric}.{q}")
    if not c.matches_table and isinstance(table, int | float):
        tip += f" (re-simulated; the table says {f(float(table))})"
    label = f"{'chosen' if winner else '#' + str(a.get('rank'))}: {x:.2f} req/s, {f(y)}"
    shape: Literal["star", "ring"] = "star" if winner else "ring"
    plot.markers.append(svg.Marker(x, y, label, color, shape, tip, show_label=winner, series=c.label))
    plot.tops.append(y)


def _latency_plot(
    pg: Page,
    metric: str,
    q: str,
    curves: list[Curve],
    measured: dict[str, list[dict[str, Any]]],
    winner_curve: Curve | None,
) -> _Plot:
    r = pg.r
    f = UNIT_FMT[METRIC_UNITS[metric]]
    by_id = {a["id"]: (i, a) for i, a in enumerate(r.get("architectures") or [])}
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
                label = f"{c.label} ({_step_label(cid, r)})"
                plot.series.append(svg.Series(label, mpts, color, "points", marker="square"))
                plot.tops += [y for _, y in mpts]
    # measured candidates that have no predicted curve (e.g. an external endpoint)
    curve_ids = {i for c in curves for i in c.architecture_ids}
    for j, (cid, steps) in enumerate(sorted(measured.items())):
        mpts = _measured_points(steps, metric, q) if cid not in curve_ids else []
        if mpts:
            color = svg.PALETTE[(len(curves) + j) % len(svg.PALETTE)]
            label = f"{cid} ({_step_label(cid, r)})"
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
    measured: dict[str, list[dict[str, Any]]],
    winner_curve: Curve | None,
    capacity: tuple[float, str, str] | None,
) -> dict[str, Any]:
    """What a latency chart's caption says beyond its metric: what the squares are, the chosen curve's capacity,
    the planner's own figure for it when they differ, and whether the curves are the table's simulations."""
    table = winner_curve.slo_limit_rps if winner_curve is not None else None
    x_cap = capacity[0] if capacity is not None else None
    return {
        "kinds": " / ".join(sorted({_step_label(cid, pg.r) for cid in measured})) if measured else "",
        "capacity": (METRIC_NAMES[capacity[1]], capacity[2]) if capacity is not None else None,
        "table_rps": f"{table:.2f}" if table is not None and x_cap is not None else "",
        "crossing_rps": (
            f"{x_cap:.2f}" if table is not None and x_cap is not None and abs(table - x_cap) >= 0.005 else ""
        ),
        "winner": winner_curve is not None,
        "resimulated": winner_curve is not None and not winner_curve.matches_table,
    }


def _latency(pg: Page, curves: list[Curve], measured: dict[str, list[dict[str, Any]]]) -> Section:
    r = pg.r
    if not curves and not measured:
        return _section("latency.html", charts=[], empty=True)
    archs = r.get("architectures") or []
    by_id = {a["id"]: a for a in archs}
    wi = winner_index(r)
    winner_id = archs[wi]["id"] if wi is not None else None
    winner_curve = next(
        (c for c in curves if c.architecture_ids and c.architecture_ids[0] == winner_id), None
    )
    crossing = winner_curve.capacity(chart_targets(r)) if winner_curve is not None else None
    # the dotted line is the table's capacity (the planner's search), so the chart and the table say one figure;
    # where the chart's longer simulations cross the target elsewhere, the caption says where
    capacity = crossing
    if crossing is not None and winner_curve is not None and winner_curve.slo_limit_rps is not None:
        capacity = (float(winner_curve.slo_limit_rps), crossing[1], crossing[2])
    metrics = ["ttft_ms", "e2e_s"]
    if any(m == "tpot_ms" for m, _, _ in slo_targets(r)):
        metrics.insert(1, "tpot_ms")
    charts = []
    for metric in metrics:
        q = shown_percentile(r, metric)
        plot = _latency_plot(pg, metric, q, curves, measured, winner_curve)
        if any(s.points for s in plot.series):
            svg_text = _latency_chart(metric, q, plot, slo_limit(r, metric, q), capacity)
            charts.append({"metric": metric, "name": f"{METRIC_NAMES[metric]} {q}", "svg": svg_text})
    shared = [
        (c.label, [f"#{by_id[i].get('rank')}" for i in c.architecture_ids if i in by_id]) for c in curves
    ]
    return _section(
        "latency.html",
        empty=False,
        charts=charts,
        caption=_latency_caption(pg, measured, winner_curve, crossing),
        matches_table=winner_curve is not None and winner_curve.matches_table,
        shared=[(label, ", ".join(ranks)) for label, ranks in shared if ranks],
        steps=_measurements(measured, r) if measured else None,
    )


def _step_figure(s: dict[str, Any], metric: str, q: str) -> str:
    v = (s.get(metric) or {}).get(q) if isinstance(s.get(metric), dict) else None
    return UNIT_FMT[METRIC_UNITS[metric]](float(v)) if isinstance(v, int | float) else "—"


def _measurements(measured: dict[str, list[dict[str, Any]]], result: dict[str, Any]) -> dict[str, Any]:
    """The load-test steps, one row each."""
    names = {a["id"]: short_label(a) for a in result.get("architectures") or []}
    metrics = [(m, shown_percentile(result, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")]
    rows = []
    for cid, steps in measured.items():
        for s in steps:
            target = s.get("target") or {}
            errors = s.get("errors") or {}
            rows.append(
                {
                    "cells": [
                        names.get(cid, cid),
                        _step_label(cid, result),
                        (
                            ", ".join(f"{k} {v:g}" for k, v in target.items())
                            if isinstance(target, dict)
                            else str(target)
                        ),
                        rps(float(s.get("requests_per_s") or 0)),
                        *(_step_figure(s, m, q) for m, q in metrics),
                        str(sum(errors.values())) if isinstance(errors, dict) else str(errors),
                    ],
                    "meets_slo": s.get("meets_slo"),
                }
            )
    head = ["candidate", "figures", "load step", "served"]
    head += [f"{METRIC_NAMES[m]} {q}" for m, q in metrics] + ["errors", "meets SLO"]
    twins = ORIGIN_LABELS[TWIN] in {_step_label(cid, result) for cid in measured}
    return {"head": head, "rows": rows, "twins": twins}


def _pareto_points(archs: list[dict[str, Any]]) -> tuple[list[svg.Series], list[float]]:
    """The feasible architectures as (e2e p95, monthly cost) points: the others, then the Pareto front's steps."""
    pts_all, tips_all, front = [], [], []
    for a in archs:
        e2e = lookup(a, "predicted.e2e_s.p95")
        if not isinstance(e2e, int | float):
            continue
        pt = (float(e2e), rank_cost(a))
        tip = f"#{a.get('rank')} {short_label(a)}: {usd(pt[1])}/month, e2e p95 {sec(pt[0])}"
        if a.get("pareto"):
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
    wi = winner_index(pg.r)
    if wi is None:
        return _section("pareto.html", chart=None)
    archs = [a for a in pg.r.get("architectures") or [] if feasible(a)]
    series, xs = _pareto_points(archs)
    costs = [p[1] for s in series for p in s.points if p[1] > 0]
    log = bool(costs) and max(costs) / min(costs) >= LOG_COST_RATIO
    w = pg.r["architectures"][wi]
    markers = []
    w_e2e = lookup(w, "predicted.e2e_s.p95")
    if isinstance(w_e2e, int | float):
        tip = f"chosen: {short_label(w)}"
        markers.append(
            svg.Marker(float(w_e2e), rank_cost(w), f"#{w.get('rank')} chosen", svg.PALETTE[5], "star", tip)
        )
    labelled = [
        a
        for a in archs
        if a.get("pareto") and a is not w and isinstance(lookup(a, "predicted.e2e_s.p95"), int | float)
    ][:MAX_PARETO_LABELS]
    for a in labelled:
        x, tip = float(lookup(a, "predicted.e2e_s.p95")), f"#{a.get('rank')} {short_label(a)}"
        markers.append(svg.Marker(x, rank_cost(a), f"#{a.get('rank')}", svg.PALETTE[0], "ring", tip))
    limit = slo_limit(pg.r, "e2e_s", "p95")
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
    marked = [(str(a.get("rank")), short_label(a)) for a in [w, *labelled]]
    return _section("pareto.html", chart=Markup(chart), marked=marked)


HOURS = [f"{h:02d}" for h in range(24)]


def _fleet_schedule(pg: Page, idx: int, wi: int) -> dict[str, Any] | None:
    """The hour-by-hour replicas and nodes of architecture `idx` against demand: a chart and its table."""
    r = pg.r
    w = r.get("workload") or {}
    hourly = w.get("hourly_rps") or []
    a = r["architectures"][idx]
    sched = a["cost"]["schedule"]
    groups = [
        svg.BarGroup("nodes", _floats(sched.get("nodes_by_hour")), svg.PALETTE[0]),
        svg.BarGroup("replicas", _floats(sched.get("replicas_by_hour")), svg.PALETTE[4]),
    ]
    groups = [g for g in groups if len(g.values) == len(HOURS)]
    if not groups:
        return None
    demand = svg.Series(
        "demand (req/s)", [(h, float(v)) for h, v in enumerate(hourly)], svg.PALETTE[5], "line"
    )
    chart = svg.bar_chart(
        "schedule",
        f"Replicas and nodes by hour of day ({w.get('timezone', 'local time')})",
        categories=HOURS,
        groups=groups,
        y_label="count",
        line=demand if len(hourly) == len(HOURS) else None,
        line_label="requests/s",
    )
    rows: list[list[Any]] = []
    for key, label in (("replicas_by_hour", "replicas"), ("nodes_by_hour", "nodes")):
        vals = sched.get(key) or []
        rows.append(
            [label, *(pg.n(f"architectures.{idx}.cost.schedule.{key}.{h}", count) for h in range(len(vals)))]
        )
    rows.append(["req/s", *(pg.n(f"workload.hourly_rps.{h}", two) for h in range(len(hourly)))])
    return {
        "chart": Markup(chart),
        "label": short_label(a),
        "best_fleet": idx != wi,
        "timezone": str(w.get("timezone", "local time")),
        "rows": rows,
    }


def _demand_schedule(pg: Page) -> dict[str, Any] | None:
    """Demand by hour alone (a Bedrock winner has no fleet to schedule)."""
    hourly = (pg.r.get("workload") or {}).get("hourly_rps") or []
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
    a0 = pg.r["architectures"][wi]
    c = a0.get("cost") or {}
    bd = c.get("breakdown") or {}
    parts = [
        (BREAKDOWN_LABELS.get(k, k.replace("_", " ")), float(v))
        for k, v in bd.items()
        if k.endswith("_usd_per_month") and isinstance(v, int | float)
    ]
    bars = [(label, v, svg.PALETTE[i % len(svg.PALETTE)]) for i, (label, v) in enumerate(parts)]
    options = [
        ("Per token (Bedrock)" if a0.get("deployment") == "bedrock" else "On-demand", c.get("usd_per_month")),
        ("Spot above the base", c.get("usd_per_month_spot")),
        ("1-year savings plan", c.get("usd_per_month_savings_plan_1y")),
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
    archs = pg.r.get("architectures") or []
    wi = winner_index(pg.r)
    if wi is None:
        return _section("cost.html", empty=True)
    idx = next(
        (i for i, a in enumerate(archs) if i >= wi and feasible(a) and (a.get("cost") or {}).get("schedule")),
        None,
    )
    fleet = _fleet_schedule(pg, idx, wi) if idx is not None else None
    demand = _demand_schedule(pg) if idx is None else None
    return _section(
        "cost.html", empty=False, fleet=fleet, demand=demand, hours=HOURS, breakdown=_cost_breakdown(pg, wi)
    )


def _learning(pg: Page) -> Section | None:
    """What the run taught the estimator (`sizing.learn`): drift beyond the stated interval first, then the
    levels stored and refused, and the refit's outcome. None for a result without a learning block."""
    learn = pg.r.get("learning")
    if not isinstance(learn, dict):
        return None
    refit = learn.get("refit") or {}
    items = [
        ("Measured levels stored", str(learn.get("measured_levels", 0))),
        ("Twin levels (never calibrate)", str(learn.get("twin_levels", 0))),
    ]
    if refit:
        what = refit.get("detail") or refit.get("line") or refit.get("error") or refit.get("status")
        items.append(("Calibration refit", f"{refit.get('where', '')}: {what}"))
    if learn.get("error"):
        items.append(("Not learned", str(learn["error"])))
    refused = [
        [str(x.get("candidate_id", "")), str(x.get("level") or ""), str(x.get("reason"))]
        for x in learn.get("refused") or []
        if isinstance(x, dict)
    ]
    return _section(
        "learning.html",
        drift=len(learn.get("drift") or []) if learn.get("drift") else 0,
        drift_lines=[str(line) for line in learn.get("drift_lines") or []],
        entries=items,
        refused=refused,
    )


def _binding(pg: Page, inf: dict[str, Any]) -> dict[str, Any]:
    """The SLO target that makes a workload infeasible, its limit, and how close the closest candidate came."""
    binding = inf.get("binding")
    if not (isinstance(binding, str) and "." in binding):
        return {"json": json.dumps(binding, default=str) if binding else ""}
    metric, q = binding.split(".", 1)
    f = UNIT_FMT.get(METRIC_UNITS.get(metric, ""), plain)
    limit = slo_limit(pg.r, metric, q)
    closest = inf.get("closest") or {}
    on = str(closest["on"]) if isinstance(closest, dict) and closest.get("on") else ""
    return {
        "name": f"{METRIC_NAMES.get(metric, metric)} {q}",
        "limit": f(limit) if limit is not None else "",
        "closest": on,
        "value": pg.n("infeasible.closest.value", f) if on else None,
    }


def _rejected(pg: Page) -> Section:
    rej = pg.r.get("rejected") or []
    inf = pg.r.get("infeasible")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for x in rej:
        by_kind.setdefault(str(x.get("kind") or "other"), []).append(x)
    failed = pg.r.get("failed") or []
    groups = [
        {
            "kind": kind,
            "label": KIND_LABELS.get(kind, kind),
            "rows": [(str(x.get("id")), str(x.get("reason", ""))) for x in xs],
        }
        for kind, xs in sorted(by_kind.items(), key=lambda kv: -len(kv[1]))
    ]
    return _section(
        "rejected.html",
        count=len(rej),
        infeasible=(
            {"message": str(inf.get("message", "")), **_binding(pg, inf)} if isinstance(inf, dict) else None
        ),
        failed=[
            [str(f.get("candidate_id", "")), str(f.get("status") or ""), str(f.get("error") or "")]
            for f in failed
            if isinstance(f, dict)
        ]
        if failed
        else None,
        groups=groups,
    )


def _assumed(r: dict[str, Any], prices: dict[tuple[str, str, bool], list[str]]) -> list[str]:
    """What the result's figures assume, in a sentence each."""
    asm = r.get("assumptions") or {}
    archs = r.get("architectures") or []
    cal = asm.get("calibration") or {}
    version = cal.get("version") if isinstance(cal, dict) else cal
    assumed: list[str] = []
    if "calibration" not in asm:
        assumed.append("This result does not say which calibration its predictions used.")
    elif version in (None, "none", ""):
        assumed.append(
            "The estimator is uncalibrated: latencies come from the roofline model with default efficiencies."
        )
    if any(k[2] for k in prices):
        assumed.append("Some instance prices are assumed (not from the AWS price list): see the price table.")
    if any(((a.get("cost") or {}).get("price") or {}).get("spot_discount_assumed") for a in archs):
        assumed.append("Spot discounts are assumed per family, not quoted; spot capacity may be interrupted.")
    if any(a.get("deployment") == "bedrock" for a in archs):
        assumed.append("Bedrock latency follows an assumed profile until measured.")
    origins = {measured_origin(a, r) for a in archs} - {None}
    if not origins:
        assumed.append("Nothing here is measured yet: every latency is a prediction.")
    if TWIN in origins:
        assumed.append(
            "Figures labelled simulated (twin) come from local twins serving at the estimator's own predicted"
            " pace: they test the pipeline, not the prediction, and are never calibration data."
        )
    if origins == {TWIN}:
        assumed.append("No figure here comes from a load test of a real endpoint yet.")
    return assumed


def plain_value(v: Any) -> str:
    """An assumption's value in words: `gpu 600, neuron 900` for `{"gpu": 600, "neuron": 900}`, a list joined,
    `none` for a missing value, a number as written."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return f"{v:g}"
    if isinstance(v, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {plain_value(x)}" for k, x in v.items()) or "none"
    if isinstance(v, list | tuple):
        return ", ".join(plain_value(x) for x in v) or "none"
    return str(v)


def _assumptions(pg: Page) -> Section:
    r = pg.r
    asm = r.get("assumptions") or {}
    prices: dict[tuple[str, str, bool], list[str]] = {}
    for a in r.get("architectures") or []:
        pr = (a.get("cost") or {}).get("price") or {}
        if pr:
            key = (str(pr.get("source", "")), str(pr.get("as_of", "")), bool(pr.get("assumed")))
            prices.setdefault(key, []).append(a["id"])
    cal = asm.get("calibration") or {}
    version = cal.get("version") if isinstance(cal, dict) else cal
    # (name, text, shown as code: a value that is not a text, as its JSON)
    items = [
        ("Calibration version", str(version if version is not None else "none"), False),
        ("Calibration date", str((cal.get("date") if isinstance(cal, dict) else None) or "—"), False),
        ("Generated", str(r.get("generated_at", "—")), False),
    ]
    items += [(k.replace("_", " "), plain_value(v), False) for k, v in asm.items() if k != "calibration"]
    price_rows = [
        [src, as_of, "assumed" if flag else "quoted", str(len(ids))]
        for (src, as_of, flag), ids in sorted(prices.items())
    ]
    return _section("assumptions.html", assumed=_assumed(r, prices), entries=items, prices=price_rows)


def _manifests(manifests: dict[str, str] | None, note: str) -> Section:
    return _section("manifests.html", files=list((manifests or {}).items()), note=note)


def winner_manifests(result: dict[str, Any]) -> tuple[dict[str, str] | None, str]:
    """Karpenter + Kubernetes YAML of the best-ranked EKS architecture, one file per kind, and a note; (None,
    why) when there is none."""
    archs = [a for a in result.get("architectures") or [] if feasible(a)]
    eks = next((a for a in archs if a.get("deployment") == "eks"), None)
    if eks is None:
        return None, "No EKS architecture in the ranking: nothing to deploy on Kubernetes."
    try:
        objs = render(eks, str(result.get("run_id") or "estimate"))
    except (SizingError, ValueError, KeyError) as exc:
        return None, f"Could not render the manifests of {eks['id']}: {exc}"
    out = {f"{o['kind'].lower()}.yaml": to_yaml([o]) for o in objs}
    who = "the chosen architecture" if eks is archs[0] else f"the best-ranked EKS architecture ({eks['id']})"
    return (
        out,
        f"Apply with kubectl apply -f: Karpenter node classes first, the autoscaler last. These run {who}.",
    )


# --- the page -------------------------------------------------------------------------------------------------
NAV = [
    ("workload", "Workload"),
    ("ranked", "Ranking"),
    ("serving", "Serving"),
    ("latency", "Latency"),
    ("pareto", "Cost vs latency"),
    ("cost", "Schedule & cost"),
    ("rejected", "Rejected"),
    ("assumptions", "Assumptions"),
    ("manifests", "Manifests"),
]


@cache
def _environment() -> Environment:
    """The templates' environment, built once per process: the formatting helpers are its filters, `num` tells a
    figure of the result (`Num`) from a text."""
    filters = {
        f.__name__: f
        for f in (usd, ms, sec, rps, count, two, tenths, token_count, pct, share, fine_share, plain)
    }
    return make_environment(filters, {"num": lambda v: isinstance(v, Num)})


def render_report(
    result: dict[str, Any],
    *,
    measurements: list[dict[str, Any]] | None = None,
    manifests: dict[str, str] | None = None,
    workload: WorkloadModel | None = None,
    curves: bool = True,
    seed: int | None = None,
) -> str:
    """The self-contained HTML report of an estimate or run `result` (the planner's JSON).

    measurements: load-test step records (`target`, `requests_per_s`, `ttft_ms`/`tpot_ms`/`e2e_s` percentiles,
        optional `candidate_id`), plotted beside the predicted curves. manifests: file name -> YAML of the
        winner; by default rendered with `sizing.deploy` for the best-ranked EKS architecture. workload: the
        WorkloadModel, when at hand (exact token distributions, the business terms); else rebuilt from the
        result. curves: False skips the simulated latency curves (measured points are still plotted). seed: the
        planner's seed (default: the result's `search.seed`, else the planner's default 0); with the workload,
        the curves are then the very simulations the table reports."""
    check_result(result, measurements)
    pg = Page(result)
    measured = measured_steps(measurements or [], result)
    always = list(measured) + [a["id"] for a in result.get("architectures") or [] if a.get("measured")]
    curve_list = latency_curves(result, workload, always=always, seed=seed) if curves else []
    if manifests is None:
        manifests, note = winner_manifests(result)
    else:
        note = "Manifests supplied with the run."
    sections = [
        _answer(pg),
        _learning(pg),
        _workload(pg, workload),
        _ranked(pg),
        _serving(pg),
        _latency(pg, curve_list, measured),
        _pareto(pg),
        _schedule_and_cost(pg),
        _rejected(pg),
        _assumptions(pg),
        _manifests(manifests, note),
    ]
    title, subtitle = _heading(result, measured=bool(measurements))
    where = region_line(result) or ""
    return (
        _environment()
        .get_template("report.html")
        .render(
            title=title,
            subtitle=subtitle,
            where=where,
            nav=NAV,
            sections=[s for s in sections if s is not None],
            result=result,
        )
    )


def _heading(result: dict[str, Any], *, measured: bool) -> tuple[str, str]:
    """The page's title (the workload) and the line under it (model, run or estimate, when generated)."""
    w = result.get("workload") or {}
    archs = result.get("architectures") or []
    kind = "run" if measured or any(a.get("measured") for a in archs) else "estimate"
    model = w.get("model") or (archs[0].get("model") if archs else None)
    bits = [str(model) if model else "", f"run {result['run_id']}" if result.get("run_id") else kind]
    if result.get("generated_at"):
        bits.append(f"generated {result['generated_at']}")
    return f"Sizing report — {w.get('name') or 'workload'}", " · ".join(b for b in bits if b)


def write_report(
    result: dict[str, Any],
    path: str | Path,
    *,
    measurements: list[dict[str, Any]] | None = None,
    manifests: dict[str, str] | None = None,
    workload: WorkloadModel | None = None,
    curves: bool = True,
    seed: int | None = None,
) -> Path:
    """Render the report and write it to `path` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    html = render_report(
        result, measurements=measurements, manifests=manifests, workload=workload, curves=curves, seed=seed
    )
    out.write_text(html, encoding="utf-8")
    return out
