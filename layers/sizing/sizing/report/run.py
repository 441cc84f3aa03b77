"""Reports of measured runs: turn a run's payload (the run record with its spec, the merged architectures and
the stored load-test measurements) into what `render_report` takes, workload figures included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sizing.base.errors import SizingError
from sizing.report.page import render_report
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.parse import parse_spec


def run_result(payload: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], WorkloadModel | None]:
    """(result, measurements, workload) of a run payload `{run, architectures, measurements, ranking?}`.

    The workload block is derived again from the run's spec (the run record keeps the spec, not the figures),
    so the report shows the business terms, the SLO lines and the predicted curves as an estimate's does."""
    run = payload.get("run") or {}
    ranking = payload.get("ranking") or {}
    wm: WorkloadModel | None = None
    workload = dict(ranking.get("workload") or {})
    if run.get("spec"):
        try:
            wm = resolve(parse_spec(run["spec"]))
            workload = workload or wm.derived()
        except SizingError:
            wm = None  # a spec the catalog no longer knows: the report still shows the measured figures
    result: dict[str, Any] = {
        "workload": workload,
        "architectures": list(payload.get("architectures") or []),
        "rejected": list(payload.get("rejected") or ranking.get("rejected") or []),
        "assumptions": dict(payload.get("assumptions") or ranking.get("assumptions") or {}),
    }
    if run.get("run_id"):
        result["run_id"] = run["run_id"]
    if run.get("updated_at") or run.get("created_at"):
        result["generated_at"] = run.get("updated_at") or run.get("created_at")
    failed = ranking.get("failed") or []
    if failed:
        result["failed"] = failed
    if ranking.get("learning"):
        # the learning loop's part: levels stored, refused, drift flags, the refit (sizing.learn.loop)
        result["learning"] = ranking["learning"]
    return result, list(payload.get("measurements") or []), wm


def render_run_report(payload: dict[str, Any], *, manifests: dict[str, str] | None = None) -> str:
    """The HTML report of a run payload (see `run_result`)."""
    result, measurements, wm = run_result(payload)
    return render_report(result, measurements=measurements, manifests=manifests, workload=wm)


def write_run_report(
    payload: dict[str, Any], path: str | Path, *, manifests: dict[str, str] | None = None
) -> Path:
    """Write the run's report to `path` (folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_run_report(payload, manifests=manifests), encoding="utf-8")
    return out
