"""Domain and service errors → HTTP answers, in one place. Every answer has the body
`{"error", "message", "details"}` with the problems by field path; bad input never becomes a 500 and no answer
carries a stack trace."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from sizing.base.errors import (
    Conflict,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Problem,
    SizingError,
    Unavailable,
    unknown_field_message,
)
from sizing.base.observability import logger
from sizing.releases.watches import WatchRequest
from sizing.service.api.models import ErrorBody, RunRequest

#: Seconds a client should wait before retrying a 503 (a state machine start that was throttled recovers in
#: seconds; Step Functions' own retry guidance starts at 1-2 s with backoff).
RETRY_AFTER_S = 5


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> Response[Any]:
    body = ErrorBody(error=code, message=message, details=details or {})
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == HTTPStatus.SERVICE_UNAVAILABLE else None
    return Response(status, content_types.APPLICATION_JSON, body.model_dump_json(), headers=headers)


def _problems(problems: list[Problem]) -> list[dict[str, str]]:
    return [{"field": p.field, "message": p.message} for p in problems]


def _status_of(exc: SizingError) -> tuple[int, str]:
    if isinstance(exc, PayloadTooLarge):
        return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large"
    if isinstance(exc, MethodNotAllowed):
        return HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"
    if isinstance(exc, Unavailable):
        return HTTPStatus.SERVICE_UNAVAILABLE, "unavailable"
    if isinstance(exc, Conflict):
        return HTTPStatus.CONFLICT, "conflict"
    if isinstance(exc, NotFound):
        # a missing resource (a run) is 404; an unknown name inside a body (a model) is bad input
        return (
            (HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_input")
            if exc.problems
            else (HTTPStatus.NOT_FOUND, "not_found")
        )
    if isinstance(exc, InvalidInput) and any(p.field in ("token", "body") for p in exc.problems):
        return HTTPStatus.BAD_REQUEST, "bad_request"
    return HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_input"


def sizing_error(exc: SizingError) -> Response[Any]:
    status, code = _status_of(exc)
    details = {**exc.details, "problems": _problems(exc.problems)}
    return error_response(status, code, exc.message, details)


def validation_error(exc: RequestValidationError) -> Response[Any]:
    """Powertools' request validation: locations like ("body", "spec") become dotted field paths; a body that
    is not JSON at all is a 400."""
    problems: list[dict[str, str]] = []
    malformed = False
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        if err.get("type") == "json_invalid":
            malformed = True
        where = loc[0] if loc else ""
        path = ".".join(loc[1:]) if where == "body" else ".".join(loc)
        if err.get("type") == "json_invalid":
            path = "body"
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "extra_forbidden":
            msg = _unknown_field(loc)
        problems.append({"field": path or where, "message": msg})
    if malformed:
        return error_response(
            HTTPStatus.BAD_REQUEST,
            "bad_request",
            "the request body is not valid JSON",
            {"problems": problems},
        )
    return error_response(
        HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_input", "the request is not valid", {"problems": problems}
    )


def _unknown_field(loc: list[str]) -> str:
    """An unknown field of a request body, with a did-you-mean from the request models' fields."""
    if len(loc) == 2 and loc[0] == "body":
        known = sorted(set(RunRequest.model_fields) | set(WatchRequest.model_fields))
        return unknown_field_message(loc[1], known)
    return "unknown field (check the spelling)"


def register(app: APIGatewayRestResolver) -> None:
    """Attach the mapping to a resolver (its routers' routes included)."""

    @app.exception_handler(SizingError)
    def _sizing(exc: SizingError) -> Response[Any]:
        return sizing_error(exc)

    @app.exception_handler(RequestValidationError)
    def _validation(exc: RequestValidationError) -> Response[Any]:
        return validation_error(exc)

    @app.not_found
    def _not_found(_: NotFoundError) -> Response[Any]:
        path = app.current_event.path if app.current_event else ""
        return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no such resource: {path}")

    @app.exception_handler(Exception)
    # powertools hands the handler the exception; the log takes it from the context
    def _unexpected(exc: Exception) -> Response[Any]:  # noqa: ARG001
        # a bug, not bad input: log it with the stack trace, answer without one
        logger.exception("unhandled error")
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            "internal_error",
            "something went wrong on our side; the request id in the logs identifies it",
        )
