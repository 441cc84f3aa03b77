"""The Slack functions end to end: signed sample events in, the sizing table, Secrets Manager and Step Functions
on moto, and a fake Slack API on loopback (pytest-httpserver) receiving what the bot posts."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode

import boto3
import pytest
from botocore.config import Config
from fakes.lambda_context import lambda_context
from moto import mock_aws
from pytest_httpserver import HTTPServer
from slack_sdk.models.blocks import Block
from slack_sdk.signature import SignatureVerifier
from werkzeug import Request, Response

from sizing.base.observability import logger as powertools_logger
from sizing.lambdas import load_function
from sizing.slack import deps
from sizing.slack.bot import EstimateJob
from sizing.slack.settings import SlackSettings
from sizing.store import Run, SizingStore, SlackThread, create_table

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
SIGNING_SECRET = "5ec7e7-signing-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
BOT_TOKEN = "xoxb-1234567890-0987654321-SeCrEtToKeNvAlUe42"
#: A stand-in for the sizing state machine (built by its own issue): one Pass state, enough to start executions.
TRIVIAL_ASL = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


def _load(name: str) -> ModuleType:
    """A function module loaded from its file, as Lambda would (CodeUri functions/slack/)."""
    return load_function("functions/slack/", name)


COMMANDS = _load("slack_commands")
INTERACTIONS = _load("slack_interactions")
WORKER = _load("slack_worker")
NOTIFIER = _load("slack_notifier")


class FakeSlack:
    """What a Slack workspace would have received: response_url posts and chat.postMessage calls. Like Slack,
    chat.postMessage answers `invalid_auth` unless the bot token is presented."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.responses: list[dict[str, Any]] = []
        self.posts: list[dict[str, Any]] = []
        server.expect_request("/hooks/response", method="POST").respond_with_handler(self._respond)
        server.expect_request("/api/chat.postMessage", method="POST").respond_with_handler(self._post)

    @property
    def response_url(self) -> str:
        return self.server.url_for("/hooks/response")

    @property
    def api_url(self) -> str:
        return self.server.url_for("/api/")

    def _respond(self, request: Request) -> Response:
        self.responses.append(json.loads(request.get_data(as_text=True)))
        return Response("ok", status=200)

    def _post(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return Response(
                json.dumps({"ok": False, "error": "invalid_auth"}), content_type="application/json"
            )
        body = request.get_data(as_text=True)
        data = json.loads(body) if request.is_json else {k: v[0] for k, v in parse_qs(body).items()}
        if isinstance(data.get("blocks"), str):
            data["blocks"] = json.loads(data["blocks"])
        self.posts.append(data)
        ts = f"{time.time():.6f}"
        return Response(
            json.dumps({"ok": True, "channel": data.get("channel"), "ts": ts}),
            content_type="application/json",
        )


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-slack-dev", timeout_s=29, memory_mb=1024)


@pytest.fixture
def slack(httpserver: HTTPServer) -> FakeSlack:
    return FakeSlack(httpserver)


@pytest.fixture
def aws(
    monkeypatch: pytest.MonkeyPatch, slack: FakeSlack, context: SimpleNamespace
) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        sm = boto3.client("secretsmanager", region_name=REGION)
        secret_reads: list[str] = []
        sm.meta.events.register(
            "before-call.secrets-manager.GetSecretValue",
            lambda **kw: secret_reads.append("read"),
        )
        secret = sm.create_secret(
            Name="llm-sizing/slack-test",
            SecretString=json.dumps({"signing_secret": SIGNING_SECRET, "bot_token": BOT_TOKEN}),
        )["ARN"]
        arn = sfn.create_state_machine(
            name="llm-sizing-run-test",
            definition=TRIVIAL_ASL,
            roleArn="arn:aws:iam::123456789012:role/sizing",
        )["stateMachineArn"]
        table = create_table(ddb, "llm-sizing-test")
        settings = SlackSettings(
            TABLE_NAME=table,
            SLACK_SECRET_ID=secret,
            STATE_MACHINE_ARN=arn,
            SLACK_API_URL=slack.api_url,
            REPORT_BASE_URL="https://api.example/dev",
        )

        # the bot's services over moto, for this test (`use` replaces them within it)
        def use(services: deps.SlackServices) -> None:
            overrides.enter_context(deps.services.override(services))

        # the worker runs inline, through its own handler, instead of an asynchronous Lambda invoke
        use(
            deps.build(
                settings,
                dynamodb=ddb,
                sfn=sfn,
                secretsmanager=sm,
                invoker=lambda job: WORKER.lambda_handler(job.model_dump(mode="json"), context),
            )
        )
        yield SimpleNamespace(
            ddb=ddb, sfn=sfn, sm=sm, store=SizingStore(table, ddb), secret_reads=secret_reads, use=use
        )


def signed(
    name: str, event_loader: Callable[[str], dict[str, Any]], *, secret: str = SIGNING_SECRET, **form: str
) -> dict[str, Any]:
    """A sample event with form fields replaced, signed now as Slack would."""
    event = event_loader(name)
    fields = {k: v[0] for k, v in parse_qs(event["body"], keep_blank_values=True).items()}
    fields.update(form)
    body = urlencode(fields)
    ts = str(int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    event["body"] = body
    for key, value in {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": str(signature)}.items():
        event["headers"][key] = value
        event["multiValueHeaders"][key] = [value]
    return event


def interaction(
    event_loader: Callable[[str], dict[str, Any]], response_url: str, action_ts: str
) -> dict[str, Any]:
    payload = json.loads(parse_qs(event_loader("slack_interaction")["body"])["payload"][0])
    payload["response_url"] = response_url
    payload["actions"][0]["action_ts"] = action_ts
    return signed("slack_interaction", event_loader, payload=json.dumps(payload))


def body_of(out: dict[str, Any]) -> dict[str, Any]:
    return json.loads(out["body"]) if out.get("body") else {}


def assert_block_kit(blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None and parsed.to_dict() == block


# --- POST /slack/commands -------------------------------------------------------------------------------------
def test_a_command_is_acknowledged_then_the_estimate_is_posted_to_the_response_url(
    aws, slack, event, context
) -> None:
    # given the command, signed by Slack, answering to our fake Slack
    request = signed("slack_command", event, response_url=slack.response_url)
    # when the command function handles it
    out = COMMANDS.lambda_handler(request, context)
    # then Slack got an ephemeral acknowledgement ...
    assert out["statusCode"] == 200
    ack = body_of(out)
    assert ack["response_type"] == "ephemeral" and "10,000 users" in json.dumps(ack)
    # ... and the channel got the estimate as Block Kit: three architectures, "Measure these", costs
    assert len(slack.responses) == 1
    posted = slack.responses[0]
    assert posted["response_type"] == "in_channel"
    assert_block_kit(posted["blocks"])
    sections = [b for b in posted["blocks"] if b["type"] == "section" and b.get("fields")]
    assert len(sections) == 3
    assert all("/month" in s["fields"][0]["text"] for s in sections)
    assert "measure_these" in json.dumps(posted["blocks"])


def test_help_is_answered_at_once_and_starts_nothing(aws, slack, event, context) -> None:
    # given `/sizing help`
    out = COMMANDS.lambda_handler(
        signed("slack_command", event, text="help", response_url=slack.response_url), context
    )
    # then the grammar with examples comes back, only to the person who asked, and nothing is estimated
    assert out["statusCode"] == 200
    body = body_of(out)
    assert body["response_type"] == "ephemeral" and "Examples" in json.dumps(body)
    assert slack.responses == []


def test_an_unknown_model_gets_suggestions_not_an_error(aws, slack, event, context) -> None:
    # given a model name that is not in the catalog
    request = signed(
        "slack_command", event, text="10k users llama3.1-70b ttft<1s", response_url=slack.response_url
    )
    # when handled
    out = COMMANDS.lambda_handler(request, context)
    # then a friendly usage reply names the closest catalog models, and nothing is estimated
    assert out["statusCode"] == 200
    text = json.dumps(body_of(out))
    assert "llama3.1-70b" in text and "meta-llama/Llama-3.1-70B" in text
    assert slack.responses == []


def test_a_forged_command_is_refused_with_401_and_nothing_is_posted(aws, slack, event, context) -> None:
    # given a command signed with another secret
    request = signed("slack_command", event, secret="guessed", response_url=slack.response_url)
    # when handled
    out = COMMANDS.lambda_handler(request, context)
    # then
    assert out["statusCode"] == 401
    assert slack.responses == [] and slack.posts == []


def test_secrets_are_read_through_the_cache_not_per_request(aws, slack, event, context) -> None:
    # given three commands on one warm function
    for text in ("help", "help", "?"):
        COMMANDS.lambda_handler(
            signed("slack_command", event, text=text, response_url=slack.response_url), context
        )
    # then Secrets Manager was asked once (the value is cached for SLACK_SECRET_MAX_AGE_S)
    assert len(aws.secret_reads) == 1


# --- POST /slack/interactions -----------------------------------------------------------------------------------
def test_measure_these_starts_one_run_through_the_runs_service_however_often_clicked(
    aws, slack, event, context
) -> None:
    # given the "Measure these" button clicked, then clicked again a second later
    first = INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496830.000001"), context)
    second = INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496831.000002"), context)
    # then both are acknowledged
    assert first["statusCode"] == second["statusCode"] == 200
    # and exactly one run exists: from Slack, remembering the channel and thread to answer in, and executing
    items, _ = aws.store.list_runs()
    assert len(items) == 1
    run: Run = items[0]
    assert run.source == "slack" and run.status == "RUNNING"
    assert (
        run.slack is not None
        and run.slack.channel == "C2147483705"
        and run.slack.thread_ts == "1764496801.000200"
    )
    assert aws.sfn.describe_execution(executionArn=run.execution_arn)["status"] in ("RUNNING", "SUCCEEDED")
    # and the thread was told once that measuring started; the second click was told it already had
    assert len(slack.posts) == 1
    assert slack.posts[0]["thread_ts"] == "1764496801.000200" and run.run_id in json.dumps(slack.posts[0])
    assert any(f"Already measuring these: run {run.run_id}" in json.dumps(r) for r in slack.responses)


def test_a_replayed_interaction_is_refused(aws, slack, event, context) -> None:
    # given a genuine click already handled
    request = interaction(event, slack.response_url, "1764496830.000001")
    INTERACTIONS.lambda_handler(request, context)
    # when the very same signed request arrives again
    out = INTERACTIONS.lambda_handler(request, context)
    # then it is refused
    assert out["statusCode"] == 401


# --- EventBridge SizingRunCompleted -----------------------------------------------------------------------------
def _finished_run(store: SizingStore, sfn_status: str = "SUCCEEDED") -> Run:
    run = Run(
        run_id="0f8e1c2d3b4a59687766554433221100",
        model="meta-llama/Llama-3.1-8B",
        spec={
            "model": "llama-3.1-8b",
            "preset": "chat",
            "users": {"total": 500},
            "slo": {"ttft_ms": {"p95": 1000}},
        },
        top_k=3,
        source="slack",
        slack=SlackThread(channel="C2147483705", thread_ts="1764496801.000200", user="U2147483697"),
    )
    store.create_run(run)
    store.transition(
        run.run_id, "RUNNING", expected_from="PENDING", execution_arn="arn:aws:states:::execution:x:y"
    )
    store.transition(
        run.run_id,
        sfn_status,
        expected_from="RUNNING",
        **({"error": "estimated $9,000 > budget $5,000"} if sfn_status == "REFUSED" else {}),
    )
    return run


MEASURED = {
    "architectures": [
        {
            "rank": 1,
            "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand",
            "deployment": "eks",
            "instance_type": "g6e.xlarge",
            "instances": {"peak": 2},
            "tensor_parallel": 1,
            "quantization": "fp8",
            "engine": "vllm",
            "capacity_type": "on-demand",
            "predicted": {"ttft_ms": {"p95": 250.0}},
            "measured": {"ttft_ms": {"p95": 312.0}},
            "meets_slo": True,
            "cost": {"usd_per_month": 3100.0},
        }
    ]
}


def test_a_completed_run_posts_the_measured_ranking_in_its_thread_once(aws, slack, event, context) -> None:
    # given a run started from Slack that finished with a measured ranking
    run = _finished_run(aws.store)
    aws.store.put_ranking(run.run_id, MEASURED)
    completed = event("slack_run_completed")
    # when EventBridge delivers SizingRunCompleted, twice (at-least-once delivery)
    NOTIFIER.lambda_handler(completed, context)
    NOTIFIER.lambda_handler(completed, context)
    # then the thread got the measured ranking once, with the bot token, the report link and valid Block Kit
    assert len(slack.posts) == 1
    post = slack.posts[0]
    assert post["channel"] == "C2147483705" and post["thread_ts"] == "1764496801.000200"
    assert_block_kit(post["blocks"])
    text = json.dumps(post["blocks"])
    assert (
        "TTFT p95 312 ms" in text
        and "https://api.example/dev/runs/0f8e1c2d3b4a59687766554433221100/report" in text
    )


def test_a_refused_run_says_why_in_its_thread(aws, slack, event, context) -> None:
    # given a run the budget guard refused
    _finished_run(aws.store, "REFUSED")
    completed = event("slack_run_failed")
    # when notified
    NOTIFIER.lambda_handler(completed, context)
    # then the thread hears it was refused and why
    assert len(slack.posts) == 1 and "refused" in slack.posts[0]["text"]
    assert "budget" in json.dumps(slack.posts[0]["blocks"])


def test_runs_not_from_slack_are_left_alone(aws, slack, event, context) -> None:
    # given a run started through the HTTP API
    aws.store.create_run(
        Run(run_id="0f8e1c2d3b4a59687766554433221100", model="m", spec={}, top_k=1, source="api")
    )
    # when it completes
    out = NOTIFIER.lambda_handler(event("slack_run_completed"), context)
    # then nothing is posted
    assert out == {"notified": False} and slack.posts == []


# --- secrets ----------------------------------------------------------------------------------------------------
def test_no_secret_ever_reaches_the_logs(aws, slack, event, context, capsys, caplog) -> None:
    # given our logs and slack_sdk's (which logs every Web API request) at DEBUG; botocore stays at INFO, as in
    # Lambda: at DEBUG it dumps every response body, GetSecretValue's included, whatever the caller does
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="slack_sdk")
    powertools_logger.setLevel("DEBUG")
    try:
        # when a command, a forged command, a click and a completion are all handled
        COMMANDS.lambda_handler(signed("slack_command", event, response_url=slack.response_url), context)
        COMMANDS.lambda_handler(
            signed("slack_command", event, secret="bad", response_url=slack.response_url), context
        )
        INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496830.000001"), context)
        run_id = aws.store.list_runs()[0][0].run_id
        aws.store.transition(run_id, "SUCCEEDED", expected_from="RUNNING")
        aws.store.put_ranking(run_id, MEASURED)
        completed = event("slack_run_completed")
        completed["detail"]["run_id"] = run_id
        NOTIFIER.lambda_handler(completed, context)
    finally:
        powertools_logger.setLevel("INFO")
    # then things were posted, and neither the signing secret nor the bot token appears in any log output
    assert slack.posts and slack.responses
    captured = capsys.readouterr()
    logs = captured.out + captured.err + caplog.text
    assert (
        "Sending a request" in caplog.text
    )  # slack_sdk logged its chat.postMessage request, headers and all
    assert SIGNING_SECRET not in logs
    assert BOT_TOKEN not in logs and BOT_TOKEN.split("-")[-1] not in logs


def test_the_worker_reports_a_failed_estimate_to_the_person(aws, slack, context) -> None:
    # given a job whose spec is no longer valid (e.g. the catalog dropped the model)
    job = EstimateJob(
        raw_spec={"model": "gone/model", "preset": "chat", "users": {"total": 5}},
        response_url=slack.response_url,
    )
    # when the worker runs
    WORKER.lambda_handler(job.model_dump(mode="json"), context)
    # then the person gets an ephemeral explanation instead of silence
    assert len(slack.responses) == 1
    assert slack.responses[0]["response_type"] == "ephemeral"
    assert "gone/model" in json.dumps(slack.responses[0])


def test_with_a_reports_bucket_the_estimate_links_its_stored_report(aws, slack, event, context) -> None:
    # given the worker configured with the reports bucket
    s3 = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"))
    s3.create_bucket(Bucket="llm-sizing-reports-test")
    settings = deps.settings().model_copy(update={"report_bucket": "llm-sizing-reports-test"})
    aws.use(
        deps.build(
            settings,
            dynamodb=aws.ddb,
            sfn=aws.sfn,
            secretsmanager=aws.sm,
            s3=s3,
            invoker=lambda job: WORKER.lambda_handler(job.model_dump(mode="json"), context),
        )
    )
    # when a command is answered
    COMMANDS.lambda_handler(signed("slack_command", event, response_url=slack.response_url), context)
    # then the message's "Full report" button opens the report stored for this estimate
    posted = slack.responses[0]
    buttons = [e for b in posted["blocks"] if b["type"] == "actions" for e in b["elements"]]
    link = next(e["url"] for e in buttons if e.get("action_id") == "open_report")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="llm-sizing-reports-test")["Contents"]]
    report_key = next(k for k in keys if k.endswith("/report.html"))
    assert report_key.split("/")[-2] in link and "X-Amz-Signature" in link
    page = s3.get_object(Bucket="llm-sizing-reports-test", Key=report_key)["Body"].read().decode()
    assert "<html" in page.lower()


def test_sizing_serve_answers_slack_paths_and_estimates_in_the_background(aws, slack, event) -> None:
    # given the bot as `sizing serve` runs it: estimates in a background thread, Slack paths routed to the bot
    aws.use(
        deps.build(
            deps.settings(),
            dynamodb=aws.ddb,
            sfn=aws.sfn,
            secretsmanager=aws.sm,
            invoker=deps.background_invoker(),
        )
    )
    other = event("slack_command")
    other["path"] = "/runs"
    # when a signed command arrives on /slack/commands, and something else on /runs
    out = deps.route(signed("slack_command", event, response_url=slack.response_url))
    # then the command is acknowledged at once, the other path is left to the API, and the estimate follows
    assert out is not None and out["statusCode"] == 200
    assert deps.route(other) is None
    deadline = time.monotonic() + 60  # an estimate takes ~1-4 s; a minute covers a busy 2-core machine
    while not slack.responses and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slack.responses and slack.responses[0]["response_type"] == "in_channel"


def test_the_worker_posts_the_estimate_of_its_sample_job_in_the_channel(aws, slack, event, context) -> None:
    # given the sample job the commands function hands over, answering to our fake Slack
    job = event("slack_estimate_job")
    job["response_url"] = slack.response_url
    # when the worker runs it
    out = WORKER.lambda_handler(job, context)
    # then the estimate is in the channel, mentioning who asked
    assert out == {"posted": True}
    assert slack.responses[0]["response_type"] == "in_channel"
    assert "<@U2147483697>" in json.dumps(slack.responses[0]["blocks"])


def test_a_double_click_while_the_first_is_still_starting_the_run_starts_nothing_more(
    aws, slack, event, context
) -> None:
    # given a runs service slow enough that the second click arrives while the first is starting the run
    real = deps.runs()
    second: list[dict[str, Any]] = []

    class SlowRuns:
        def create_run(self, *args: Any, **kwargs: Any) -> Run:
            if not second:
                second.append(
                    INTERACTIONS.lambda_handler(
                        interaction(event, slack.response_url, "1764496830.500000"), context
                    )
                )
            return real.create_run(*args, **kwargs)

    aws.use(dataclasses.replace(deps.services(), given_runs=SlowRuns()))
    # when the first click is handled (and the second lands in the middle of it)
    first = INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496830.000001"), context)
    # then both are answered, one run exists, and the second clicker was told it is being started
    assert first["statusCode"] == second[0]["statusCode"] == 200
    assert len(aws.store.list_runs()[0]) == 1
    assert any("Already starting these" in json.dumps(r) for r in slack.responses)


def test_with_an_allowlist_only_listed_people_or_channels_start_measured_runs(
    aws, slack, event, context
) -> None:
    # given measured runs limited to one person and one channel, neither of them the clicker's
    settings = deps.settings().model_copy(update={"measure_allowed": "U0PLATFORM, C0SIZING"})
    aws.use(deps.build(settings, dynamodb=aws.ddb, sfn=aws.sfn, secretsmanager=aws.sm))
    # when someone else clicks "Measure these" in another channel
    out = INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496830.000001"), context)
    # then no run starts, and the clicker is told why
    assert out["statusCode"] == 200
    assert aws.store.list_runs()[0] == []
    assert any("limited to some people and channels" in json.dumps(r) for r in slack.responses)
    # and when the channel is on the list, the same click starts the run
    aws.use(
        deps.build(
            settings.model_copy(update={"measure_allowed": "C2147483705"}),
            dynamodb=aws.ddb,
            sfn=aws.sfn,
            secretsmanager=aws.sm,
        )
    )
    INTERACTIONS.lambda_handler(interaction(event, slack.response_url, "1764496831.000001"), context)
    assert len(aws.store.list_runs()[0]) == 1
