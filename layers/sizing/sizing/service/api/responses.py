"""Error answers documented on every route (the OpenAPI document then says what a 4xx body looks like)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sizing.service.api.models import ErrorBody

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import (
        OpenAPIResponse,
        OpenAPIResponseContentModel,
        OpenAPIResponseContentSchema,
    )

_BODY: dict[str, OpenAPIResponseContentSchema | OpenAPIResponseContentModel] = {
    "application/json": {"model": ErrorBody}
}

ERRORS: dict[int, OpenAPIResponse] = {
    400: {"description": "malformed request (body not JSON, page token not valid)", "content": _BODY},
    404: {"description": "no such resource", "content": _BODY},
    409: {"description": "the resource is in a state that does not allow this", "content": _BODY},
    413: {"description": "request body too large", "content": _BODY},
    422: {"description": "the request is not valid; details.problems names each field", "content": _BODY},
    500: {"description": "a fault on our side (never for bad input)", "content": _BODY},
    503: {"description": "a dependency is unavailable; retry after Retry-After seconds", "content": _BODY},
}


def ok(model: Any, description: str, status: int = 200) -> dict[int, OpenAPIResponse]:
    """A route's success answer (its schema in the document) and every error answer."""
    return {status: {"description": description, "content": {"application/json": {"model": model}}}, **ERRORS}
