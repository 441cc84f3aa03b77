"""What CollectAndRank does for the learning loop: store the run's measured levels, flag drift, and refit.

On AWS the refit is the calibration function, triggered by the run's `SizingRunCompleted` event when
`ranking.learning.measured_levels` > 0 (template.yaml); here it is only "queued". On the embedded default
(`SIZING_BACKEND=local`) it runs in-process against the embedded S3, right after the levels are stored.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field

from sizing.base.strict import Lenient
from sizing.learn import drift
from sizing.learn.profiles import LOCAL_BUCKET, ProfileStore, active, configured_store
from sizing.learn.refit import outcome_line, run_refit

log = logging.getLogger("sizing.learn")

QUEUED = "calibration refit queued"


class RefusedLevel(Lenient):
    """A measured level the loop did not store, and why (`sizing.learn.levels.Refused` as the run states it)."""

    candidate_id: str | None = None
    level: int | None = None
    reason: str | None = None


class RefitOutcome(Lenient):
    """The refit's outcome as the run states it: where it ran (or is queued), its status, the profile version and
    the line the report and Slack show, or its error."""

    where: str | None = None
    status: str | None = None
    version: str | None = None
    refit_seconds: float | None = None
    reasons: list[str] = Field(default_factory=list)
    detail: str | None = None
    line: str | None = None
    error: str | None = None


class RunLearning(Lenient):
    """The run's `learning` block as its readers read it (`after_collect` writes it): levels stored (real and
    twin), levels refused, drift flags and their sentences, the refit's outcome, or why nothing was learned."""

    measured_levels: int = 0
    #: levels whose engine steps were kept for the refit's step fit (closed loops and the capacity search's)
    step_levels: int = 0
    twin_levels: int = 0
    refused: list[RefusedLevel] = Field(default_factory=list)
    #: the drift flags (`sizing.learn.drift.flags`), each stated in `drift_lines`
    drift: list[dict[str, Any]] = Field(default_factory=list)
    drift_lines: list[str] = Field(default_factory=list)
    refit: RefitOutcome | None = None
    error: str | None = None


def after_collect(
    *,
    store: Any,
    backend: str,
    architectures: list[dict[str, Any]],
    measured: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    run_id: str,
    origin: str,
    wm: Any,
    catalog: Any,
) -> dict[str, Any]:
    """The run's `learning` block (it rides in the ranking and the completion event): levels stored (real and
    twin), levels refused and why, drift flags and their sentences, and the refit's outcome (or "queued")."""
    from sizing.learn.levels import LevelStore, levels_from_run, steps_from_run

    kind: Literal["endpoint", "twin"] = "twin" if origin == "twin" else "endpoint"
    levels, refused = levels_from_run(architectures, measured, steps, run_id, kind, wm, catalog)
    LevelStore(store).put(levels)
    real = [lv for lv in levels if lv.origin == "endpoint"]
    # a real server's engine steps, for the refit's step fit (a twin's are its own model's: never learnt from)
    engine_steps = steps_from_run(architectures, real, steps) if real else []
    LevelStore(store).put_steps(engine_steps)
    out: dict[str, Any] = {
        "measured_levels": len(real),
        "step_levels": len(engine_steps),
        "twin_levels": len(levels) - len(real),
        "refused": [r.model_dump() for r in refused],
        "drift": [],
        "drift_lines": [],
        "refit": None,
    }
    if not real:
        return out
    flagged = drift.flags(real, active(), catalog)
    refit_words = QUEUED
    if backend == "local":
        outcome = refit_in_process(store)
        out["refit"] = outcome
        refit_words = outcome.get("line") or QUEUED
    else:
        out["refit"] = {"where": "calibration function", "status": "queued"}
    out["drift"] = flagged
    out["drift_lines"] = drift.lines(flagged, refit_words)
    return out


def refit_in_process(store: Any) -> dict[str, Any]:
    """The embedded default's refit: every real level of the table, the embedded S3's profiles. A failure is
    reported (the adopted profile is untouched), never raised into the run."""
    from sizing.learn.levels import LevelStore

    try:
        profiles = configured_store() or ProfileStore(LOCAL_BUCKET)
        profiles.ensure_bucket()
        data = run_refit(LevelStore(store), profiles, trigger="in-process")
    except Exception as exc:  # the run's ranking stands; the refit's failure is stated beside it
        log.error("calibration refit failed: %s: %s", type(exc).__name__, exc)
        return {"where": "in-process", "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    short = "adopted" if data["status"] == "adopted" else "kept as a candidate"
    return {
        "where": "in-process",
        "status": data["status"],
        "version": data["version"],
        "refit_seconds": data["refit_seconds"],
        "reasons": data["decision"]["reasons"],
        "detail": outcome_line(data),
        "line": f"calibration refit {data['version']} {short}",
    }
