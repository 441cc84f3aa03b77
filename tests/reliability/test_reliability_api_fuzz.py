"""The API fuzzed from its own OpenAPI document with schemathesis, in-process: every operation with generated
valid and invalid inputs, and stateful sequences (POST /runs → GET /runs/{id} → POST /runs/{id}/cancel → DELETE
..., POST /watches → GET/DELETE ...). Checks: no 5xx, every answer matches the document, no stack trace in any answer.

The resolver is reached through a small WSGI adapter (the same HTTP↔API Gateway translation `sizing serve`
uses), so no socket or server process is involved and thousands of cases run in seconds."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks as st_checks
from schemathesis.config import SchemathesisConfig
from support.api_checks import no_stack_trace
from support.selection import selects

from sizing.service.api import openapi_json, resolve
from sizing_local.serve import from_result, to_event

pytestmark = pytest.mark.integration

#: Generated cases per operation in the default run (12 operations): the whole module stays near ten seconds.
QUICK_EXAMPLES = 10
#: Per operation in the slow run, and stateful scenarios (each a sequence of up to ~10 calls).
DEEP_EXAMPLES = 300
STATEFUL_SCENARIOS = 150


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """HTTP (as WSGI hands it over) → API Gateway REST event → the deployed resolver → HTTP."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    headers: dict[str, list[str]] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers.setdefault(key[5:].replace("_", "-").title(), []).append(value)
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = [environ["CONTENT_TYPE"]]
    query = environ.get("QUERY_STRING") or ""
    # WSGI hands the path over percent-decoded (as latin-1): quoted again, a decoded "?" or "%" in a path
    # parameter stays in the path, as API Gateway keeps it, instead of starting a query
    path = quote(environ.get("PATH_INFO", "/").encode("latin-1"), safe="/")
    target = path + (f"?{query}" if query else "")
    event = to_event(environ["REQUEST_METHOD"], target, headers, body, "127.0.0.1")
    status, out_headers, out = from_result(resolve(event, None))
    start_response(f"{status} {HTTPStatus(status).phrase}", [*out_headers, ("Content-Length", str(len(out)))])
    return [out]


def _document_with_links() -> dict[str, Any]:
    """The served document plus OpenAPI links from what a create answers to the operations on what it made,
    so the stateful phase follows a run or a watch through its life."""
    doc = json.loads(openapi_json())
    # the Slack bot's routes are documented here but served by its own functions (Slack-signed requests): their
    # tests send signed requests (tests/integration/test_slack_handlers.py, tests/reliability/test_security_slack.py)
    doc["paths"] = {p: item for p, item in doc["paths"].items() if not p.startswith("/slack/")}
    paths = doc["paths"]

    def op_id(path: str, method: str) -> str:
        return str(paths[path][method]["operationId"])

    run_links = {
        f"Follow{n}": {"operationId": op_id(p, m), "parameters": {"run_id": "$response.body#/run_id"}}
        for n, (p, m) in enumerate(
            [
                ("/runs/{run_id}", "get"),
                ("/runs/{run_id}/architectures", "get"),
                ("/runs/{run_id}/cancel", "post"),
                ("/runs/{run_id}", "delete"),
            ]
        )
    }
    paths["/runs"]["post"]["responses"]["202"]["links"] = run_links
    watch_links = {
        f"Follow{n}": {"operationId": op_id("/watches/{watch_id}", m), "parameters": {"watch_id": "$response.body#/watch_id"}}
        for n, m in enumerate(["get", "delete"])
    }  # fmt: skip
    paths["/watches"]["post"]["responses"]["201"]["links"] = watch_links
    return doc


#: Examples and generated cases only. The coverage phase (every documented boundary value, every negative case,
#: undeclared methods) runs against `sizing serve` with every check, this module's `no_stack_trace` included, in
#: tests/integration/test_api_serve.py; built here it would cost every xdist worker ~3.5 s at collection.
IN_PROCESS = SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}})
schema = schemathesis.openapi.from_dict(_document_with_links(), config=IN_PROCESS)
schema.app = wsgi_app
schema.location = "/openapi.json"


CHECKS = [st_checks.not_a_server_error, st_checks.response_schema_conformance, no_stack_trace]


@pytest.fixture(autouse=True, scope="module")
def _embedded_aws(api: Any) -> Any:
    return api


def fuzz_settings(max_examples: int, **extra: Any) -> settings:
    """Every fuzz run's hypothesis settings: no deadline (an estimate takes its time), no health check, no
    example database (a run is reproducible from its seed alone)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        **extra,
    )


@schema.parametrize()
@fuzz_settings(QUICK_EXAMPLES)
def test_every_operation_answers_within_its_document(case: Any, figures: Any) -> None:
    # given generated input for one operation (valid and invalid, by the document)
    # when it is called, then no 5xx, the answer matches the document, no trace
    _call_counted(case, figures)


if selects("slow", "integration", "fuzz"):  # built only where -m can select it (support.selection)

    @pytest.mark.slow
    @schema.parametrize()
    @fuzz_settings(DEEP_EXAMPLES)
    def test_every_operation_answers_within_its_document_deeply(case: Any, figures: Any) -> None:
        _call_counted(case, figures)


def _call_counted(case: Any, figures: Any) -> None:
    response = case.call()
    figures.add("bad_input.schemathesis", cases=1, server_errors=int(response.status_code >= 500))
    case.validate_response(response, checks=CHECKS)


Workflow = schema.as_state_machine()


@pytest.mark.slow
def test_stateful_sequences_keep_every_answer_within_the_document(api: Any, figures: Any) -> None:
    class Checked(Workflow):  # type: ignore[misc, valid-type]
        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            figures.add(
                "bad_input.schemathesis_stateful", calls=1, server_errors=int(response.status_code >= 500)
            )
            case.validate_response(response, checks=CHECKS)

    Checked.run(settings=fuzz_settings(STATEFUL_SCENARIOS, stateful_step_count=10))


def test_the_stateful_workflow_follows_runs_and_watches() -> None:
    # a guard on the fuzzer: the links make the stateful phase reach the operations on a created resource
    names = " ".join(dir(Workflow))
    assert "POST_runs" in names and "GET_runs_run_id" in names
    assert "POST_watches" in names and "DELETE_watches_watch_id" in names
