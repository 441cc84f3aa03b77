"""/runs: start measured sizing runs (steps 3-4, a state machine execution), follow and cancel them."""

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.metrics import MetricUnit

from sizing.base import table
from sizing.base.errors import Conflict, InvalidInput, NotFound, Problem
from sizing.base.observability import logger, metrics, tracer
from sizing.service.api import deps, paging
from sizing.service.api.models import (
    Links,
    ReportLink,
    RunArchitectures,
    RunCreated,
    RunOut,
    RunPage,
    RunRequest,
)
from sizing.service.api.paging import CURSOR_PATTERN, MAX_TOKEN_CHARS
from sizing.service.api.responses import ERRORS, ok
from sizing.store import RunStatus
from sizing.store.items import RUNS_INDEX_PK
from sizing.store.repository import DEFAULT_PAGE, MAX_PAGE

router = Router()

#: Run ids are uuid4 hex (32 characters); a generous bound still rejects junk before it reaches DynamoDB.
RUN_ID_PATTERN = r"^[A-Za-z0-9_-]{1,80}$"
#: Idempotency keys: UUIDs or similar client-made tokens (the IETF draft suggests UUIDs); 255 bounds the key.
IDEMPOTENCY_KEY_MAX = 255

RunId = Annotated[str, Path(pattern=RUN_ID_PATTERN, description="the run id from POST /runs")]


def _created(request: RunRequest) -> RunCreated:
    run = deps.runs().create_run(
        request.spec, top_k=request.top_k, budget_usd=request.budget_usd, source="api"
    )
    logger.append_keys(run_id=run.run_id)
    metrics.add_metric(name="RunsStarted", unit=MetricUnit.Count, value=1)
    return RunCreated(
        run_id=run.run_id, status=run.status, created_at=run.created_at, links=Links.for_run(run.run_id)
    )


def _body_of(request: RunRequest) -> dict[str, Any]:
    """The request as JSON data: what the idempotency record is keyed on (without a key) and checked against."""
    return dict(json.loads(request.model_dump_json()))


def _create_once(request: RunRequest, key: str | None) -> RunCreated:
    """Create the run at most once per Idempotency-Key (or per identical body when no key is given); a retry
    answers what the first request answered."""
    # Powertools Idempotency (boto3 underneath) is imported here, not at module level: POST /estimates and the
    # cold start should not pay for it
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )
    from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

    config = IdempotencyConfig(
        event_key_jmespath="key || body",
        payload_validation_jmespath="body",
        expires_after_seconds=deps.settings().idempotency_ttl_s,
    )
    if router.lambda_context is not None:
        config.register_lambda_context(router.lambda_context)

    @idempotent_function(
        data_keyword_argument="payload",
        persistence_store=deps.idempotency_layer(),
        config=config,
        output_serializer=PydanticSerializer(model=RunCreated),
    )
    def create(payload: dict[str, Any]) -> RunCreated:
        return _created(RunRequest.model_validate(payload["body"]))

    payload = {"key": key, "body": _body_of(request)}
    # the library's two refusals, in the domain's terms (mapped to HTTP with every other domain error)
    try:
        result: RunCreated = create(payload=payload)
        if not deps.store().has_run(result.run_id):
            # the run the first request created was deleted since (DELETE /runs/{id}): an answer naming it would
            # send the client to a 404, so the stored answer is forgotten and this request starts a new run
            deps.idempotency_layer().delete_record(
                data=payload, exception=NotFound(f"run {result.run_id} was deleted")
            )
            result = create(payload=payload)
    except IdempotencyAlreadyInProgressError:
        raise Conflict(
            "a request with this Idempotency-Key is still being processed; retry in a moment",
            [Problem("Idempotency-Key", "in progress")],
            code="conflict",
        ) from None
    except IdempotencyValidationError:
        raise InvalidInput(
            "this Idempotency-Key was already used with a different request body",
            [Problem("Idempotency-Key", "reused with a different body")],
        ) from None
    return result


@router.post(
    "/runs",
    summary="Start a measured sizing run",
    description="Validates the workload, stores the run and starts its state machine execution. Answers 202 with"
    " the run id and links. Retries with the same Idempotency-Key (or, without one, the same body) answer the"
    " first response instead of starting another run.",
    tags=["runs"],
    responses={
        202: {"description": "run accepted", "content": {"application/json": {"model": RunCreated}}},
        **ERRORS,
    },
)
@tracer.capture_method
def post_run(
    request: RunRequest,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=IDEMPOTENCY_KEY_MAX)
    ] = None,
) -> Response[RunCreated]:
    created = _create_once(request, idempotency_key)
    return Response(
        202,
        content_types.APPLICATION_JSON,
        created,
        headers={"Location": created.links.self_},
    )


@router.get(
    "/runs", summary="List runs, newest first", tags=["runs"], responses=ok(RunPage, "a page of runs")
)
@tracer.capture_method
def list_runs(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="runs per page")] = DEFAULT_PAGE,
    token: Annotated[
        str | None,
        Query(
            max_length=MAX_TOKEN_CHARS,
            description="next_token of the previous page: `{created_at}~{run_id}` of its last run",
            json_schema_extra={"pattern": CURSOR_PATTERN},
        ),
    ] = None,
    model: Annotated[
        str | None, Query(max_length=256, description="only runs of this model (catalog id)")
    ] = None,
    status: Annotated[RunStatus | None, Query(description="only runs in this status")] = None,
) -> RunPage:
    model_id = _catalog_id(model) if model else None
    after = paging.to_store(token, RUNS_INDEX_PK, table.RUN_PREFIX, table.RUN_SK)
    runs, next_token = deps.store().list_runs(limit=limit, token=after, model=model_id, status=status)
    return RunPage(runs=[RunOut.of(r) for r in runs], next_token=paging.from_store(next_token, RUNS_INDEX_PK))


def _catalog_id(name: str) -> str:
    """Runs store the catalog id of their model; accept any alias of it in the filter."""
    try:
        return deps.runs().catalog.model(name).id
    except NotFound:
        return name  # no run can match; the page is simply empty


@router.get(
    "/runs/<run_id>",
    summary="One run",
    tags=["runs"],
    responses=ok(RunOut, "the run, its status and (under `sizing serve`) its execution's progress"),
)
@tracer.capture_method
def get_run(run_id: RunId) -> RunOut:
    return RunOut.of(deps.store().get_run(run_id), deps.progress(run_id))


@router.get(
    "/runs/<run_id>/architectures",
    summary="A run's ranked architectures",
    tags=["runs"],
    responses=ok(RunArchitectures, "the run's architectures, measured beside estimated once ranked"),
)
@tracer.capture_method
def get_run_architectures(run_id: RunId) -> RunArchitectures:
    store = deps.store()
    run = store.get_run(run_id)
    return RunArchitectures(
        run_id=run.run_id, status=run.status, architectures=store.get_architectures(run_id)
    )


#: Lifetime of a presigned report link: long enough to open and share in a meeting, short enough not to leak.
REPORT_LINK_S = 3600


@router.get(
    "/runs/<run_id>/report",
    summary="A run's HTML report",
    description="The self-contained HTML report (ranking with measured beside predicted, curves, costs,"
    " manifests). With `presign=true` and a reports bucket configured, the report is stored in S3 and the answer"
    " is a time-limited link instead.",
    tags=["runs"],
    responses={
        200: {
            "description": "the report, or a link to it",
            "content": {
                "text/html": {"schema": {"type": "string"}},
                "application/json": {"model": ReportLink},
            },
        },
        **ERRORS,
    },
)
@tracer.capture_method
def get_run_report(
    run_id: RunId,
    presign: Annotated[bool, Query(description="store the report in S3 and answer a presigned link")] = False,
) -> Response[str]:
    from sizing.report import render_run_report

    store = deps.store()
    run = store.get_run(run_id)
    payload = {
        "run": run.model_dump(mode="json"),
        "architectures": store.get_architectures(run_id),
        "measurements": [m.model_dump(mode="json") for m in store.list_measurements(run_id)],
        "ranking": store.get_ranking(run_id),
    }
    html = render_run_report(payload)
    if not presign:
        return Response(200, "text/html; charset=utf-8", html)
    bucket = deps.settings().report_bucket
    if not bucket:
        raise InvalidInput(
            "presigned report links need a reports bucket (REPORT_BUCKET), which this stage does not have",
            [Problem("presign", "not available here; omit it to get the HTML")],
        )
    from sizing.report import run_result
    from sizing.report.storage import ReportStore

    reports = ReportStore(bucket)
    result, measurements, _ = run_result(payload)
    reports.publish(run_id, result, measurements=measurements, html=html)
    link = ReportLink(url=reports.presigned_url(run_id, expires_s=REPORT_LINK_S), expires_in_s=REPORT_LINK_S)
    return Response(200, content_types.APPLICATION_JSON, link.model_dump_json())


#: When DELETE stopped meaning "cancel" (RFC 9745's Deprecation header carries it as a Unix time): 2026-12-06,
#: the release that added POST /runs/{id}/cancel. Stages that set LEGACY_DELETE_CANCELS keep the old meaning for
#: this one release (docs/api.md).
DELETE_AS_CANCEL_DEPRECATED_AT = 1796515200


@router.post(
    "/runs/<run_id>/cancel",
    summary="Cancel a run",
    description="Stops the run's execution: a run still waiting ends CANCELLED at once; one executing is"
    " CANCELLING until what it provisioned is torn down, then CANCELLED. The run stays readable (GET"
    " /runs/{id}); DELETE /runs/{id} removes it once it has finished. Cancelling a run again while it is"
    " CANCELLING answers the same; a finished run answers 409.",
    tags=["runs"],
    responses={
        202: {"description": "cancellation accepted", "content": {"application/json": {"model": RunOut}}},
        **ERRORS,
    },
)
@tracer.capture_method
def cancel_run(run_id: RunId) -> Response[RunOut]:
    run = deps.runs().cancel_run(run_id)
    metrics.add_metric(name="RunsCancelled", unit=MetricUnit.Count, value=1)
    return Response(202, content_types.APPLICATION_JSON, RunOut.of(run))


@router.delete(
    "/runs/<run_id>",
    summary="Delete a finished run",
    description="Removes a finished run (REFUSED, SUCCEEDED, FAILED or CANCELLED) with its architectures,"
    " measurements, ranking and stored report: GET /runs/{id} answers 404 afterwards. A run that has not"
    " finished answers 409 naming its cancel route (POST /runs/{id}/cancel). Deprecated: where the stage keeps"
    " the old meaning for one release (LEGACY_DELETE_CANCELS), a run that has not finished is cancelled instead"
    " and the answer is 202 with a Deprecation header.",
    tags=["runs"],
    responses={
        204: {"description": "run deleted"},
        202: {
            "description": "deprecated, only where the stage sets LEGACY_DELETE_CANCELS: the run was not finished"
            " and is being cancelled (use POST /runs/{id}/cancel)",
            "content": {"application/json": {"model": RunOut}},
        },
        **ERRORS,
    },
)
@tracer.capture_method
def delete_run(run_id: RunId) -> Response[RunOut | None]:
    runs = deps.runs()
    run = runs.get_run(run_id)
    cancel = Links.for_run(run_id).cancel
    if not run.finished:
        if deps.settings().legacy_delete_cancels:
            return _cancel_by_delete(run_id, cancel)
        raise Conflict(
            f"run {run_id} is {run.status} and has not finished: cancel it with POST {cancel}; DELETE removes"
            " a finished run",
            [Problem("status", f"{run.status} is not finished")],
            {"status": run.status, "cancel": cancel},
            "conflict",
        )
    bucket = deps.settings().report_bucket
    if bucket:  # the stored report first: if that fails, the run is still there to delete again
        from sizing.report.storage import ReportStore

        ReportStore(bucket).remove(run_id)
    runs.delete_run(run_id)
    metrics.add_metric(name="RunsDeleted", unit=MetricUnit.Count, value=1)
    return Response(204, None, None)  # no content: no body, no Content-Type


def _cancel_by_delete(run_id: str, cancel: str) -> Response[RunOut | None]:
    """DELETE's old meaning, kept for one release where the stage asks for it: cancel, and say it is deprecated
    (RFC 9745's Deprecation header, and the route that replaces it as the successor)."""
    run = deps.runs().cancel_run(run_id)
    metrics.add_metric(name="RunsCancelled", unit=MetricUnit.Count, value=1)
    return Response(
        202,
        content_types.APPLICATION_JSON,
        RunOut.of(run),
        headers={
            "Deprecation": f"@{DELETE_AS_CANCEL_DEPRECATED_AT}",
            "Link": f'<{cancel}>; rel="successor-version"',
        },
    )
