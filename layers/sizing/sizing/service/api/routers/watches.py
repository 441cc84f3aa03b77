"""/watches: saved workloads re-sized automatically when a model matching their pattern is released
(`sizing.releases`)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import Field

from sizing.base import table
from sizing.base.observability import metrics, tracer
from sizing.base.strict import Strict
from sizing.releases.watches import ReleaseWatch, WatchRequest, WatchService
from sizing.service.api import deps, paging
from sizing.service.api.paging import CURSOR_PATTERN, MAX_TOKEN_CHARS
from sizing.service.api.responses import ERRORS, ok
from sizing.store.items import WATCHES_INDEX_PK
from sizing.store.repository import DEFAULT_PAGE, MAX_PAGE

router = Router()

#: Watch ids are uuid4 hex (32 characters); a generous bound still rejects junk before it reaches DynamoDB.
WATCH_ID_PATTERN = r"^[A-Za-z0-9_-]{1,80}$"

WatchId = Annotated[str, Path(pattern=WATCH_ID_PATTERN, description="the watch id from POST /watches")]


class WatchPage(Strict):
    watches: list[ReleaseWatch]
    next_token: str | None = Field(
        default=None, description="pass as ?token= for the next page; null at the end"
    )


def _service() -> WatchService:
    return WatchService(deps.store(), deps.catalog)


@router.post(
    "/watches",
    summary="Watch for new model releases",
    description="Saves a workload and a model pattern (meta-llama/Llama-4-*). When a matching model is released,"
    " the workload is estimated on it and compared with your current best; a measured run starts when"
    " `measure` is true; results go to Slack and/or EventBridge (SizingEstimateReady).",
    tags=["watches"],
    responses={
        201: {"description": "watch created", "content": {"application/json": {"model": ReleaseWatch}}},
        **ERRORS,
    },
)
@tracer.capture_method
def post_watch(request: WatchRequest) -> Response[ReleaseWatch]:
    watch = _service().create(request, source="api")
    metrics.add_metric(name="WatchesCreated", unit=MetricUnit.Count, value=1)
    return Response(
        201, content_types.APPLICATION_JSON, watch, headers={"Location": f"/watches/{watch.watch_id}"}
    )


@router.get(
    "/watches",
    summary="List watches, newest first",
    tags=["watches"],
    responses=ok(WatchPage, "a page of watches"),
)
@tracer.capture_method
def list_watches(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="watches per page")] = DEFAULT_PAGE,
    token: Annotated[
        str | None,
        Query(
            max_length=MAX_TOKEN_CHARS,
            description="next_token of the previous page: `{created_at}~{watch_id}` of its last watch",
            json_schema_extra={"pattern": CURSOR_PATTERN},
        ),
    ] = None,
) -> WatchPage:
    after = paging.to_store(token, WATCHES_INDEX_PK, table.WATCH_PREFIX, table.WATCH_SK)
    watches, next_token = _service().page(limit=limit, token=after)
    return WatchPage(watches=watches, next_token=paging.from_store(next_token, WATCHES_INDEX_PK))


@router.get(
    "/watches/<watch_id>", summary="One watch", tags=["watches"], responses=ok(ReleaseWatch, "the watch")
)
@tracer.capture_method
def get_watch(watch_id: WatchId) -> ReleaseWatch:
    return _service().get(watch_id)


@router.delete(
    "/watches/<watch_id>",
    summary="Stop watching",
    tags=["watches"],
    responses={204: {"description": "watch deleted"}, **ERRORS},
)
@tracer.capture_method
def delete_watch(watch_id: WatchId) -> Response[None]:
    _service().delete(watch_id)
    return Response(204, None, None)  # no content: no body, no Content-Type
