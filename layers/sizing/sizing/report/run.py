"""Reports of measured runs: turn a run's payload (the run record with its spec, the merged architectures and
the stored load-test measurements) into what `render_report` takes, workload figures included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from sizing.base.errors import SizingError
from sizing.base.strict import Lenient
from sizing.report.page import render_report
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.parse import parse_spec


class _RunRecord(Lenient):
    """What the report reads of the run record: its id, its spec and when it was last changed."""

    run_id: str | None = None
    spec: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None


class _Ranking(Lenient):
    """What the report reads of the run's stored ranking (`sizing.orchestrate.contracts.Ranking`)."""

    workload: dict[str, Any] | None = None
    rejected: list[Any] = Field(default_factory=list)
    assumptions: dict[str, Any] | None = None
    failed: list[Any] = Field(default_factory=list)
    learning: dict[str, Any] | None = None


class _RunPayload(Lenient):
    """A run payload `{run, architectures, measurements, ranking?}` as the API's report route and `sizing run`
    assemble it; each part as stored (the estimate's parts are read, typed, where the page takes them)."""

    run: _RunRecord = Field(default_factory=_RunRecord)
    ranking: _Ranking = Field(default_factory=_Ranking)
    architectures: list[Any] = Field(default_factory=list)
    measurements: list[dict[str, Any]] = Field(default_factory=list)
    rejected: list[Any] = Field(default_factory=list)
    assumptions: dict[str, Any] | None = None

    @field_validator("run", "ranking", "architectures", "measurements", "rejected", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return {} if info.field_name in ("run", "ranking") else []
        return value


def run_result(payload: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], WorkloadModel | None]:
    """(result, measurements, workload) of a run payload `{run, architectures, measurements, ranking?}`.

    The workload block is derived again from the run's spec (the run record keeps the spec, not the figures),
    so the report shows the business terms, the SLO lines and the predicted curves as an estimate's does."""
    p = _RunPayload.model_validate(payload)
    run, ranking = p.run, p.ranking
    wm: WorkloadModel | None = None
    workload = dict(ranking.workload or {})
    if run.spec:
        try:
            wm = resolve(parse_spec(run.spec))
            workload = workload or wm.derived()
        except SizingError:
            wm = None  # a spec the catalog no longer knows: the report still shows the measured figures
    result: dict[str, Any] = {
        "workload": workload,
        "architectures": list(p.architectures),
        "rejected": list(p.rejected or ranking.rejected),
        "assumptions": dict(p.assumptions or ranking.assumptions or {}),
    }
    if run.run_id:
        result["run_id"] = run.run_id
    if run.updated_at or run.created_at:
        result["generated_at"] = run.updated_at or run.created_at
    if ranking.failed:
        result["failed"] = ranking.failed
    if ranking.learning:
        # the learning loop's part: levels stored, refused, drift flags, the refit (sizing.learn.loop)
        result["learning"] = ranking.learning
    return result, list(p.measurements), wm


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
