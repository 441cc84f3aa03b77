"""What a report reads, checked before rendering: the result is upgraded once into the typed `EstimateResult`
(`sizing.upgrade`: an older result's missing figures read as unknown), and the load-test step records plotted
beside it are checked here; a malformed input is a clear InvalidInput naming the field, never a stack trace from
deep inside the page builder.

The step records are the load test's own (extended compatibly): unknown keys are ignored, and what the report
reads but does not require is read defensively by the page builder."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.base.strict import Lenient
from sizing.results import EstimateResult
from sizing.upgrade import upgrade_result


class MeasurementIn(Lenient):
    candidate_id: str | None = None
    record: dict[str, Any] | None = None
    requests_per_s: float | None = None


def check_result(result: Any, measurements: Any = None) -> EstimateResult:
    """The typed result `result` reports (InvalidInput, one problem per bad field, unless it can be reported)."""
    if not isinstance(result, dict):
        raise InvalidInput("a report needs a result object (the planner's or the run's JSON)")
    typed = upgrade_result(result, "result")
    if measurements is None:
        return typed
    if not isinstance(measurements, list):
        raise InvalidInput("measurements must be a list of load-test step records")
    for i, m in enumerate(measurements):
        try:
            MeasurementIn.model_validate(m)
        except ValidationError as exc:
            raise InvalidInput(
                "a measurement cannot be reported", problems_from_pydantic(exc, f"measurements.{i}")
            ) from None
    return typed
