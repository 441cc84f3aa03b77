"""Stored, older or hand-written answers, read once where they enter: the report, Slack and the stored items read
results written by earlier releases, by a run's merge step, or by a person. `upgrade_result` fills what an older
result lacks with the explicit unknowns the models declare (no latency figure: `Percentiles` of None; optional
blocks: None; a null where the model has a default: that default; an older release's partial serving settings:
no serving configuration; an architecture that names no model: the workload's) and validates it into
`EstimateResult` once; a result that cannot be upgraded (an architecture
without its id, its cost or its deployment) is an `InvalidInput` naming each field, never a stack trace.

A run's result is an estimate result inside the run's own envelope (`run_id`, `origin`, `twins`, `ranking`,
`calibration_rows`, ...): the envelope is not part of the estimate and is left to the caller (`twin_run` reads
the one fact of it the rows need)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.base.serving_config import ServingConfig
from sizing.base.vocabulary import TWIN
from sizing.results import Architecture, EstimateResult
from sizing.results.blocks import Assumptions, TraceFigures, WorkloadFigures

#: The latency blocks an architecture's `predicted` holds; an older or incomplete one lacks some (unknown figures).
PREDICTED_METRICS = ("ttft_ms", "tpot_ms", "e2e_s")


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


#: The architecture's fields with a default other than None: null in a stored result reads as that default.
_DEFAULTED = {
    name
    for name, field in Architecture.model_fields.items()
    if not field.is_required() and (field.default is not None or field.default_factory is not None)
}


def _architecture(doc: Any, model: Any) -> Any:
    """An architecture's JSON with the blocks older results lack filled as unknown (validated by the model), and
    the model it serves, where it does not say, the workload's (`model`)."""
    if not isinstance(doc, dict):
        return doc
    if doc.get("model") is None and isinstance(model, str):
        doc = {**doc, "model": model}
    # null where the model declares a default (capacity, invocation, lists): the default, as when the key is absent
    doc = {k: v for k, v in doc.items() if v is not None or k not in _DEFAULTED}
    predicted = doc.get("predicted")
    if predicted is None or isinstance(predicted, dict):
        doc = {**doc, "predicted": {m: _dict(predicted).get(m) or {} for m in PREDICTED_METRICS}}
    serving = doc.get("serving")
    if isinstance(serving, dict) and not _is_serving_config(serving):
        # an older release stated a few engine settings, not the whole configuration: the configuration is unknown
        doc = {**doc, "serving": None}
    measured = doc.get("measured")
    if isinstance(measured, dict):
        served = measured.get("serving")
        if isinstance(served, dict) and not _is_serving_config(served):
            # a load test recorded before its serving configuration was whole: which configuration is unknown
            doc = {**doc, "measured": {**measured, "serving": None}}
    return doc


def _is_serving_config(doc: dict[str, Any]) -> bool:
    try:
        ServingConfig.model_validate(doc)
    except ValidationError:
        return False
    return True


def upgrade_result(doc: Any, what: str = "result") -> EstimateResult:
    """The typed estimate result of a stored, older, run or hand-written result's JSON (the estimate's own keys;
    a run's envelope is left out). Raises InvalidInput, one problem per field (`result.architectures.0.id`), when
    it cannot be read as one."""
    if isinstance(doc, EstimateResult):
        return doc
    if not isinstance(doc, dict):
        raise InvalidInput(f"a {what} must be an object (the planner's or the run's JSON)")
    own = {k: v for k, v in doc.items() if k in EstimateResult.model_fields}
    for key in ("architectures", "managed_options"):
        if isinstance(own.get(key), list):
            own[key] = [_architecture(a, _dict(own.get("workload")).get("model")) for a in own[key]]
    for key in ("architectures", "rejected", "why_not_cheaper", "managed_options", "rows", "slo_costs"):
        if key in own and own[key] is None:
            own[key] = []
    if own.get("workload") is None:
        own["workload"] = {}
    elif isinstance(own["workload"], dict):
        # figures an earlier release stated about the workload that the result no longer names are not read
        own["workload"] = {k: v for k, v in own["workload"].items() if k in WorkloadFigures.model_fields}
        trace = own["workload"].get("trace")
        if isinstance(trace, dict):
            own["workload"]["trace"] = {k: v for k, v in trace.items() if k in TraceFigures.model_fields}
    if own.get("assumptions") is None:
        own["assumptions"] = {}
    elif isinstance(own["assumptions"], dict):
        # an assumption an earlier release stated that the result no longer names is not read
        own["assumptions"] = {k: v for k, v in own["assumptions"].items() if k in Assumptions.model_fields}
    try:
        return EstimateResult.model_validate(own)
    except ValidationError as exc:
        raise InvalidInput(
            f"the {what} cannot be read", problems_from_pydantic(exc, what, EstimateResult)
        ) from None


def twin_run(doc: dict[str, Any]) -> bool:
    """The run says it load-tested local twins (figures recorded before `measured.origin` named none)."""
    if doc.get("origin") == TWIN or doc.get("twins") is True:
        return True
    rows = doc.get("calibration_rows") or _dict(doc.get("ranking")).get("calibration_rows")
    return isinstance(rows, list) and any(_dict(x).get("origin") == TWIN for x in rows)


__all__ = ["twin_run", "upgrade_result"]
