"""POST/GET/DELETE /watches through the API function on moto. The API Gateway events are the API's own samples
(events/api_post_runs.json) retargeted at /watches."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import boto3
import pytest
from fakes.lambda_context import lambda_context
from moto import mock_aws

from sizing.catalog.hf import model_from_config
from sizing.lambdas import load_function
from sizing.releases.catalog import ModelRegistry
from sizing.releases.watches import WatchResult, WatchService
from sizing.service.api import deps
from sizing.store import SizingStore, create_table

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
WORKLOAD: dict[str, Any] = {
    "name": "support-chat",
    "model": "llama-3.1-70b",
    "users": {"total": 10000},
    "preset": "chat",
}
WATCH: dict[str, Any] = {
    "name": "llama 4 for support chat",
    "spec": WORKLOAD,
    "model_pattern": "meta-llama/Llama-4-*",
    "measure": True,
    "top_k": 2,
    "budget_usd": 250,
    "notify": {"slack_channel": "C0SIZING01"},
}


def _load_handler() -> ModuleType:
    return load_function("functions/api/")


HANDLER = _load_handler()


def request(method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> dict[str, Any]:
    """The API's sample POST /runs event, retargeted at another method and path."""
    event = copy.deepcopy(json.loads((EVENTS / "api_post_runs.json").read_text()))
    resource = "/watches/{watch_id}" if path.count("/") == 2 else "/watches"
    event.update(httpMethod=method, path=path, resource=resource)
    event["requestContext"].update(httpMethod=method, path=f"/dev{path}", resourcePath=resource)
    event["pathParameters"] = {"watch_id": path.rsplit("/", 1)[1]} if resource != "/watches" else None
    event["queryStringParameters"] = query
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    event["body"] = None if body is None else (body if isinstance(body, str) else json.dumps(body))
    for headers in (event["headers"], event["multiValueHeaders"]):
        headers.pop("Idempotency-Key", None)
    return event


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-api-dev", timeout_s=29, memory_mb=1024)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        table = create_table(ddb, "llm-sizing-test")
        monkeypatch.setenv("TABLE_NAME", table)
        monkeypatch.delenv("STATE_MACHINE_ARN", raising=False)

        # the feature's services over moto, for this test (`use` replaces them within it)
        def use(services: Any) -> None:
            overrides.enter_context(deps.services.override(services))

        use(deps.build(dynamodb=ddb))
        yield SimpleNamespace(ddb=ddb, table=table, store=SizingStore(table, ddb), use=use)


def call(event: dict[str, Any], context: Any) -> tuple[int, dict[str, str], Any]:
    out = HANDLER.lambda_handler(event, context)
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    for k, v in (out.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), v[0] if isinstance(v, list) else v)
    return out["statusCode"], headers, json.loads(out["body"]) if out.get("body") else None


def test_a_watch_is_created_listed_read_and_deleted(aws, context) -> None:
    # when a team saves its workload and the models to watch for
    status, headers, created = call(request("POST", "/watches", WATCH), context)
    # then it is stored with the current model resolved to its catalog id and every option kept
    assert status == 201
    watch_id = created["watch_id"]
    assert headers["location"] == f"/watches/{watch_id}"
    assert created["current_model"] == "meta-llama/Llama-3.1-70B"
    assert created["model_pattern"] == "meta-llama/Llama-4-*"
    assert (created["measure"], created["top_k"], created["budget_usd"]) == (True, 2, 250)
    assert created["notify"] == {"slack_channel": "C0SIZING01", "eventbridge": True}
    # and it is listed and readable
    status, _, page = call(request("GET", "/watches"), context)
    assert status == 200 and [w["watch_id"] for w in page["watches"]] == [watch_id]
    assert page["watches"][0] == created and page["next_token"] is None
    status, _, one = call(request("GET", f"/watches/{watch_id}"), context)
    assert status == 200 and one == created and one["recent_results"] == []
    # and, once a release has been handled for it, shows what it was told
    WatchService(aws.store, ModelRegistry(aws.table, aws.ddb).catalog).record(
        WatchResult(
            watch_id=watch_id,
            model_id="meta-llama/Llama-4-Scout-17B-16E",
            verdict="cheaper",
            headline="31% cheaper",
        )
    )
    _, _, one = call(request("GET", f"/watches/{watch_id}"), context)
    assert [r["headline"] for r in one["recent_results"]] == ["31% cheaper"]
    # when it is deleted
    status, _, _ = call(request("DELETE", f"/watches/{watch_id}"), context)
    # then it is gone, options and all
    assert status == 204
    status, _, missing = call(request("GET", f"/watches/{watch_id}"), context)
    assert status == 404 and missing["error"] == "not_found"
    assert aws.ddb.scan(TableName=aws.table)["Items"] == []


def test_watches_are_paged_newest_first(aws, context) -> None:
    # given three watches
    ids = [
        call(request("POST", "/watches", {**WATCH, "name": f"w{i}"}), context)[2]["watch_id"]
        for i in range(3)
    ]
    # when listed two at a time
    _, _, first = call(request("GET", "/watches", query={"limit": "2"}), context)
    _, _, second = call(
        request("GET", "/watches", query={"limit": "2", "token": first["next_token"]}), context
    )
    # then all three come, newest first, each once
    listed = [w["watch_id"] for w in first["watches"] + second["watches"]]
    assert listed == list(reversed(ids)) and second["next_token"] is None


def test_a_pattern_with_a_wildcard_organisation_is_refused_naming_the_field(aws, context) -> None:
    # when
    status, _, body = call(request("POST", "/watches", {**WATCH, "model_pattern": "*/Llama-4-*"}), context)
    # then
    assert status == 422
    assert [p["field"] for p in body["details"]["problems"]] == ["model_pattern"]
    assert aws.ddb.scan(TableName=aws.table)["Items"] == []


def test_a_bad_saved_workload_is_refused_naming_the_spec_field(aws, context) -> None:
    # given a workload whose SLO is negative
    spec = {**WORKLOAD, "slo": {"ttft_ms": {"p95": -1}}}
    # when
    status, _, body = call(request("POST", "/watches", {**WATCH, "spec": spec}), context)
    # then
    assert status == 422
    assert any(p["field"].startswith("spec.slo.ttft_ms") for p in body["details"]["problems"])


def test_an_unknown_current_model_is_refused_with_suggestions(aws, context) -> None:
    # when
    status, _, body = call(
        request("POST", "/watches", {**WATCH, "spec": {**WORKLOAD, "model": "lama-3.1-70b"}}), context
    )
    # then
    assert status == 422
    assert body["details"]["problems"][0]["field"] == "spec.model"
    assert "meta-llama/Llama-3.1-70B" in body["details"]["suggestions"]


def test_a_model_added_by_an_earlier_release_can_be_a_watchs_current_model(aws, context) -> None:
    # given a model the catalog learnt from a release
    config = json.loads(
        (ROOT / "tests/fixtures/hf/meta-llama--Llama-4-Scout-17B-16E.config.json").read_text()
    )
    ModelRegistry(aws.table, aws.ddb).put(
        model_from_config(config, "meta-llama/Llama-4-Scout-17B-16E"), "test"
    )
    # when a team watches for its successors
    spec = {**WORKLOAD, "model": "meta-llama/Llama-4-Scout-17B-16E"}
    status, _, created = call(request("POST", "/watches", {**WATCH, "spec": spec}), context)
    # then
    assert status == 201 and created["current_model"] == "meta-llama/Llama-4-Scout-17B-16E"


def test_the_openapi_document_describes_the_watch_routes(aws, context) -> None:
    # when
    status, _, doc = call(request("GET", "/openapi.json"), context)
    # then
    assert status == 200
    assert {"post", "get"} <= set(doc["paths"]["/watches"])
    assert {"get", "delete"} <= set(doc["paths"]["/watches/{watch_id}"])
