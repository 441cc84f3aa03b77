"""The HTML report of an estimate or a run: one self-contained page (inline CSS and SVG, no external asset).

Every figure the page prints from the result is wrapped as `<span class="n" data-path="architectures.0.cost.
usd_per_month" data-value="52341.86">$52,342</span>`, so a test (or a reader's script) can check the page says
exactly what the JSON says. The result itself is embedded as `<script type="application/json" id="sizing-result">`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from sizing.report import svg
from sizing.report.curves import Curve, latency_curves
from sizing.report.model import check_result
from sizing.results import rank_cost
from sizing.workload import WorkloadModel

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


class Page:
    """Builds the page; `n()` prints a number of the result, tagged with its path."""

    def __init__(self, result: dict[str, Any]):
        self.r = result

    def n(self, path: str, fmt: Fmt = plain, missing: str = "—", scale: float = 1.0) -> str:
        """`scale`: the text shows the value times this (`share` shows a fraction as a percentage: 100)."""
        v = lookup(self.r, path)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return f'<span class="na">{missing}</span>'
        scaled = f' data-scale="{scale:g}"' if scale != 1 else ""
        return (
            f'<span class="n" data-path="{escape(path)}" data-value="{v!r}"{scaled}>{escape(fmt(v))}</span>'
        )


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


#: What served a load test's figures (`measured.origin`), as the report names it: a local twin serves at the
#: estimator's own predicted pace, so its figures are simulations of our model, never measurements.
TWIN = "twin"
ENDPOINT = "endpoint"
ORIGIN_LABELS = {TWIN: "simulated (twin)", ENDPOINT: "measured"}


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


def _text(v: Any) -> str:
    return escape(str(v)) if isinstance(v, str) and v else ""


def _section(sid: str, title: str, body: str, lead: str = "") -> str:
    lead_html = f'<p class="lead">{lead}</p>' if lead else ""
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{lead_html}{body}</section>'


def _figure(name: str, svg_text: str, caption: str) -> str:
    return f'<figure class="chart" data-chart="{escape(name)}">{svg_text}<figcaption>{caption}</figcaption></figure>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _dl(items: Sequence[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


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


def _span(pg: Page, path: str) -> str:
    """`min–peak` of a {min, peak} block, or one figure when they are equal."""
    lo, hi = lookup(pg.r, path + ".min"), lookup(pg.r, path + ".peak")
    if lo == hi:
        return pg.n(path + ".peak", count)
    return f"{pg.n(path + '.min', count)}–{pg.n(path + '.peak', count)}"


# --- sections -------------------------------------------------------------------------------------------------
def _headroom(pg: Page, p: str) -> str:
    """Both headrooms, named: spare load at peak, and how far the tightest SLO target's prediction is below it."""
    a = lookup(pg.r, p) or {}
    load_path = (
        f"{p}.headroom.load_pct"
        if isinstance(lookup(a, "headroom.load_pct"), int | float)
        else f"{p}.headroom_pct"
    )
    parts = [f"load headroom {pg.n(load_path, pct)} (capacity left free at peak)"]
    lat = lookup(a, "headroom.latency")
    if isinstance(lat, dict) and lat:
        tightest = lookup(a, "headroom.tightest")
        items = []
        for target, v in lat.items():
            if not isinstance(v, int | float) or isinstance(v, bool) or "." not in str(target):
                continue
            metric, q = str(target).split(".", 1)
            name = f"{METRIC_NAMES.get(metric, metric)} {q}"
            mark = " (tightest)" if target == tightest and len(lat) > 1 else ""
            items.append(f"{escape(name)} {pg.n(f'{p}.headroom.latency.{target}', pct)} below its SLO{mark}")
        if items:
            parts.append("latency headroom " + ", ".join(items))
    return "; ".join(parts)


def _at_level_note(pg: Page, p: str, metric: str, q: str, fmt: Fmt) -> str:
    """`(predicted there X)`: the estimator's figure at the load level the figure beside it was taken at."""
    path = f"{p}.measured.predicted_at_level.{metric}.{q}"
    if not isinstance(lookup(pg.r, path), int | float):
        return ""
    return f" <small>(predicted at that load {pg.n(path, fmt)})</small>"


def _why_not_cheaper(pg: Page) -> str:
    r = pg.r
    parts = []
    if _text(r.get("summary")):
        parts.append(f'<p class="why">{_text(r.get("summary"))}</p>')
    rows = []
    for i, x in enumerate(r.get("why_not_cheaper") or []):
        if isinstance(x, dict):
            rows.append(
                [
                    escape(str(x.get("option") or "")),
                    "≥ " + pg.n(f"why_not_cheaper.{i}.usd_per_month", usd),
                    escape(str(x.get("reason") or "")),
                ]
            )
    if rows:
        parts.append(
            f"<details><summary>Why not cheaper: <strong>{len(rows)}</strong> cheaper hardware options miss an"
            f" SLO</summary>{_table(['option', 'per month (at least)', 'why excluded'], rows)}</details>"
        )
    return "".join(parts)


def _answer(pg: Page) -> str:
    r = pg.r
    archs = r.get("architectures") or []
    wi = winner_index(r)
    if wi is None:
        inf = r.get("infeasible") or {}
        default = (
            "every measured candidate missed an SLO (see the ranking)"
            if archs
            else "no candidate meets the SLOs (see the rejected candidates)"
        )
        msg = escape(str(inf.get("message") or default))
        return (
            f'<div class="answer bad"><p class="big">No architecture meets the SLOs.</p><p>{msg}</p>'
            f"{_why_not_cheaper(pg)}</div>"
        )
    a = archs[wi]
    p = f"architectures.{wi}"
    name = f"<strong>{escape(short_label(a))}</strong>"
    if a.get("capacity_type") == "spot" and (a.get("cost") or {}).get("usd_per_month_spot") is not None:
        cost = f"{pg.n(p + '.cost.usd_per_month_spot', usd)} a month with spot ({pg.n(p + '.cost.usd_per_month', usd)} on demand)"
    else:
        cost = f"{pg.n(p + '.cost.usd_per_month', usd)} a month on demand"
    parts = [f'<p class="big">Run {name} for {cost}.</p>']
    if a.get("replicas"):
        in_flight = ""
        if isinstance(lookup(a, "per_replica.in_flight"), int | float):
            in_flight = f", {pg.n(p + '.per_replica.in_flight', tenths)} requests in flight per replica at peak (simulated)"
        parts.append(
            f"<p>{_span(pg, p + '.replicas')} replicas on {_span(pg, p + '.instances')}"
            f" × {escape(str(a.get('instance_type')))} ({escape(str(a.get('capacity_type')))}){in_flight}.</p>"
        )
        parts.append(f"<p>Headroom: {_headroom(pg, p)}.</p>")
    extras = []
    if (a.get("cost") or {}).get("usd_per_month_spot") is not None and a.get("capacity_type") != "spot":
        extras.append(f"{pg.n(p + '.cost.usd_per_month_spot', usd)} with spot above the base")
    if (a.get("cost") or {}).get("usd_per_month_savings_plan_1y") is not None:
        extras.append(f"{pg.n(p + '.cost.usd_per_month_savings_plan_1y', usd)} with a 1-year savings plan")
    if (a.get("cost") or {}).get("usd_per_user_month") is not None:
        extras.append(f"{pg.n(p + '.cost.usd_per_user_month', usd)} per user per month")
    if extras:
        parts.append("<p>" + "; ".join(extras) + ".</p>")
    measured = a.get("measured") if isinstance(a.get("measured"), dict) else {}
    lat = []
    for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
        q = shown_percentile(r, metric)
        f = UNIT_FMT[METRIC_UNITS[metric]]
        limit = slo_limit(r, metric, q)
        from_test = bool(measured.get(metric))
        src = "measured" if from_test else "predicted"
        txt = f"{METRIC_NAMES[metric]} {q} {pg.n(f'{p}.{src}.{metric}.{q}', f)}"
        if from_test:
            txt += _at_level_note(pg, p, metric, q, f)
        if limit is not None:
            txt += f" (SLO {escape(f(limit))})"
        lat.append(txt)
    if measured:
        basis = origin_label(a, r).capitalize() + " at the highest load level that met the SLOs"
    else:
        basis = "Predicted at peak"
    parts.append(f"<p>{basis}: " + ", ".join(lat) + ".</p>")
    if measured_origin(a, r) == TWIN:
        parts.append(
            "<p><small>Simulated (twin): a local twin serves at the estimator's own predicted pace, so these"
            " figures check the pipeline, not the prediction; only a load test of a real endpoint measures."
            "</small></p>"
        )
    tuning = _text(lookup(a, "tuning.summary"))
    if tuning:
        parts.append(f"<p>Runtime settings: {tuning}.</p>")
    parts.append(_why_not_cheaper(pg))
    ok = "good" if a.get("meets_slo") else "bad"
    return f'<div class="answer {ok}">' + "".join(parts) + "</div>"


def _workload(pg: Page, wl: WorkloadModel | None) -> str:
    w = pg.r.get("workload") or {}
    if not w:
        return _section("workload", "Workload", "<p>This result carries no workload figures.</p>")
    said: list[tuple[str, str]] = [
        ("Workload", escape(str(w.get("name", "")))),
        ("Model", escape(str(w.get("model", "")))),
    ]
    if wl is not None and wl.spec.users is not None:
        u = wl.spec.users
        said += [
            ("Users", f"{u.total:,}"),
            ("Active in the busiest hour", f"{u.peak_active_fraction:.0%}"),
            ("Requests per active user-hour", f"{u.requests_per_active_hour:g}"),
        ]
    if wl is not None:
        said.append(("Traffic profile", escape(str(wl.spec.traffic.profile or "custom weights"))))
    said.append(("Time zone", escape(str(w.get("timezone", "")))))
    for m, q, _limit in slo_targets(pg.r):
        f = UNIT_FMT.get(METRIC_UNITS.get(m, ""), plain)
        said.append((f"SLO {METRIC_NAMES.get(m, m)} {q}", "≤ " + pg.n(f"workload.slo.{m}.{q}", f)))
    said += [("Note", escape(str(n))) for n in w.get("notes") or []]
    tech: list[tuple[str, str]] = [
        ("Peak rate", pg.n("workload.peak_rps", rps)),
        ("Average rate", pg.n("workload.avg_rps", rps)),
        ("Requests in flight at peak (Little's law)", pg.n("workload.peak_concurrency", count)),
        ("Active users at peak", pg.n("workload.peak_active_users", count)),
        ("Think time between requests", pg.n("workload.think_time_s", sec)),
        ("Requests per day", pg.n("workload.requests_per_day", count)),
        ("Requests per month", pg.n("workload.requests_per_month", count)),
        ("Input tokens/s at peak", pg.n("workload.input_tokens_per_s_peak", token_count)),
        ("Output tokens/s at peak", pg.n("workload.output_tokens_per_s_peak", token_count)),
    ]
    tok_rows = []
    for side in ("input_tokens", "output_tokens"):
        block = w.get(side)
        b: dict[str, Any] = block if isinstance(block, dict) else {}
        tok_rows.append(
            [side.replace("_", " "), escape(str(b.get("kind", "")))]
            + [pg.n(f"workload.{side}.{k}", token_count) for k in ("mean", "p50", "p95", "p99")]
        )
    tokens = _table(["tokens", "distribution", "mean", "p50", "p95", "p99"], tok_rows, "num")
    body = (
        '<div class="cols"><div><h3>In business terms</h3>' + _dl(said) + "</div>"
        "<div><h3>In technical figures</h3>" + _dl(tech) + tokens + "</div></div>"
    )
    return _section("workload", "Workload", body)


def _also_fits(pg: Page, p: str) -> str:
    """`also fits: g6e.2xlarge $3,371`: dearer instance sizes with the same performance, folded into the row."""
    alts = lookup(pg.r, p + ".also_fits_on")
    if not isinstance(alts, list) or not alts:
        return ""
    items = [
        f"{escape(str(x.get('instance_type')))} {pg.n(f'{p}.also_fits_on.{j}.usd_per_month', usd)}"
        for j, x in enumerate(alts)
        if isinstance(x, dict) and x.get("instance_type")
    ]
    return f"<br><small>also fits on: {', '.join(items)}</small>" if items else ""


def _tightest(pg: Page, p: str) -> str:
    """The tightest SLO target's margin below its limit, named."""
    target = lookup(pg.r, p + ".headroom.tightest")
    if not isinstance(lookup(pg.r, p + ".headroom.tightest_pct"), int | float):
        return '<span class="na">—</span>'
    name = ""
    if isinstance(target, str) and "." in target:
        metric, q = target.split(".", 1)
        name = f"<br><small>{escape(METRIC_NAMES.get(metric, metric))} {escape(q)}</small>"
    return pg.n(p + ".headroom.tightest_pct", pct) + name


def _load_headroom(pg: Page, p: str) -> str:
    if isinstance(lookup(pg.r, p + ".headroom.load_pct"), int | float):
        return pg.n(p + ".headroom.load_pct", pct)
    return pg.n(p + ".headroom_pct", pct)


def _ranked(pg: Page) -> str:
    r = pg.r
    archs = r.get("architectures") or []
    if not archs:
        return _section("ranked", "Ranked architectures", "<p>None: no candidate meets the SLOs.</p>")
    metrics = [(m, shown_percentile(r, m)) for m in ("ttft_ms", "tpot_ms", "e2e_s")]
    labels = origin_labels(r)
    any_measured = bool(labels)
    tested = " / ".join(labels)
    head = ["#", "architecture", "replicas<br><small>min–peak (mean)</small>"]
    for m, q in metrics:
        limit = slo_limit(r, m, q)
        slo = (
            f"<br><small>SLO ≤ {escape(UNIT_FMT[METRIC_UNITS[m]](limit))}</small>"
            if limit is not None
            else ""
        )
        both = f"predicted at peak<br>{tested}" if any_measured else "predicted at peak"
        head.append(f"{METRIC_NAMES[m]} {q}<br><small>{both}</small>{slo}")
    head.append(
        "capacity per replica<br><small>"
        + (f"predicted<br>{tested}" if any_measured else "predicted")
        + "</small>"
    )
    head += [
        "per month<br><small>on-demand</small>",
        "per month<br><small>spot</small>",
        "per month<br><small>1-yr plan</small>",
        "per 1M out<br><small>tokens</small>",
        "per user<br><small>month</small>",
        "load headroom<br><small>capacity free at peak</small>",
        "latency headroom<br><small>tightest SLO margin</small>",
        "Pareto",
    ]
    rows = []
    for i, a in enumerate(archs):
        p = f"architectures.{i}"
        reps = "per token"
        if a.get("replicas"):
            reps = _span(pg, p + ".replicas")
            if lookup(r, p + ".replicas.min") != lookup(r, p + ".replicas.peak"):
                reps += f" ({pg.n(p + '.replicas.mean', count)})"
        name = f'<span class="id" title="{escape(a["id"])}">{escape(short_label(a))}</span>'
        if a.get("capacity_type") == "spot":
            name += ' <span class="tag">spot</span>'
        if not feasible(a):
            when = "when simulated (twin)" if measured_origin(a, r) == TWIN else "when measured"
            name += f' <span class="tag miss">missed an SLO {when}</span>'
        elif measured_origin(a, r) == TWIN:
            name += ' <span class="tag">simulated (twin)</span>'
        name += _also_fits(pg, p)
        rank = pg.n(p + ".rank", count) if feasible(a) else '<span class="miss">✗</span>'
        row = [rank, name, reps]
        for m, q in metrics:
            f = UNIT_FMT[METRIC_UNITS[m]]
            cell = pg.n(f"{p}.predicted.{m}.{q}", f)
            err = f"{p}.calibration.expected_error.{EXPECTED_ERROR_KEY[m]}" if m in EXPECTED_ERROR_KEY else ""
            if err and isinstance(lookup(r, err), int | float):
                # how far such a prediction typically is from a measurement (cross-validated median error)
                cell += f' <small class="err" title="typical error of this prediction">±{pg.n(err, share, scale=100)}</small>'
            if any_measured:
                meas = pg.n(f"{p}.measured.{m}.{q}", f, missing="")
                limit = slo_limit(r, m, q)
                mv = lookup(r, f"{p}.measured.{m}.{q}")
                miss = " miss" if limit is not None and isinstance(mv, int | float) and mv > limit else ""
                title = f' title="{escape(origin_label(a, r))}"' if a.get("measured") else ""
                cell += f'<br><span class="meas{miss}"{title}>{meas}</span>'
                if isinstance(mv, int | float):
                    cell += _at_level_note(pg, p, m, q, f)
            row.append(cell)
        cap = pg.n(p + ".per_replica.rps_slo_limit", rps)
        if any_measured:
            cap += f'<br><span class="meas">{pg.n(p + ".measured.capacity_rps", rps, missing="")}</span>'
        row.append(cap)
        row += [
            pg.n(p + ".cost.usd_per_month", usd),
            pg.n(p + ".cost.usd_per_month_spot", usd),
            pg.n(p + ".cost.usd_per_month_savings_plan_1y", usd),
            pg.n(p + ".cost.usd_per_million_output_tokens", usd),
            pg.n(p + ".cost.usd_per_user_month", usd),
            _load_headroom(pg, p),
            _tightest(pg, p),
            "★" if a.get("pareto") else "",
        ]
        rows.append(row)
    s = r.get("search") or {}
    lead = "Cheapest first among the architectures that meet every SLO target. "
    if s:
        lead += (
            f"Searched {pg.n('search.hardware_options', count)} hardware options, simulated"
            f" {pg.n('search.simulated', count)}, {pg.n('search.feasible', count)} feasible"
            + (f" in {pg.n('search.seconds', sec)}" if s.get("seconds") is not None else "")
            + ". "
        )
    if any_measured:
        lead += (
            f"Second lines ({escape(tested)}) are at the highest load level that met the SLOs, with the estimator's"
            " prediction at that same load beside them where the run re-simulated it; such an architecture's"
            " replicas and cost follow from that capacity. "
        )
    if TWIN in {measured_origin(a, r) for a in archs}:
        lead += (
            "Simulated (twin) figures come from local twins, which serve at the estimator's own predicted pace:"
            " they are not measurements. "
        )
    lead += (
        "Load headroom: the share of a replica's SLO capacity left free in the busiest hour. Latency headroom: how"
        " far the tightest SLO target's prediction is below its limit. "
    )
    lead += "★ marks the Pareto front (no other architecture is both cheaper and faster at p95 end-to-end)."
    if any(isinstance(lookup(a, "calibration.expected_error"), dict) for a in archs):
        lead += (
            " ±: the typical error of a prediction on that hardware and engine, the median error when the"
            " estimator predicted published measurements it was not fitted on."
        )
    return _section("ranked", "Ranked architectures", _table(head, rows, "num ranked") + _downloads(r), lead)


def _refused(pg: Page, p: str) -> str:
    """The share of requests the server refuses (input + output over max_model_len), and what the context covers."""
    refused = lookup(pg.r, p + ".context.refused_share")
    if isinstance(refused, bool) or not isinstance(refused, int | float):
        return '<span class="na">—</span>'
    covers = _text(lookup(pg.r, p + ".context.covers"))
    note = f"<br><small>covers {covers}</small>" if covers else ""
    if refused <= 0:
        return "none" + note
    return pg.n(p + ".context.refused_share", fine_share, scale=100) + note


def _serving(pg: Page) -> str:
    """Each architecture's serving configuration as deployed, what the tuning changed, and the load it carries."""
    r = pg.r
    rows = []
    for i, a in enumerate(r.get("architectures") or []):
        if a.get("deployment") == "bedrock":
            continue
        p = f"architectures.{i}"
        srv = a.get("serving") if isinstance(a.get("serving"), dict) else {}
        kv = srv.get("kv_cache_dtype")
        prefix = srv.get("enable_prefix_caching")
        refused_cell = _refused(pg, p)
        rows.append(
            [
                pg.n(p + ".rank", count) if feasible(a) else '<span class="miss">✗</span>',
                escape(short_label(a)),
                pg.n(p + ".serving.max_model_len", token_count),
                pg.n(p + ".serving.max_num_seqs", count),
                pg.n(p + ".serving.max_num_batched_tokens", token_count),
                escape(str(kv)) if isinstance(kv, str) else '<span class="na">—</span>',
                ("on" if prefix else "off") if isinstance(prefix, bool) else '<span class="na">—</span>',
                pg.n(p + ".per_replica.in_flight", tenths),
                pg.n(p + ".per_replica.max_concurrency", tenths),
                refused_cell,
                _text(lookup(a, "tuning.summary")) or '<span class="na">—</span>',
            ]
        )
    if not rows:
        return _section(
            "serving", "Serving configuration", "<p>No self-hosted architecture in this result.</p>"
        )
    head = [
        "#",
        "architecture",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "KV cache dtype",
        "prefix caching",
        "in flight at peak<br><small>per replica, simulated</small>",
        "in flight at SLO capacity<br><small>per replica, simulated</small>",
        "refused<br><small>longer than max_model_len</small>",
        "tuning<br><small>vs engine defaults</small>",
    ]
    lead = (
        "The engine settings each replica is estimated, deployed and load-tested with, the requests it holds in"
        " flight, and what the runtime-parameter search changed from the engine's defaults."
    )
    return _section("serving", "Serving configuration", _table(head, rows, "num serving"), lead)


def _data_uri(text: str, mime: str) -> str:
    return f"data:{mime};charset=utf-8;base64,{base64.b64encode(text.encode('utf-8')).decode('ascii')}"


def _downloads(result: dict[str, Any]) -> str:
    """Links that save the exports from the page itself: the CSVs as data: URIs, the JSON from the embedded
    result (a blob made by a two-line script, so the page does not carry the result twice)."""
    from sizing.report.export import export_csv, rejected_csv

    links = [
        f'<a download="architectures.csv" href="{_data_uri(export_csv(result), "text/csv")}">architectures.csv</a>',
        f'<a download="rejected.csv" href="{_data_uri(rejected_csv(result), "text/csv")}">rejected.csv</a>',
        '<a id="download-json" download="result.json" href="#sizing-result">result.json</a>',
    ]
    return '<p class="downloads">Download: ' + " · ".join(links) + "</p>"


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


def _latency(pg: Page, curves: list[Curve], measured: dict[str, list[dict[str, Any]]]) -> str:
    r = pg.r
    archs = r.get("architectures") or []
    if not curves and not measured:
        return _section(
            "latency",
            "Latency against load",
            "<p>No curve: the ranked architectures are per-token services (Bedrock) or none is feasible.</p>",
        )
    by_id = {a["id"]: (i, a) for i, a in enumerate(archs)}
    wi = winner_index(r)
    winner_id = archs[wi]["id"] if wi is not None else None
    winner_curve = next(
        (c for c in curves if c.architecture_ids and c.architecture_ids[0] == winner_id), None
    )
    targets = chart_targets(r)
    capacity = winner_curve.capacity(targets) if winner_curve is not None else None
    metrics = ["ttft_ms", "e2e_s"]
    if any(m == "tpot_ms" for m, _, _ in slo_targets(r)):
        metrics.insert(1, "tpot_ms")
    figs = []
    for metric in metrics:
        q = shown_percentile(r, metric)
        f = UNIT_FMT[METRIC_UNITS[metric]]
        limit = slo_limit(r, metric, q)
        series: list[svg.Series] = []
        markers: list[svg.Marker] = []
        tops: list[float] = []
        for k, c in enumerate(curves):
            color = svg.PALETTE[k % len(svg.PALETTE)]
            pts = [(p.offered_rps, v) for p in c.points if (v := p.value(metric, q)) is not None]
            tips = [
                f"{c.label}: offered {p.offered_rps:.2f} req/s, served {p.requests_per_s:.2f} req/s, "
                f"{METRIC_NAMES[metric]} {q} {f(v)}"
                for p in c.points
                if (v := p.value(metric, q)) is not None
            ]
            series.append(svg.Series(c.label, pts, color, "line", tips=tips))
            first = by_id.get(c.architecture_ids[0]) if c.architecture_ids else None
            op = c.operating
            y = op.value(metric, q) if op is not None else None
            if first is not None and op is not None and y is not None:
                _, a = first
                win = c is winner_curve
                x = op.offered_rps
                tip = (
                    f"operating point of {short_label(a)} at peak: {x:.2f} req/s offered per replica, {f(y)}"
                )
                table = lookup(a, f"predicted.{metric}.{q}")
                if not c.matches_table and isinstance(table, int | float):
                    tip += f" (re-simulated; the table says {f(float(table))})"
                label = f"{'chosen' if win else '#' + str(a.get('rank'))}: {x:.2f} req/s, {f(y)}"
                markers.append(
                    svg.Marker(
                        x, y, label, color, "star" if win else "ring", tip, show_label=win, series=c.label
                    )
                )
                tops.append(y)
            for cid in c.architecture_ids:
                mpts = _measured_points(measured.get(cid) or [], metric, q)
                if mpts:
                    series.append(
                        svg.Series(
                            f"{c.label} ({_step_label(cid, r)})", mpts, color, "points", marker="square"
                        )
                    )
                    tops += [y for _, y in mpts]
        # measured candidates that have no predicted curve (e.g. an external endpoint)
        curve_ids = {i for c in curves for i in c.architecture_ids}
        for j, (cid, steps) in enumerate(sorted(measured.items())):
            if cid in curve_ids:
                continue
            mpts = _measured_points(steps, metric, q)
            if mpts:
                color = svg.PALETTE[(len(curves) + j) % len(svg.PALETTE)]
                series.append(
                    svg.Series(f"{cid} ({_step_label(cid, r)})", mpts, color, "line", marker="square")
                )
                tops += [y for _, y in mpts]
        if not any(s.points for s in series):
            continue
        refs = [svg.RefLine(limit, f"SLO {q} {f(limit)}")] if limit is not None else []
        if capacity is not None:
            x_cap, m_cap, q_cap = capacity
            refs.append(
                svg.RefLine(
                    x_cap,
                    f"SLO capacity {x_cap:.2f} req/s ({METRIC_NAMES[m_cap]} {q_cap})",
                    axis="x",
                    color=svg.MUTED,
                )
            )
        y_hi = max(
            (limit or 0.0) * Y_CAP_SLO_FACTOR,
            max(tops, default=0.0) * Y_CAP_POINT_FACTOR,
        ) or max(p[1] for s in series for p in s.points)
        y_axis = svg.axis_for([0.0, y_hi], pad=0.0)
        chart = svg.xy_chart(
            f"latency-{metric}",
            f"{METRIC_NAMES[metric]} {q} against offered load per replica",
            x_label="offered load per replica (requests/s)",
            y_label=f"{METRIC_NAMES[metric]} {q} ({METRIC_UNITS[metric]})",
            series=series,
            ref_lines=refs,
            markers=markers,
            y_axis=y_axis,
        )
        figs.append(
            _figure(
                f"latency-{metric}", chart, _latency_caption(pg, metric, q, measured, winner_curve, capacity)
            )
        )
    lead = "How each of the leading hardware configurations behaves as the load offered to one replica rises"
    if winner_curve is not None and winner_curve.matches_table:
        lead += (
            ", simulated as for the ranked table (the same simulator, serving settings, requests and seed)"
        )
    lead += ". The operating point sits left of where its curve crosses the SLO line; the gap is the load headroom."
    shared = []
    for c in curves:
        ranks = [f"#{by_id[i][1].get('rank')}" for i in c.architecture_ids if i in by_id]
        if ranks:
            shared.append(f"{escape(c.label)}: {', '.join(ranks)}")
    if shared:
        lead += (
            " Architectures with the same accelerators and serving settings share a curve — "
            + "; ".join(shared)
            + "."
        )
    table = _measurements_table(measured, r) if measured else ""
    return _section("latency", "Latency against load", "".join(figs) + table, lead)


def _latency_caption(
    pg: Page,
    metric: str,
    q: str,
    measured: dict[str, list[dict[str, Any]]],
    winner_curve: Curve | None,
    capacity: tuple[float, str, str] | None,
) -> str:
    r = pg.r
    kinds = " / ".join(sorted({_step_label(cid, r) for cid in measured})) if measured else ""
    text = (
        f"{METRIC_NAMES[metric]} {q} of one replica as the offered load rises (predicted by the batching simulator"
        + (f"; load-test points ({escape(kinds)}) as squares, at the rate they served" if measured else "")
        + "). ★ is the chosen architecture's operating point at peak, a point of its own curve; rings the others'."
    )
    if capacity is not None:
        x_cap, m_cap, q_cap = capacity
        text += (
            f" The dotted line is where the chosen curve first reaches an SLO target ({METRIC_NAMES[m_cap]} {q_cap}):"
            " its capacity under every target. The gap to the star is the load headroom."
        )
        table = winner_curve.slo_limit_rps if winner_curve is not None else None
        if table is not None and abs(table - x_cap) >= 0.005:
            text += (
                f" The planner's capacity search, with shorter simulations, put that capacity at {table:.2f} req/s"
                " (the table's figure)."
            )
    elif winner_curve is not None:
        text += " The chosen curve meets every SLO target over the simulated range."
    if winner_curve is not None and not winner_curve.matches_table:
        text += (
            " This result does not carry the exact workload the planner simulated, so the curves were"
            " re-simulated from its rounded figures and may differ slightly from the table's."
        )
    return text


def _measurements_table(measured: dict[str, list[dict[str, Any]]], result: dict[str, Any]) -> str:
    rows = []
    names = {a["id"]: short_label(a) for a in result.get("architectures") or []}
    for cid, steps in measured.items():
        for s in steps:
            target = s.get("target") or {}
            tgt = (
                ", ".join(f"{k} {v:g}" for k, v in target.items())
                if isinstance(target, dict)
                else str(target)
            )
            cells = [
                escape(names.get(cid, cid)),
                escape(_step_label(cid, result)),
                escape(tgt),
                escape(rps(float(s.get("requests_per_s") or 0))),
            ]
            for m in ("ttft_ms", "tpot_ms", "e2e_s"):
                q = shown_percentile(result, m)
                v = (s.get(m) or {}).get(q) if isinstance(s.get(m), dict) else None
                cells.append(
                    escape(UNIT_FMT[METRIC_UNITS[m]](float(v))) if isinstance(v, int | float) else "—"
                )
            errors = s.get("errors") or {}
            cells.append(str(sum(errors.values())) if isinstance(errors, dict) else escape(str(errors)))
            ok = s.get("meets_slo")
            cells.append("—" if ok is None else ("yes" if ok else '<span class="miss">no</span>'))
            rows.append(cells)
    head = ["candidate", "load step", "served"] + [
        f"{METRIC_NAMES[m]} {shown_percentile(result, m)}" for m in ("ttft_ms", "tpot_ms", "e2e_s")
    ]
    head.insert(1, "figures")
    note = ""
    if ORIGIN_LABELS[TWIN] in {_step_label(cid, result) for cid in measured}:
        note = (
            '<p class="lead">Steps marked simulated (twin) ran against local twins, which serve at the'
            " estimator's own predicted pace: simulations of our model, not measurements.</p>"
        )
    return "<h3>Load-test steps</h3>" + note + _table([*head, "errors", "meets SLO"], rows, "num steps")


def _pareto(pg: Page) -> str:
    wi = winner_index(pg.r)
    if wi is None:
        return _section("pareto", "Cost against latency", "<p>No feasible architecture to plot.</p>")
    archs = [a for a in pg.r.get("architectures") or [] if feasible(a)]
    pts_all, pts_front, tips_all, tips_front = [], [], [], []
    for a in archs:
        e2e = lookup(a, "predicted.e2e_s.p95")
        if not isinstance(e2e, int | float):
            continue
        pt = (float(e2e), rank_cost(a))
        tip = f"#{a.get('rank')} {short_label(a)}: {usd(pt[1])}/month, e2e p95 {sec(pt[0])}"
        if a.get("pareto"):
            pts_front.append(pt)
            tips_front.append(tip)
        else:
            pts_all.append(pt)
            tips_all.append(tip)
    costs = [p[1] for p in pts_all + pts_front if p[1] > 0]
    log = bool(costs) and max(costs) / min(costs) >= LOG_COST_RATIO
    front = sorted(zip(pts_front, tips_front, strict=True))
    series = [
        svg.Series("other feasible architectures", pts_all, "#9aa3ad", "points", tips=tips_all),
        svg.Series("Pareto front", [p for p, _ in front], svg.PALETTE[0], "step", tips=[t for _, t in front]),
    ]
    w = pg.r["architectures"][wi]
    markers = []
    w_e2e = lookup(w, "predicted.e2e_s.p95")
    if isinstance(w_e2e, int | float):
        markers.append(
            svg.Marker(
                float(w_e2e),
                rank_cost(w),
                f"#{w.get('rank')} chosen",
                svg.PALETTE[5],
                "star",
                f"chosen: {short_label(w)}",
            )
        )
    labelled = [
        a
        for a in archs
        if a.get("pareto") and a is not w and isinstance(lookup(a, "predicted.e2e_s.p95"), int | float)
    ][:MAX_PARETO_LABELS]
    for a in labelled:
        markers.append(
            svg.Marker(
                float(lookup(a, "predicted.e2e_s.p95")),
                rank_cost(a),
                f"#{a.get('rank')}",
                svg.PALETTE[0],
                "ring",
                f"#{a.get('rank')} {short_label(a)}",
            )
        )
    refs = []
    limit = slo_limit(pg.r, "e2e_s", "p95")
    if limit is not None:
        refs.append(svg.RefLine(limit, f"SLO e2e p95 {sec(limit)}", axis="x"))
    x_axis = svg.axis_for([p[0] for p in pts_all + pts_front] + ([limit] if limit else []))
    chart = svg.xy_chart(
        "pareto",
        "Monthly cost against p95 end-to-end latency",
        x_label="predicted end-to-end latency p95 (s)",
        y_label="monthly cost (USD" + (", log scale)" if log else ")"),
        series=series,
        ref_lines=refs,
        markers=markers,
        x_axis=x_axis,
        y_log=log,
    )
    front_names = "; ".join(f"#{a.get('rank')} {escape(short_label(a))}" for a in [w, *labelled])
    cap = (
        "Each dot is a feasible architecture (predicted p95 end-to-end latency, monthly cost as ranked). The"
        " Pareto front joins those no other beats on both cost and latency: moving left along it buys speed with"
        f" money. Marked: {front_names}."
    )
    return _section("pareto", "Cost against latency", _figure("pareto", chart, cap))


def _schedule_and_cost(pg: Page) -> str:
    r = pg.r
    archs = r.get("architectures") or []
    w = r.get("workload") or {}
    hourly = w.get("hourly_rps") or []
    wi = winner_index(r)
    if wi is None:
        return _section("cost", "Schedule and monthly cost", "<p>No feasible architecture.</p>")
    idx = next(
        (i for i, a in enumerate(archs) if i >= wi and feasible(a) and (a.get("cost") or {}).get("schedule")),
        None,
    )
    a0 = archs[wi]
    w0 = f"architectures.{wi}"
    figs = []
    hours = [f"{h:02d}" for h in range(24)]
    demand = svg.Series(
        "demand (req/s)", [(h, float(v)) for h, v in enumerate(hourly)], svg.PALETTE[5], "line"
    )
    if idx is not None:
        a = archs[idx]
        sched = a["cost"]["schedule"]
        groups = [
            svg.BarGroup("nodes", _floats(sched.get("nodes_by_hour")), svg.PALETTE[0]),
            svg.BarGroup("replicas", _floats(sched.get("replicas_by_hour")), svg.PALETTE[4]),
        ]
        groups = [g for g in groups if len(g.values) == len(hours)]
        if groups:
            chart = svg.bar_chart(
                "schedule",
                f"Replicas and nodes by hour of day ({w.get('timezone', 'local time')})",
                categories=hours,
                groups=groups,
                y_label="count",
                line=demand if len(hourly) == len(hours) else None,
                line_label="requests/s",
            )
            who = "" if idx == wi else " (the best-ranked architecture with a fleet to schedule)"
            figs.append(
                _figure(
                    "schedule",
                    chart,
                    f"Hour-by-hour replicas and nodes of {escape(short_label(a))}{who} against demand, in"
                    f" {escape(str(w.get('timezone', 'local time')))}; the base stays up around the clock.",
                )
            )
            rows = []
            for key, label in (("replicas_by_hour", "replicas"), ("nodes_by_hour", "nodes")):
                vals = sched.get(key) or []
                rows.append(
                    [label]
                    + [pg.n(f"architectures.{idx}.cost.schedule.{key}.{h}", count) for h in range(len(vals))]
                )
            rows.append(["req/s"] + [pg.n(f"workload.hourly_rps.{h}", two) for h in range(len(hourly))])
            figs.append(_table(["hour", *hours], rows, "compact"))
    elif len(hourly) == len(hours):
        chart = svg.bar_chart(
            "schedule",
            "Demand by hour of day",
            categories=hours,
            groups=[svg.BarGroup("requests/s", [float(v) for v in hourly], svg.PALETTE[5])],
            y_label="requests/s",
        )
        figs.append(
            _figure(
                "schedule",
                chart,
                "Demand by hour. Bedrock scales per request: there is no fleet to schedule.",
            )
        )
    # monthly cost breakdown of the winner
    c = a0.get("cost") or {}
    bd = c.get("breakdown") or {}
    parts = [
        (BREAKDOWN_LABELS.get(k, k.replace("_", " ")), float(v), k)
        for k, v in bd.items()
        if k.endswith("_usd_per_month") and isinstance(v, int | float)
    ]
    rows_h = [(label, v, svg.PALETTE[i % len(svg.PALETTE)]) for i, (label, v, _) in enumerate(parts)]
    options = [
        ("Per token (Bedrock)" if a0.get("deployment") == "bedrock" else "On-demand", c.get("usd_per_month")),
        ("Spot above the base", c.get("usd_per_month_spot")),
        ("1-year savings plan", c.get("usd_per_month_savings_plan_1y")),
    ]
    rows_h += [(label, float(v), "#7a8796") for label, v in options if isinstance(v, int | float)]
    if rows_h:
        chart = svg.hbar_chart("cost-breakdown", "Monthly cost of the chosen architecture", rows=rows_h)
        figs.append(
            _figure(
                "cost-breakdown",
                chart,
                f"Monthly cost of {escape(short_label(a0))}: its parts (on-demand), then the total under each"
                " pricing option.",
            )
        )
    items = [
        (
            escape(BREAKDOWN_LABELS.get(k, k.replace("_", " "))),
            pg.n(f"{w0}.cost.breakdown.{k}", usd if "usd" in k else plain),
        )
        for k in bd
    ]
    items += [
        ("Per hour at peak", pg.n(f"{w0}.cost.usd_per_hour_peak", usd)),
        ("Per month, on-demand", pg.n(f"{w0}.cost.usd_per_month", usd)),
        ("Per month, spot above the base", pg.n(f"{w0}.cost.usd_per_month_spot", usd)),
        ("Per month, 1-year savings plan", pg.n(f"{w0}.cost.usd_per_month_savings_plan_1y", usd)),
        ("Per million output tokens", pg.n(f"{w0}.cost.usd_per_million_output_tokens", usd)),
        ("Per user per month", pg.n(f"{w0}.cost.usd_per_user_month", usd)),
    ]
    figs.append(_dl(items))
    return _section("cost", "Schedule and monthly cost", "".join(figs))


def _learning(pg: Page) -> str:
    """What the run taught the estimator (`sizing.learn`): drift beyond the stated interval first, then the
    levels stored and refused, and the refit's outcome. Empty for a result without a learning block."""
    learn = pg.r.get("learning")
    if not isinstance(learn, dict):
        return ""
    body = []
    for line in learn.get("drift_lines") or []:
        body.append(f'<p class="warn drift">{escape(str(line))}</p>')
    refit = learn.get("refit") or {}
    items = [
        ("Measured levels stored", escape(str(learn.get("measured_levels", 0)))),
        ("Twin levels (never calibrate)", escape(str(learn.get("twin_levels", 0)))),
    ]
    if refit:
        what = refit.get("detail") or refit.get("line") or refit.get("error") or refit.get("status")
        items.append(("Calibration refit", escape(f"{refit.get('where', '')}: {what}")))
    if learn.get("error"):
        items.append(("Not learned", escape(str(learn["error"]))))
    body.append(_dl(items))
    refused = [r for r in learn.get("refused") or [] if isinstance(r, dict)]
    if refused:
        rows = [
            [
                escape(str(r.get("candidate_id", ""))),
                escape(str(r.get("level") or "")),
                escape(str(r.get("reason"))),
            ]
            for r in refused
        ]
        body.append("<h3>Levels not stored</h3>" + _table(["candidate", "level", "reason"], rows))
    lead = (
        f"{len(learn.get('drift') or [])} measurements outside the stated interval of their prediction."
        if learn.get("drift")
        else "Every measured figure is within the stated interval of its prediction."
    )
    return _section("learning", "What this run taught the estimator", "".join(body), lead)


def _rejected(pg: Page) -> str:
    rej = pg.r.get("rejected") or []
    inf = pg.r.get("infeasible")
    body = []
    if isinstance(inf, dict):
        body.append(f'<p class="warn">{escape(str(inf.get("message", "")))}</p>')
        binding = inf.get("binding")
        if isinstance(binding, str) and "." in binding:
            metric, q = binding.split(".", 1)
            f = UNIT_FMT.get(METRIC_UNITS.get(metric, ""), plain)
            line = f"The binding SLO target is {escape(METRIC_NAMES.get(metric, metric))} {escape(q)}"
            limit = slo_limit(pg.r, metric, q)
            if limit is not None:
                line += f" (≤ {escape(f(limit))})"
            closest = inf.get("closest") or {}
            if isinstance(closest, dict) and closest.get("on"):
                line += f"; the closest candidate, {escape(str(closest['on']))}, reaches {pg.n('infeasible.closest.value', f)}"
            body.append(f"<p>{line}.</p>")
        elif binding:
            body.append(f"<p>Binding constraint: <code>{escape(json.dumps(binding, default=str))}</code></p>")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for x in rej:
        by_kind.setdefault(str(x.get("kind") or "other"), []).append(x)
    failed = pg.r.get("failed") or []
    if failed:
        rows = [
            [
                escape(str(f.get("candidate_id", ""))),
                escape(str(f.get("status") or "")),
                escape(str(f.get("error") or "")),
            ]
            for f in failed
            if isinstance(f, dict)
        ]
        body.append("<h3>Measurements that failed</h3>" + _table(["candidate", "status", "error"], rows))
    if not rej:
        body.append("<p>This result lists no rejected candidates.</p>")
    for kind, xs in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        rows = [[f"<code>{escape(str(x.get('id')))}</code>", escape(str(x.get("reason", "")))] for x in xs]
        body.append(
            f'<details data-kind="{escape(kind)}"><summary><strong>{len(xs)}</strong> {escape(KIND_LABELS.get(kind, kind))}'
            f"</summary>{_table(['candidate', 'reason'], rows)}</details>"
        )
    lead = f"{len(rej)} candidates did not make the ranking; open a group to see each one and why."
    return _section("rejected", "Rejected candidates", "".join(body), lead)


def _assumptions(pg: Page) -> str:
    r = pg.r
    asm = r.get("assumptions") or {}
    archs = r.get("architectures") or []
    prices: dict[tuple[str, str, bool], list[str]] = {}
    for a in archs:
        pr = (a.get("cost") or {}).get("price") or {}
        if pr:
            key = (str(pr.get("source", "")), str(pr.get("as_of", "")), bool(pr.get("assumed")))
            prices.setdefault(key, []).append(a["id"])
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
    items = [
        ("Calibration version", escape(str(version if version is not None else "none"))),
        ("Calibration date", escape(str((cal.get("date") if isinstance(cal, dict) else None) or "—"))),
        ("Generated", escape(str(r.get("generated_at", "—")))),
    ]
    for k, v in asm.items():
        if k == "calibration":
            continue
        text = v if isinstance(v, str) else json.dumps(v, default=str)
        items.append(
            (
                escape(k.replace("_", " ")),
                f"<code>{escape(text)}</code>" if not isinstance(v, str) else escape(text),
            )
        )
    price_rows = [
        [escape(src), escape(as_of), "assumed" if flag else "quoted", str(len(ids))]
        for (src, as_of, flag), ids in sorted(prices.items())
    ]
    body = (
        ("<ul>" + "".join(f"<li>{escape(x)}</li>" for x in assumed) + "</ul>" if assumed else "")
        + _dl(items)
        + (
            "<h3>Prices as of</h3>" + _table(["source", "as of", "status", "architectures"], price_rows)
            if price_rows
            else ""
        )
    )
    return _section("assumptions", "Assumptions", body)


def _manifests(manifests: dict[str, str] | None, note: str) -> str:
    if not manifests:
        return _section("manifests", "Manifests", f"<p>{escape(note or 'No manifests for this result.')}</p>")
    blocks = [
        f"<details{' open' if i == 0 else ''}><summary><code>{escape(name)}</code></summary>"
        f"<pre><code>{escape(text)}</code></pre></details>"
        for i, (name, text) in enumerate(manifests.items())
    ]
    return _section("manifests", "Manifests", "".join(blocks), escape(note))


def winner_manifests(result: dict[str, Any]) -> tuple[dict[str, str] | None, str]:
    """Karpenter + Kubernetes YAML of the best-ranked EKS architecture, one file per kind, and a note; (None,
    why) when there is none or the deploy package is not available."""
    archs = [a for a in result.get("architectures") or [] if feasible(a)]
    eks = next((a for a in archs if a.get("deployment") == "eks"), None)
    if eks is None:
        return None, "No EKS architecture in the ranking: nothing to deploy on Kubernetes."
    try:
        from sizing.deploy.manifests import render, to_yaml
    except ImportError:
        return None, "Manifests are not available in this build (sizing.deploy is missing)."
    from sizing.errors import SizingError

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
CSS = """
:root{--ink:#23272e;--muted:#6b7280;--line:#e3e6ea;--accent:#0072B2;--good:#1e7d4f;--bad:#b3261e}
*{box-sizing:border-box}body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:#f6f7f9}
header{background:#14202e;color:#fff;padding:20px 32px}header h1{margin:0 0 4px;font-size:22px}header p{margin:0;color:#c5cdd8}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;z-index:2}
nav a{margin-right:16px;color:var(--accent);text-decoration:none;font-weight:500}
main{max-width:1320px;margin:0 auto;padding:8px 32px 48px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 22px;margin:18px 0}
h2{font-size:18px;margin:0 0 8px}h3{font-size:15px;margin:14px 0 6px}.lead{color:var(--muted);margin-top:0}
.answer{border-left:6px solid var(--good);background:#eef7f1;padding:12px 18px;border-radius:6px;margin:18px 0}
.answer.bad{border-color:var(--bad);background:#fbeeee}.answer .big{font-size:18px;margin:4px 0}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:28px}@media(max-width:900px){.cols{grid-template-columns:1fr}}
dl{display:grid;grid-template-columns:minmax(180px,auto) 1fr;gap:4px 14px;margin:6px 0}dt{color:var(--muted)}dd{margin:0}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;margin:6px 0;font-size:13px}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600;position:sticky;top:0}tbody tr:nth-child(even){background:#fafbfc}
table.num td{text-align:right;white-space:nowrap}table.num td:first-child,table.num td:nth-child(2){text-align:left}table.ranked td:nth-child(2){white-space:normal}
table.compact{table-layout:fixed}table.compact td,table.compact th{padding:3px 2px;font-size:11.5px;text-align:right}table.compact td:first-child,table.compact th:first-child{width:64px;text-align:left}
small{color:var(--muted);font-weight:400}.meas{font-weight:600;color:#0b5394}.meas:empty{display:none}.miss{color:var(--bad);font-weight:600}.na{color:#b0b6be}
.tag{background:#fff4d6;border:1px solid #e6c66b;border-radius:4px;padding:0 4px;font-size:11px}
figure.chart{margin:14px 0}figure.chart svg{width:100%;height:auto;max-width:900px;display:block;background:#fff}
figcaption{color:var(--muted);font-size:12.5px;max-width:900px}
details{margin:6px 0}summary{cursor:pointer}pre{background:#0f1720;color:#e6edf3;padding:12px;border-radius:6px;overflow-x:auto;font-size:12px}
.warn{color:var(--bad)}.downloads{font-size:13px;color:var(--muted)}.downloads a{color:var(--accent)}code{font-size:12.5px}
@media print{nav{display:none}section{break-inside:avoid}}
"""

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


#: Points the result.json link at a blob of the embedded result (no network, no library).
DOWNLOAD_JSON_JS = (
    "(function(){var a=document.getElementById('download-json'),d=document.getElementById('sizing-result');"
    "if(a&&d&&window.Blob&&window.URL){a.href=URL.createObjectURL(new Blob([d.textContent],"
    "{type:'application/json'}));}})();"
)


def _embedded_json(result: dict[str, Any]) -> str:
    """The result as JSON safe inside a <script> element: <, > and & as \\u escapes (the same JSON string)."""
    text = json.dumps(result, default=str, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


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
    w = result.get("workload") or {}
    kind = (
        "run"
        if measurements or any(a.get("measured") for a in result.get("architectures") or [])
        else "estimate"
    )
    title = f"Sizing report — {w.get('name') or 'workload'}"
    archs = result.get("architectures") or []
    model = w.get("model") or (archs[0].get("model") if archs else None)
    bits = [str(model) if model else "", f"run {result['run_id']}" if result.get("run_id") else kind]
    if result.get("generated_at"):
        bits.append(f"generated {result['generated_at']}")
    subtitle = " · ".join(b for b in bits if b)
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
    nav = "".join(f'<a href="#{sid}">{label}</a>' for sid, label in NAV)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>"
        f"<nav>{nav}</nav><main>{''.join(sections)}</main>"
        f'<script type="application/json" id="sizing-result">{_embedded_json(result)}</script>'
        f"<script>{DOWNLOAD_JSON_JS}</script>"
        "</body></html>\n"
    )


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
