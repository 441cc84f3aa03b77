"""The API function end to end on moto: sample events from events/ in, API Gateway proxy answers out."""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from fakes.lambda_context import lambda_context
from moto import mock_aws
from support.events import load_event

from sizing.lambdas import load_function
from sizing.plan import estimate
from sizing.service.api import deps
from sizing.store import SizingStore, create_table
from sizing.traces import samples
from sizing.workload.parse import parse_spec

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
#: A stand-in for the sizing state machine (built by its own issue): one Pass state, enough to start executions.
TRIVIAL_ASL = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


HANDLER = load_function("functions/api/")


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-api-dev", timeout_s=29, memory_mb=1024)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "llm-sizing")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        iam_role = f"arn:aws:iam::123456789012:role/sizing-{REGION}"
        arn = sfn.create_state_machine(name="llm-sizing-run-test", definition=TRIVIAL_ASL, roleArn=iam_role)[
            "stateMachineArn"
        ]
        table = create_table(ddb, "llm-sizing-test")
        monkeypatch.setenv("TABLE_NAME", table)
        monkeypatch.setenv("STATE_MACHINE_ARN", arn)

        # the API's services over moto, for this test (`use` replaces them, e.g. after an environment change)
        def use(services: deps.ApiServices) -> None:
            overrides.enter_context(deps.services.override(services))

        use(deps.build(dynamodb=ddb, sfn=sfn))
        yield SimpleNamespace(
            ddb=ddb, sfn=sfn, table=table, state_machine_arn=arn, store=SizingStore(table, ddb), use=use
        )


def call(event: dict[str, Any], context: Any) -> tuple[int, dict[str, Any], Any]:
    out = HANDLER.lambda_handler(event, context)
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    for k, v in (out.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), v[0] if isinstance(v, list) else v)
    body = json.loads(out["body"]) if out.get("body") else None
    return out["statusCode"], headers, body


def for_run(name: str, run_id: str) -> dict[str, Any]:
    """A sample event retargeted at `run_id`."""
    event = load_event(name)
    old = event["pathParameters"]["run_id"]
    event["path"] = event["path"].replace(old, run_id)
    event["requestContext"]["path"] = event["requestContext"]["path"].replace(old, run_id)
    event["pathParameters"]["run_id"] = run_id
    return event


def with_body(name: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    event = load_event(name)
    event["body"] = body if isinstance(body, str) else json.dumps(body)
    for k, v in (headers or {}).items():
        event["headers"][k] = v
        event["multiValueHeaders"][k] = [v]
    return event


def assert_error_shape(body: dict[str, Any]) -> None:
    assert set(body) == {"error", "message", "details"}
    assert "Traceback" not in json.dumps(body)


# --- POST /runs -----------------------------------------------------------------------------------------------
def test_posting_a_run_answers_202_stores_it_running_and_starts_its_execution(aws, context) -> None:
    # given
    event = load_event("api_post_runs")
    # when
    status, headers, body = call(event, context)
    # then
    assert status == 202
    run_id = body["run_id"]
    assert body["status"] == "RUNNING"
    assert body["links"]["self"] == f"/runs/{run_id}" == headers["location"]
    stored = aws.store.get_run(run_id)
    assert (
        stored.status == "RUNNING" and stored.model == "meta-llama/Llama-3.1-70B"
    )  # the catalog id of the alias asked for
    assert stored.top_k == 3 and stored.budget_usd == 50 and stored.source == "api"
    execution = aws.sfn.describe_execution(executionArn=stored.execution_arn)
    assert json.loads(execution["input"])["run_id"] == run_id


def test_retrying_with_the_same_idempotency_key_answers_the_same_run_once(aws, context) -> None:
    # given a first request
    _, _, first = call(load_event("api_post_runs"), context)
    # when the client retries it
    status, _, again = call(load_event("api_post_runs"), context)
    # then
    assert status == 202
    assert again["run_id"] == first["run_id"]
    runs, _ = aws.store.list_runs()
    assert len(runs) == 1


def test_without_a_key_an_identical_body_is_the_same_request(aws, context) -> None:
    # given
    event = load_event("api_post_runs")
    del event["headers"]["Idempotency-Key"], event["multiValueHeaders"]["Idempotency-Key"]
    # when
    _, _, first = call(copy.deepcopy(event), context)
    _, _, second = call(copy.deepcopy(event), context)
    # then
    assert first["run_id"] == second["run_id"]


def test_reusing_a_key_with_another_body_is_refused(aws, context) -> None:
    # given
    call(load_event("api_post_runs"), context)
    event = load_event("api_post_runs")
    body = json.loads(event["body"])
    body["top_k"] = 5
    event["body"] = json.dumps(body)
    # when
    status, _, answer = call(event, context)
    # then
    assert status == 422
    assert_error_shape(answer)
    assert answer["details"]["problems"][0]["field"] == "Idempotency-Key"


def test_a_run_for_an_unknown_model_is_422_with_suggestions(aws, context) -> None:
    # given
    body = json.loads(load_event("api_post_runs")["body"])
    body["spec"]["model"] = "meta-llama/Llama-3.1-70B-Instruc"
    event = with_body("api_post_runs", body, {"Idempotency-Key": "another-key"})
    # when
    status, _, answer = call(event, context)
    # then
    assert status == 422
    assert_error_shape(answer)
    assert answer["details"]["problems"][0]["field"] == "spec.model"
    assert "meta-llama/Llama-3.1-70B" in answer["details"]["suggestions"]


def test_a_run_request_with_an_unknown_field_names_it(aws, context) -> None:
    # given
    body = json.loads(load_event("api_post_runs")["body"])
    body["topk"] = 3
    # when
    status, _, answer = call(with_body("api_post_runs", body, {"Idempotency-Key": "k2"}), context)
    # then
    assert status == 422
    assert {"field": "topk", "message": "unknown field; did you mean 'top_k'?"} in answer["details"][
        "problems"
    ]


def test_a_body_that_is_not_json_is_400(aws, context) -> None:
    status, _, answer = call(with_body("api_post_runs", "{not json", {"Idempotency-Key": "k3"}), context)
    assert status == 400
    assert_error_shape(answer)


def test_a_huge_body_is_413(aws, context) -> None:
    status, _, answer = call(
        with_body("api_post_runs", "x" * (300 * 1024), {"Idempotency-Key": "k4"}), context
    )
    assert status == 413
    assert answer["error"] == "payload_too_large"


# --- GET /runs, /runs/{id}, /runs/{id}/architectures ------------------------------------------------------------
def test_runs_are_listed_newest_first_and_filtered_by_model(aws, context) -> None:
    # given two runs of the 70B model and one of another model
    ids = []
    for key in ("a", "b"):
        ids.append(
            call(
                with_body(
                    "api_post_runs", json.loads(load_event("api_post_runs")["body"]), {"Idempotency-Key": key}
                ),
                context,
            )[2]["run_id"]
        )
    other = json.loads(load_event("api_post_runs")["body"])
    other["spec"]["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    call(with_body("api_post_runs", other, {"Idempotency-Key": "c"}), context)
    # when
    status, _, page = call(load_event("api_get_runs"), context)
    # then
    assert status == 200
    assert [r["run_id"] for r in page["runs"]] == list(reversed(ids))
    assert page["next_token"] is None


def test_a_bad_page_token_is_400_and_a_bad_status_422(aws, context) -> None:
    event = load_event("api_get_runs")
    event["queryStringParameters"] = {"token": "not-a-token"}
    event["multiValueQueryStringParameters"] = {"token": ["not-a-token"]}
    assert call(event, context)[0] == 400
    event["queryStringParameters"] = {"status": "DONE"}
    event["multiValueQueryStringParameters"] = {"status": ["DONE"]}
    status, _, answer = call(event, context)
    assert status == 422
    assert answer["details"]["problems"][0]["field"] == "query.status"


def test_a_run_and_its_architectures_are_readable(aws, context) -> None:
    # given a run that has ranked two architectures
    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    ranked = estimate(
        parse_spec(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "rate": {"peak_rps": 1},
                "tokens": {"input": {"fixed": 500}, "output": {"fixed": 100}},
                "slo": {"e2e_s": {"p95": 20}},
                "constraints": {
                    "instance_types": ["g6e.xlarge"],
                    "deployments": ["eks"],
                    "quantizations": ["fp8"],
                },
            }
        ),
        top=2,
    ).document()["architectures"]
    aws.store.put_architectures(run_id, ranked)
    # when
    status, _, run = call(for_run("api_get_run", run_id), context)
    a_status, _, archs = call(for_run("api_get_run_architectures", run_id), context)
    # then
    assert status == 200 and run["run_id"] == run_id and run["status"] == "RUNNING"
    assert run["spec"]["model"] == "meta-llama/Llama-3.1-70B-Instruct"
    assert a_status == 200 and [a["id"] for a in archs["architectures"]] == [a["id"] for a in ranked]
    assert archs["architectures"][0]["serving"] == ranked[0]["serving"]


def test_an_unknown_run_is_404(aws, context) -> None:
    status, _, answer = call(load_event("api_get_run"), context)
    assert status == 404
    assert answer["error"] == "not_found"
    assert call(load_event("api_get_run_architectures"), context)[0] == 404
    assert call(load_event("api_delete_run"), context)[0] == 404


# --- POST /runs/{id}/cancel, DELETE /runs/{id} -----------------------------------------------------------------
def test_cancelling_a_run_stops_its_execution_and_marks_it_cancelling(aws, context) -> None:
    # given
    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    # when
    status, _, run = call(for_run("api_cancel_run", run_id), context)
    # then
    assert status == 202 and run["status"] == "CANCELLING"
    arn = aws.store.get_run(run_id).execution_arn
    assert aws.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    # cancelling again is harmless, and the run stays readable
    assert call(for_run("api_cancel_run", run_id), context)[0] == 202
    assert call(for_run("api_get_run", run_id), context)[2]["status"] == "CANCELLING"


def test_a_finished_run_cannot_be_cancelled(aws, context) -> None:
    # given
    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    aws.store.transition(run_id, "SUCCEEDED")
    # when
    status, _, answer = call(for_run("api_cancel_run", run_id), context)
    # then
    assert status == 409
    assert answer["details"]["status"] == "SUCCEEDED"
    assert aws.store.get_run(run_id).status == "SUCCEEDED"


def test_deleting_a_run_that_has_not_finished_is_409_naming_the_cancel_route(aws, context) -> None:
    # given a run whose execution is running
    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    # when it is deleted
    status, headers, answer = call(for_run("api_delete_run", run_id), context)
    # then it is refused, the answer says how to cancel it, and the run goes on untouched
    assert status == 409 and "deprecation" not in headers
    assert answer["details"]["cancel"] == f"/runs/{run_id}/cancel"
    assert f"POST /runs/{run_id}/cancel" in answer["message"]
    assert aws.store.get_run(run_id).status == "RUNNING"
    arn = aws.store.get_run(run_id).execution_arn
    assert aws.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"


def test_deleting_a_finished_run_removes_it_with_its_results_and_report(aws, context, monkeypatch) -> None:
    # given a ranked run whose report was stored in the reports bucket, then finished
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="llm-sizing-reports-test")
    monkeypatch.setenv("REPORT_BUCKET", "llm-sizing-reports-test")
    aws.use(deps.build(dynamodb=aws.ddb, sfn=aws.sfn))
    run_id = _ranked_run(aws, context)
    aws.store.put_measurement(run_id, "c1", {"level": 1})
    aws.store.put_ranking(run_id, {"ranked": []})
    report = for_run("api_get_run_report", run_id)
    report["queryStringParameters"] = {"presign": "true"}
    report["multiValueQueryStringParameters"] = {"presign": ["true"]}
    assert call(report, context)[0] == 200
    aws.store.transition(run_id, "SUCCEEDED")
    body = json.loads(load_event("api_post_runs")["body"])
    other = call(with_body("api_post_runs", body, {"Idempotency-Key": "another-run"}), context)[2]
    # when it is deleted
    status, headers, body = call(for_run("api_delete_run", run_id), context)
    # then it is gone: the run, everything stored under it, its report; and another run is untouched
    assert status == 204 and body is None and "content-type" not in headers
    assert call(for_run("api_get_run", run_id), context)[0] == 404
    assert call(for_run("api_get_run_architectures", run_id), context)[0] == 404
    assert call(for_run("api_get_run_report", run_id), context)[0] == 404
    left = aws.ddb.query(
        TableName=aws.table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{run_id}"}},
    )["Items"]
    assert left == []
    objects = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket="llm-sizing-reports-test")
    assert not [o["Key"] for o in objects.get("Contents", []) if run_id in o["Key"]]
    assert call(for_run("api_get_run", other["run_id"]), context)[0] == 200
    # and deleting it again is a 404
    assert call(for_run("api_delete_run", run_id), context)[0] == 404


def test_a_retry_of_the_request_that_created_a_deleted_run_starts_a_new_one(aws, context) -> None:
    # given a run created, finished and deleted
    first = call(load_event("api_post_runs"), context)[2]["run_id"]
    aws.store.transition(first, "FAILED", error="boom")
    assert call(for_run("api_delete_run", first), context)[0] == 204
    # when the very request that created it is sent again, twice
    status, _, again = call(load_event("api_post_runs"), context)
    _, _, once_more = call(load_event("api_post_runs"), context)
    # then it does not answer with the deleted run (a 404 to follow) but starts a new one, once
    assert status == 202 and again["run_id"] != first
    assert call(for_run("api_get_run", again["run_id"]), context)[0] == 200
    assert once_more["run_id"] == again["run_id"]


def test_where_the_stage_keeps_the_old_meaning_delete_cancels_with_a_deprecation_header(
    aws, context, monkeypatch
) -> None:
    # given a stage that keeps DELETE as cancel for this release, and a running run
    monkeypatch.setenv("LEGACY_DELETE_CANCELS", "true")
    aws.use(deps.build(dynamodb=aws.ddb, sfn=aws.sfn))
    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    # when it is deleted
    status, headers, run = call(for_run("api_delete_run", run_id), context)
    # then it is cancelled as before, and the answer says that this use of DELETE is deprecated and what replaces it
    assert status == 202 and run["status"] == "CANCELLING"
    assert headers["deprecation"].startswith("@")
    assert headers["link"] == f'</runs/{run_id}/cancel>; rel="successor-version"'
    # and once it has finished, DELETE deletes there too
    aws.store.transition(run_id, "CANCELLED")
    assert call(for_run("api_delete_run", run_id), context)[0] == 204
    assert call(for_run("api_get_run", run_id), context)[0] == 404


# --- catalog, OpenAPI, unknown routes ---------------------------------------------------------------------------
def test_the_catalog_lists_models_and_instances(aws, context) -> None:
    status, _, models = call(load_event("api_get_catalog_models"), context)
    i_status, _, instances = call(load_event("api_get_catalog_instances"), context)
    assert status == 200
    assert "meta-llama/Llama-3.1-70B" in {m["id"] for m in models["models"]}
    assert i_status == 200 and instances["instances"]
    assert {i["family"] for i in instances["instances"]} == {"g6e"}


def test_the_openapi_document_is_served_and_an_unknown_path_is_a_json_404(aws, context) -> None:
    event = load_event("api_get_catalog_models")
    event["path"] = event["resource"] = "/openapi.json"
    status, _, doc = call(event, context)
    assert status == 200 and doc["info"]["title"] == "LLM Sizing API"
    assert "/runs/{run_id}" in doc["paths"]
    event["path"] = "/nope"
    status, _, answer = call(event, context)
    assert status == 404
    assert_error_shape(answer)


# --- POST /estimates -------------------------------------------------------------------------------------------
def test_an_invalid_estimate_request_names_every_problem_and_never_500s(aws, context) -> None:
    status, _, answer = call(load_event("api_post_estimates_invalid"), context)
    assert status == 422
    assert_error_shape(answer)
    fields = {p["field"] for p in answer["details"]["problems"]}
    assert "userz" in fields


def test_an_estimate_answers_ranked_architectures(aws, context) -> None:
    status, _, result = call(load_event("api_post_estimates"), context)
    assert status == 200, result
    assert set(result) >= {"workload", "architectures", "rejected", "assumptions"}
    assert 0 < len(result["architectures"]) <= 5
    assert [a["rank"] for a in result["architectures"]] == list(range(1, len(result["architectures"]) + 1))


def test_numbers_out_of_any_sensible_range_are_422_not_500(aws, context) -> None:
    # given a budget below a cent, and an SLO bound DynamoDB could not even store
    body = json.loads(load_event("api_post_runs")["body"])
    tiny_budget = {**body, "budget_usd": 5e-324}
    tiny_slo = {**body, "spec": {**body["spec"], "slo": {"ttft_ms": {"p95": 5e-324}}}}
    # when
    budget_status, _, budget_answer = call(
        with_body("api_post_runs", tiny_budget, {"Idempotency-Key": "t1"}), context
    )
    slo_status, _, slo_answer = call(with_body("api_post_runs", tiny_slo, {"Idempotency-Key": "t2"}), context)
    # then
    assert budget_status == 422 and budget_answer["details"]["problems"][0]["field"] == "budget_usd"
    assert slo_status == 422
    assert_error_shape(slo_answer)
    assert aws.store.list_runs()[0] == []


def test_when_the_state_machine_cannot_start_the_answer_is_503_and_the_run_failed(
    aws, context, monkeypatch
) -> None:
    # given a state machine that does not exist (a stack deployed without it, or deleted)
    monkeypatch.setenv("STATE_MACHINE_ARN", aws.state_machine_arn.replace("llm-sizing-run-test", "gone"))
    aws.use(deps.build(dynamodb=aws.ddb, sfn=aws.sfn))
    # when
    status, headers, answer = call(load_event("api_post_runs"), context)
    # then
    assert status == 503 and headers["retry-after"]
    assert_error_shape(answer)
    failed = aws.store.get_run(answer["details"]["run_id"])
    assert failed.status == "FAILED" and failed.error and "not started" in failed.error


# --- GET /runs/{id}/report ---------------------------------------------------------------------------------------
def _ranked_run(aws: SimpleNamespace, context: Any) -> str:
    """A run whose architectures come from a real (small) estimate, as the state machine stores them."""
    from sizing.plan import estimate
    from sizing.workload.parse import parse_spec

    run_id = call(load_event("api_post_runs"), context)[2]["run_id"]
    spec = parse_spec(
        {
            "model": "llama-3.1-8b",
            "rate": {"peak_rps": 2},
            "tokens": {"input": {"fixed": 500}, "output": {"fixed": 100}},
            "slo": {"e2e_s": {"p95": 10}},
            "constraints": {
                "deployments": ["eks"],
                "instance_types": ["g6e.xlarge"],
                "quantizations": ["fp8"],
            },
        }
    )
    aws.store.put_architectures(run_id, estimate(spec).document()["architectures"])
    return run_id


def test_a_runs_report_is_a_self_contained_html_page_of_its_architectures(aws, context) -> None:
    from sizing.report.reading import read_report

    # given a ranked run
    run_id = _ranked_run(aws, context)
    # when its report is asked for
    out = HANDLER.lambda_handler(for_run("api_get_run_report", run_id), context)
    # then it is HTML naming the ranked architecture, with no external asset
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    for k, v in (out.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), v[0] if isinstance(v, list) else v)
    assert out["statusCode"] == 200 and headers["content-type"].startswith("text/html")
    assert "eks:g6e.xlarge:tp1:fp8:vllm" in out["body"]
    page = read_report(out["body"])
    assert not page.external


def test_a_presigned_report_link_needs_a_bucket_and_then_points_at_it(aws, context, monkeypatch) -> None:
    run_id = _ranked_run(aws, context)
    event = for_run("api_get_run_report", run_id)
    event["queryStringParameters"] = {"presign": "true"}
    event["multiValueQueryStringParameters"] = {"presign": ["true"]}
    # without a reports bucket: a clear 422 naming the parameter
    status, _, body = call(event, context)
    assert status == 422 and body["details"]["problems"][0]["field"] == "presign"
    # with one: the report is stored and a time-limited link comes back
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="llm-sizing-reports-test")
    monkeypatch.setenv("REPORT_BUCKET", "llm-sizing-reports-test")
    aws.use(deps.build(dynamodb=aws.ddb, sfn=aws.sfn))
    status, _, body = call(event, context)
    assert status == 200 and "llm-sizing-reports-test" in body["url"] and "Expires=" in body["url"]
    keys = [
        o["Key"]
        for o in boto3.client("s3", region_name=REGION).list_objects_v2(Bucket="llm-sizing-reports-test")[
            "Contents"
        ]
    ]
    assert any(k.endswith(f"{run_id}/report.html") for k in keys)


def test_the_report_of_an_unknown_run_is_404(aws, context) -> None:
    status, _, body = call(for_run("api_get_run_report", "nope"), context)
    assert status == 404
    assert_error_shape(body)


def test_an_estimate_of_a_trace_on_s3_reads_it_and_an_unreadable_one_is_a_4xx_naming_its_uri(
    aws, context
) -> None:
    # given Bedrock invocation logs of one model in a bucket, as Bedrock delivers them (gzip)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="team-logs")
    body = "".join(samples.bedrock_line(r) + "\n" for r in samples.synthetic(300, seed=6, rate=2.0))
    s3.put_object(
        Bucket="team-logs", Key="bedrock/2026/03/03/part-0.json.gz", Body=gzip.compress(body.encode())
    )
    spec = {
        "name": "logs",
        "model": "llama-3.1-8b",
        "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 20}},
        "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
    }
    # when the prefix is estimated
    status, _, result = call(
        with_body("api_post_estimates", {**spec, "trace": {"path": "s3://team-logs/bedrock/2026/03/03/"}}),
        context,
    )
    # then the answer is sized for the trace, and says what it changed against Poisson arrivals
    assert status == 200, result
    assert result["workload"]["trace"]["requests"] == 300 and result["workload"]["trace"]["effect"]
    # when an object holds a malformed line
    bad = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": 9, "input_length": "x", "output_length": 5}\n'
    s3.put_object(Bucket="team-logs", Key="mooncake/bad.jsonl", Body=bad.encode())
    status, _, answer = call(
        with_body("api_post_estimates", {**spec, "trace": {"path": "s3://team-logs/mooncake/bad.jsonl"}}),
        context,
    )
    # then the answer is a 422 naming the object, the line and the field
    assert status == 422, answer
    assert "s3://team-logs/mooncake/bad.jsonl, line 2, field input_length" in json.dumps(answer)
    # when an object that does not exist, or a bucket that does not, is named
    for uri in ("s3://team-logs/bedrock/missing.json.gz", "s3://no-such-bucket-here/logs/"):
        status, _, answer = call(with_body("api_post_estimates", {**spec, "trace": {"path": uri}}), context)
        # then the answer is a 4xx naming the URI, never a 5xx
        assert 400 <= status < 500, answer
        assert_error_shape(answer)
        assert uri in json.dumps(answer)
