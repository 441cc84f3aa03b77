"""Calibration function: on `SizingRunCompleted` of a run with real measurements, refit the team's profile.

The rule in template.yaml delivers only completions whose `ranking.learning.measured_levels` > 0. The refit
(`sizing.learn.refit.run_refit`) reads every real measured level from the table, fits the small correction on
top of the shipped profile, stores the version in S3 with its cross-validation tables and adopts it when it
improves the team's error without worsening the reference rows' by more than a point. A Lambda function, not a
Fargate task: the refit is closed-form (benchmarks/refit.py: well under a second with the reference rows and
1,000 measured levels). A failure raises (EventBridge retries); the adopted profile is only ever changed by the
refit's last, conditional write, so a failed refit leaves it untouched."""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.observability import logger, metrics, tracer
from sizing.orchestrate.events import RunCompletedDetail


class CalibrationSettings(BaseModel):
    """The function's environment (template.yaml)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    table_name: str = Field(alias="TABLE_NAME", min_length=1)
    bucket: str = Field(alias="CALIBRATION_BUCKET", min_length=3)
    prefix: str = Field(default="calibration/", alias="CALIBRATION_PREFIX")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CalibrationSettings:
        env = os.environ if environ is None else environ
        names = [f.alias for f in cls.model_fields.values() if f.alias]
        return cls.model_validate({n: env[n] for n in names if env.get(n) not in (None, "")})


class RunCompleted(EventBridgeModel):
    """The EventBridge event that triggers a refit: Powertools' envelope with the run's detail typed."""

    #: EventBridge always sends it; moto's bus (the embedded default, the tests) leaves it out, and it is not read
    account: str | None = None  # type: ignore[assignment]
    detail: RunCompletedDetail


def parse_run_completed(event: Any) -> RunCompleted:
    """The delivered event, or InvalidInput naming the envelope or detail field that is wrong."""
    if not isinstance(event, dict):
        raise InvalidInput("not an EventBridge event", [Problem("event", "must be an object")])
    try:
        return RunCompleted.model_validate(event)
    except ValidationError as exc:
        raise InvalidInput(
            "not a SizingRunCompleted event", problems_from_pydantic(exc, quote=True)
        ) from None


@functools.cache
def services() -> tuple[Any, Any]:
    """The level store and the profile store, built once per container."""
    from sizing.learn.levels import LevelStore
    from sizing.learn.profiles import ProfileStore
    from sizing.store import SizingStore

    s = CalibrationSettings.from_env()
    return LevelStore(SizingStore(s.table_name)), ProfileStore(s.bucket, s.prefix)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from sizing.learn.refit import outcome_line, run_refit

    run_id = parse_run_completed(event).detail.run_id
    levels, profiles = services()
    data = run_refit(levels, profiles, trigger=f"run {run_id}")
    adopted = data["status"] == "adopted"
    metrics.add_metric(name="CalibrationRefits", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="CalibrationAdopted", unit=MetricUnit.Count, value=int(adopted))
    metrics.add_metric(name="CalibrationRefitSeconds", unit=MetricUnit.Seconds, value=data["refit_seconds"])
    logger.info(outcome_line(data), extra={"run_id": run_id, "version": data["version"], "adopted": adopted})
    return {
        "run_id": run_id,
        "version": data["version"],
        "status": data["status"],
        "reasons": data["decision"]["reasons"],
        "refit_seconds": data["refit_seconds"],
    }
