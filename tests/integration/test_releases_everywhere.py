"""A released model is a model everywhere: after the model-release function handles a `ModelReleased` on moto,
the API's catalog, estimates, runs and served OpenAPI document and the Slack bot know the model, in containers
that were already warm when it was released."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode

import boto3
import pytest
from fakes.lambda_context import lambda_context
from moto import mock_aws
from pytest_httpserver import HTTPServer
from slack_sdk.signature import SignatureVerifier
from support.events import load_event
from support.releases import RELEASED, TRIVIAL_ASL, support_chat
from werkzeug import Request, Response

from sizing.lambdas import load_function
from sizing.releases import deps as release_deps
from sizing.releases.settings import ReleaseSettings
from sizing.service.api import deps as api_deps
from sizing.slack import deps as slack_deps
from sizing.slack.bot import EstimateJob
from sizing.slack.settings import SlackSettings
from sizing.store import SizingStore, create_table

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
BUS = "llm-sizing-test"
SIGNING_SECRET = "5ec7e7-signing-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
BOT_TOKEN = "xoxb-1234567890-0987654321-SeCrEtToKeNvAlUe42"
SPEC = support_chat(RELEASED)

RELEASE = load_function("functions/model_release/")
API = load_function("functions/api/")
COMMANDS = load_function("functions/slack/", "slack_commands")
WORKER = load_function("functions/slack/", "slack_worker")


class FakeSlack:
    """A Slack workspace on loopback: what was posted to response_urls."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.responses: list[dict[str, Any]] = []
        server.expect_request("/hooks/response", method="POST").respond_with_handler(self._respond)

    @property
    def response_url(self) -> str:
        return self.server.url_for("/hooks/response")

    def _respond(self, request: Request) -> Response:
        self.responses.append(json.loads(request.get_data(as_text=True)))
        return Response("ok", status=200)


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-test", timeout_s=600, memory_mb=2048)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, httpserver: HTTPServer) -> Iterator[SimpleNamespace]:
    """One table behind the release function, the API and the Slack bot, as deployed."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        sm = boto3.client("secretsmanager", region_name=REGION)
        events.create_event_bus(Name=BUS)
        arn = sfn.create_state_machine(
            name="llm-sizing-run-test", definition=TRIVIAL_ASL, roleArn="arn:aws:iam::123456789012:role/s"
        )["stateMachineArn"]
        secret = sm.create_secret(
            Name="llm-sizing/slack-test",
            SecretString=json.dumps({"signing_secret": SIGNING_SECRET, "bot_token": BOT_TOKEN}),
        )["ARN"]
        table = create_table(ddb, "llm-sizing-test")
        monkeypatch.setenv("TABLE_NAME", table)
        monkeypatch.setenv("STATE_MACHINE_ARN", arn)
        slack = FakeSlack(httpserver)
        handed_off: list[EstimateJob] = []
        # each feature's services over the same moto table, as its own container would build them, checking
        # the registry on every call (deployed: at most every CHECK_EVERY_S; see the last test)
        releases = ReleaseSettings(TABLE_NAME=table, EVENT_BUS_NAME=BUS, STATE_MACHINE_ARN=arn)
        bot = SlackSettings(TABLE_NAME=table, SLACK_SECRET_ID=secret, STATE_MACHINE_ARN=arn)
        overrides.enter_context(
            release_deps.services.override(release_deps.build(releases, dynamodb=ddb, sfn=sfn, events=events))
        )
        overrides.enter_context(
            api_deps.services.override(api_deps.build(dynamodb=ddb, sfn=sfn, catalog_check_s=0))
        )
        overrides.enter_context(
            slack_deps.services.override(
                slack_deps.build(
                    bot,
                    dynamodb=ddb,
                    sfn=sfn,
                    secretsmanager=sm,
                    invoker=handed_off.append,
                    catalog_check_s=0,
                )
            )
        )
        yield SimpleNamespace(slack=slack, handed_off=handed_off, sfn=sfn, store=SizingStore(table, ddb))


def call(name: str, context: Any, body: Any = None) -> tuple[int, Any]:
    event = load_event(name)
    if body is not None:
        event["body"] = json.dumps(body)
    out = API.lambda_handler(event, context)
    return out["statusCode"], json.loads(out["body"]) if out.get("body") else None


def listed_models(context: Any) -> set[str]:
    status, body = call("api_get_catalog_models", context)
    assert status == 200, body
    return {m["id"] for m in body["models"]}


def release(context: Any) -> None:
    outcome = RELEASE.lambda_handler(load_event("model_release_inline"), context)
    assert outcome["status"] == "processed", outcome


def signed_command(text: str, response_url: str) -> dict[str, Any]:
    event = load_event("slack_command")
    fields = {k: v[0] for k, v in parse_qs(event["body"], keep_blank_values=True).items()}
    fields.update(text=text, response_url=response_url)
    body = urlencode(fields)
    ts = str(int(time.time()))
    signature = SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=ts, body=body)
    event["body"] = body
    for key, value in {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": str(signature)}.items():
        event["headers"][key] = value
        event["multiValueHeaders"][key] = [value]
    return event


# --- the API ----------------------------------------------------------------------------------------------------
def test_a_warm_api_lists_a_model_released_after_it_started(aws, context) -> None:
    # given an API container that has already answered with the shipped catalog
    assert RELEASED not in listed_models(context)
    # when the model is released
    release(context)
    # then the same container lists it, with the parameters from its config.json
    status, body = call("api_get_catalog_models", context)
    assert status == 200
    (model,) = [m for m in body["models"] if m["id"] == RELEASED]
    assert model["moe"] is True and model["layers"] == 48
    # and the shipped models are all still there
    assert "meta-llama/Llama-4-Scout-17B-16E-Instruct" in listed_models(context)


def test_an_estimate_for_a_released_model_answers_200_not_unknown_model(aws, context) -> None:
    # given the API refuses the model before its release
    status, body = call("api_post_estimates", context, SPEC)
    assert status == 422 and "unknown model" in body["message"]
    # when it is released
    release(context)
    # then the estimate answers ranked architectures on it
    status, body = call("api_post_estimates", context, SPEC)
    assert status == 200, body
    assert body["architectures"] and body["workload"]["model"] == RELEASED


def test_a_measured_run_of_a_released_model_is_started(aws, context) -> None:
    # given a released model
    release(context)
    # when a run of it is posted
    status, run = call("api_post_runs", context, {"spec": SPEC, "top_k": 1})
    # then it is accepted and its execution started
    assert status == 202, run
    assert run["status"] == "RUNNING"
    stored = aws.store.get_run(run["run_id"])
    assert stored.model == RELEASED
    execution = aws.sfn.describe_execution(executionArn=stored.execution_arn)
    assert json.loads(execution["input"])["model"] == RELEASED


def test_the_served_openapi_document_accepts_the_released_model(aws, context) -> None:
    # given a released model
    release(context)
    # when a client reads the served document
    event = load_event("api_get_catalog_models")
    event["path"] = event["requestContext"]["path"] = "/openapi.json"
    event["resource"] = "/openapi.json"
    doc = json.loads(API.lambda_handler(event, context)["body"])
    # then the spec's model names include it (a client validating against the document accepts it)
    assert RELEASED in doc["components"]["schemas"]["WorkloadSpec"]["properties"]["model"]["enum"]


# --- the Slack bot ----------------------------------------------------------------------------------------------
def test_a_slack_estimate_for_a_released_model_is_posted(aws, context) -> None:
    # given a released model
    release(context)
    text = f"5 rps {RELEASED} ttft<1.5s tpot<80ms in=1000 out=200 eks fp8 on-demand chat"
    # when someone asks /sizing about it
    ack = COMMANDS.lambda_handler(signed_command(text, aws.slack.response_url), context)
    # then the command is understood (not "I don't know the model") and handed to the worker
    assert ack["statusCode"] == 200
    assert "don't know the model" not in ack["body"]
    (job,) = aws.handed_off
    # and the worker posts the estimate in the channel
    job_spec = {**job.raw_spec, "constraints": SPEC["constraints"]}
    out = WORKER.lambda_handler({**job.model_dump(mode="json"), "raw_spec": job_spec}, context)
    assert out == {"posted": True}
    (posted,) = aws.slack.responses
    assert posted["response_type"] == "in_channel"
    assert RELEASED in json.dumps(posted["blocks"])
    assert "/month" in json.dumps(posted["blocks"])


def test_when_the_registry_cannot_be_read_the_shipped_models_still_answer(aws, context) -> None:
    # given a catalog over a registry whose table cannot be read (here: it does not exist)
    from sizing.releases.catalog import LiveCatalog, ModelRegistry

    live = LiveCatalog(
        ModelRegistry("llm-sizing-missing", client=boto3.client("dynamodb", region_name=REGION))
    )
    # when a reader asks for the catalog
    catalog = live()
    # then it gets the shipped models instead of an error
    assert catalog.model("llama-3.1-8b").id == "meta-llama/Llama-3.1-8B"


def test_a_warm_container_reads_the_registry_at_most_once_a_second_and_then_sees_the_release(
    aws, context
) -> None:
    # given a container's catalog, as deployed (checked at most every CHECK_EVERY_S), on a clock we move
    from sizing.releases.catalog import CHECK_EVERY_S, LiveCatalog, ModelRegistry

    ddb = boto3.client("dynamodb", region_name=REGION)
    reads: list[str] = []
    ddb.meta.events.register("before-call.dynamodb.Query", lambda **kw: reads.append("query"))
    now = [100.0]
    live = LiveCatalog(ModelRegistry("llm-sizing-test", client=ddb), clock=lambda: now[0])
    assert live().models.get(RELEASED) is None
    # when the model is released and the container answers again within the second
    release(context)
    now[0] += CHECK_EVERY_S / 2
    before = len(reads)
    within = live()
    # then it answered from what it had, without reading the table
    assert len(reads) == before and within.models.get(RELEASED) is None
    # and once the second has passed it knows the model
    now[0] += CHECK_EVERY_S
    assert live().model(RELEASED).id == RELEASED
