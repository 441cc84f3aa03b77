"""Domain errors become HTTP answers in one place, with the same body everywhere and no stack trace."""

from __future__ import annotations

import json

import pytest

from sizing.base.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    Problem,
    SizingError,
    Unavailable,
)
from sizing.service.api.errors import sizing_error


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidInput("bad spec", [Problem("slo.ttft_ms.p95", "must be > 0")]), 422, "invalid_input"),
        (InvalidInput("bad token", [Problem("token", "not a token")]), 400, "bad_request"),
        (NotFound("no run with id 'x'"), 404, "not_found"),
        (NotFound("unknown model 'x'", field_name="spec.model", suggestions=["a"]), 422, "invalid_input"),
        (Conflict("run x is SUCCEEDED"), 409, "conflict"),
        (PayloadTooLarge("too big"), 413, "payload_too_large"),
        (Unavailable("no state machine"), 503, "unavailable"),
    ],
)
def test_each_domain_error_has_its_status_and_the_common_body(
    error: SizingError, status: int, code: str
) -> None:
    # when
    answer = sizing_error(error)
    body = json.loads(answer.body)
    # then
    assert answer.status_code == status
    assert body["error"] == code
    assert body["message"] == error.message
    assert body["details"]["problems"] == [{"field": p.field, "message": p.message} for p in error.problems]


def test_an_unknown_model_keeps_its_suggestions() -> None:
    body = json.loads(
        sizing_error(NotFound("unknown model", field_name="model", suggestions=["m1", "m2"])).body
    )
    assert body["details"]["suggestions"] == ["m1", "m2"]


def test_a_503_says_when_to_retry() -> None:
    assert sizing_error(Unavailable("later")).headers["Retry-After"]
