"""The HTML report of an estimate or a run: one self-contained page (inline CSS and SVG, no external asset).

Python computes what the page says (each section's values, below); the Jinja2 templates in `templates/` hold the
markup (`report.html` the layout, one template per section, `macros.html` the shared pieces) and escape every text
(autoescape). The SVG charts and the download links' data URIs are the only markup passed in as such.

Every figure the page prints from the result is wrapped as `<span class="n" data-path="architectures.0.cost.
usd_per_month" data-value="52341.86">$52,342</span>`, so a test (or a reader's script) can check the page says
exactly what the JSON says. The result itself is embedded as `<script type="application/json" id="sizing-result">`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment

from sizing.answer import region_line
from sizing.base.errors import SizingError
from sizing.deploy.manifests import render, to_yaml
from sizing.report.curves import latency_curves
from sizing.report.model import check_result
from sizing.report.page_answer import (
    _answer,
)
from sizing.report.page_base import (
    Num,
    Page,
    Section,
    _section,
    count,
    feasible,
    fine_share,
    lookup,
    measured_steps,
    ms,
    pct,
    plain,
    rps,
    sec,
    share,
    short_label,
    tenths,
    token_count,
    two,
    usd,
    was_measured,
)
from sizing.report.page_cost import (
    _pareto,
    _schedule_and_cost,
)
from sizing.report.page_latency import (
    _latency,
)
from sizing.report.page_ranked import (
    _ranked,
    _serving,
)
from sizing.report.page_rejected import (
    _assumptions,
    _learning,
    _rejected,
)
from sizing.report.page_workload import (
    _workload,
)
from sizing.report.templating import make_environment
from sizing.results import EstimateResult
from sizing.workload.derived import WorkloadModel


def _manifests(manifests: dict[str, str] | None, note: str) -> Section:
    return _section("manifests.html", files=list((manifests or {}).items()), note=note)


def winner_manifests(result: EstimateResult, run_id: str | None = None) -> tuple[dict[str, str] | None, str]:
    """Karpenter + Kubernetes YAML of the best-ranked EKS architecture, one file per kind, and a note; (None,
    why) when there is none. `run_id`: the run's, when the result is a run's."""
    archs = [a for a in result.architectures if feasible(a)]
    eks = next((a for a in archs if a.deployment == "eks"), None)
    if eks is None:
        return None, "No EKS architecture in the ranking: nothing to deploy on Kubernetes."
    try:
        objs = render(eks, str(run_id or "estimate"))
    except (SizingError, ValueError, KeyError) as exc:
        return None, f"Could not render the manifests of {eks.id}: {exc}"
    out = {f"{o['kind'].lower()}.yaml": to_yaml([o]) for o in objs}
    who = "the chosen architecture" if eks is archs[0] else f"the best-ranked EKS architecture ({eks.id})"
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
    pg = Page(result, check_result(result, measurements))
    measured = measured_steps(measurements or [], pg.typed)
    always = list(measured) + [a.id for a in pg.typed.architectures if was_measured(a)]
    curve_list = latency_curves(pg.typed, workload, always=always, seed=seed) if curves else []
    if manifests is None:
        manifests, note = winner_manifests(pg.typed, pg.run.run_id)
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
    title, subtitle = _heading(pg.typed, pg.run.run_id, measured=bool(measurements))
    where = region_line(pg.typed) or ""
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


def _heading(result: EstimateResult, run_id: str | None, *, measured: bool) -> tuple[str, str]:
    """The page's title (the workload) and the line under it (model, run or estimate, when generated)."""
    w = result.workload
    archs = result.architectures
    kind = "run" if measured or any(was_measured(a) for a in archs) else "estimate"
    model = w.model or (archs[0].model if archs else None)
    bits = [str(model) if model else "", f"run {run_id}" if run_id else kind]
    if result.generated_at:
        bits.append(f"generated {result.generated_at}")
    return f"Sizing report — {w.name or 'workload'}", " · ".join(b for b in bits if b)


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


__all__ = ["NAV", "lookup", "render_report", "short_label", "winner_manifests", "write_report"]
