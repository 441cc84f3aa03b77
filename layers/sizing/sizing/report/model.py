"""What a report needs from a result, checked before rendering: a malformed result is a clear InvalidInput naming
the field, never a stack trace from deep inside the page builder.

Only the report's own needs are checked and unknown keys are ignored (not forbidden): the result contract is
extended compatibly by the planner and the run's merge step, and a report must keep rendering when they add a
field. Everything the report reads but does not require is read defensively by the page builder."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.base.strict import Lenient


class ArchitectureIn(Lenient):
    id: str
    rank: int | None = None
    deployment: str | None = None
    predicted: dict[str, dict[str, float | None] | None] | None = None
    measured: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None


class RejectedIn(Lenient):
    id: str | None = None
    kind: str | None = None
    reason: str | None = None


class MeasurementIn(Lenient):
    candidate_id: str | None = None
    record: dict[str, Any] | None = None
    requests_per_s: float | None = None


class ResultIn(Lenient):
    workload: dict[str, Any] | None = None
    architectures: list[ArchitectureIn] | None = None
    rejected: list[RejectedIn] | None = None
    assumptions: dict[str, Any] | None = None


def check_result(result: Any, measurements: Any = None) -> None:
    """Raise InvalidInput (with one problem per bad field) unless `result` can be reported."""
    if not isinstance(result, dict):
        raise InvalidInput("a report needs a result object (the planner's or the run's JSON)")
    try:
        ResultIn.model_validate(result)
    except ValidationError as exc:
        raise InvalidInput("the result cannot be reported", problems_from_pydantic(exc, "result")) from None
    if measurements is None:
        return
    if not isinstance(measurements, list):
        raise InvalidInput("measurements must be a list of load-test step records")
    for i, m in enumerate(measurements):
        try:
            MeasurementIn.model_validate(m)
        except ValidationError as exc:
            raise InvalidInput(
                "a measurement cannot be reported", problems_from_pydantic(exc, f"measurements.{i}")
            ) from None
