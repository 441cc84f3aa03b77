"""POST /estimates: the synchronous answer (steps 1-2 of the flow: model the workload, estimate candidates)."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.metrics import MetricUnit

from sizing.answer import answer_rows
from sizing.base.observability import metrics, tracer
from sizing.outcome import impossible_constraints
from sizing.plan.traceeffect import compare, poisson_twin, with_trace_effect
from sizing.results import EstimateResult
from sizing.service.api import deps
from sizing.service.api.models import EXAMPLE_SPEC, SPEC_DESCRIPTION
from sizing.service.api.responses import ok
from sizing.workload.parse import parse_spec

router = Router()

#: Ranked architectures returned at most: a page a person can read, and a bounded response size.
MAX_TOP = 50


@router.post(
    "/estimates",
    summary="Estimate the architectures for a workload",
    description="Models the workload, estimates every candidate architecture and ranks those that meet the SLOs"
    " by cost, each with the serving configuration it deploys.",
    tags=["estimates"],
    responses=ok(
        EstimateResult,
        "the ranked architectures (`infeasible` says why when none meets the SLOs) and `rows`, the same"
        " architectures as the table, the report and Slack show them (kind, tier, quotas, Region and availability,"
        " basis)",
    ),
)
@tracer.capture_method
def post_estimate(
    spec: Annotated[dict[str, Any], Body(description=SPEC_DESCRIPTION, examples=[EXAMPLE_SPEC])],
    top: Annotated[int | None, Query(ge=1, le=MAX_TOP, description="ranked architectures to return")] = None,
) -> EstimateResult:
    from sizing.plan.search import estimate

    catalog = deps.catalog()  # the shipped models and those released since
    workload = parse_spec(spec, catalog=catalog)
    result = estimate(workload, top=top, catalog=catalog, slo_cost=True)
    refusal = impossible_constraints(result, workload)
    if refusal is not None:
        raise refusal  # 422: the constraints leave nothing to estimate
    twin = poisson_twin(workload)
    if twin is not None and result.workload.trace is not None:
        # a replayed trace: what it changed against Poisson arrivals at the same means
        result = with_trace_effect(result, compare(result, estimate(twin, top=top, catalog=catalog)))
    metrics.add_metric(name="EstimatesServed", unit=MetricUnit.Count, value=1)
    # the rows every output shows (kind, tier, quotas, Region, basis): the JSON carries them too
    return result.model_copy(update={"rows": answer_rows(result)})
