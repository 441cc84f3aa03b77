"""The release poller on moto, against a local fake of the Hugging Face Hub (pytest-httpserver) replaying the
recorded answers in tests/fixtures/hf/ — never the network."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from fakes.lambda_context import lambda_context
from moto import mock_aws
from support.events import load_event
from werkzeug import Request, Response

from sizing.lambdas import load_function
from sizing.releases import deps
from sizing.releases.catalog import ModelRegistry
from sizing.releases.events import parse_model_released, parse_poll_request
from sizing.releases.hub import HubClient
from sizing.releases.poller import SeenState
from sizing.releases.settings import ReleaseSettings
from sizing.releases.watches import WatchRequest, WatchService
from sizing.store import SizingStore, create_table
from sizing.store.schema import load_template

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
FIXTURES = ROOT / "tests" / "fixtures" / "hf"
REGION = "us-east-1"
BUS = "llm-sizing-test"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E"
MAVERICK = "meta-llama/Llama-4-Maverick-17B-128E"
LISTING_QUERY = {"author": "meta-llama", "sort": "createdAt", "direction": "-1", "limit": "100"}
#: Before the Llama 4 releases of 2 April 2025 in the recorded listing.
WATCHED_SINCE = "2025-03-01T00:00:00.000000Z"
WORKLOAD: dict[str, Any] = {
    "name": "support-chat",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "rate": {"peak_rps": 5},
    "tokens": {"input": {"mean": 1000, "p95": 3000}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 1500}, "tpot_ms": {"p95": 80}},
}


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


HANDLER = load_function("functions/release_poller/")


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-release-poller-test", timeout_s=120, memory_mb=512)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, httpserver: Any) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        events.create_event_bus(Name=BUS)
        table = create_table(ddb, "llm-sizing-test")
        # what the model-release function's rule would receive (the pattern template.yaml declares)
        url = sqs.create_queue(QueueName="releases")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="releases", EventBusName=BUS, EventPattern=json.dumps(_release_rule_pattern()))
        events.put_targets(Rule="releases", EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
        waits: list[float] = []
        hub = HubClient(httpserver.url_for("/").rstrip("/"), sleep=waits.append)

        # the feature's services over moto, for this test (`use` replaces them within it)
        def use(services: Any) -> None:
            overrides.enter_context(deps.services.override(services))

        use(
            deps.build(
                ReleaseSettings(TABLE_NAME=table, EVENT_BUS_NAME=BUS), dynamodb=ddb, events=events, hub=hub
            )
        )
        store = SizingStore(table, ddb)
        yield SimpleNamespace(
            ddb=ddb,
            events=events,
            sqs=sqs,
            queue=url,
            table=table,
            store=store,
            watches=WatchService(store, ModelRegistry(table, ddb).catalog),
            seen=SeenState(table, ddb),
            hub=httpserver,
            waits=waits,
            use=use,
        )


def _release_rule_pattern() -> dict[str, Any]:
    fn = load_template()["Resources"]["ModelReleaseFunction"]
    (rule,) = [e["Properties"] for e in fn["Properties"]["Events"].values() if e["Type"] == "EventBridgeRule"]
    return dict(rule["Pattern"])


def released(aws: SimpleNamespace) -> list[dict[str, Any]]:
    out = aws.sqs.receive_message(QueueUrl=aws.queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [json.loads(m["Body"]) for m in out.get("Messages", [])]


def watch(
    aws: SimpleNamespace, pattern: str = "meta-llama/Llama-4-*", since: str | None = WATCHED_SINCE
) -> str:
    """A watch on `pattern`, created at `since` (None: now)."""
    created = aws.watches.create(
        WatchRequest(name=f"watching {pattern}", spec=WORKLOAD, model_pattern=pattern)
    )
    if since:
        stored = aws.store.get_watch(created.watch_id)
        aws.store.put_watch(stored.model_copy(update={"created_at": since}))
    return created.watch_id


def serve_hub(aws: SimpleNamespace) -> None:
    """The recorded Hub: the meta-llama listing, Scout's config.json, and Maverick's refused (gated)."""
    aws.hub.expect_request("/api/models", query_string=LISTING_QUERY).respond_with_json(
        fixture("models_author_meta-llama.json")
    )
    aws.hub.expect_request(f"/{SCOUT}/resolve/main/config.json").respond_with_json(
        fixture("meta-llama--Llama-4-Scout-17B-16E.config.json")
    )
    aws.hub.expect_request(f"/{MAVERICK}/resolve/main/config.json").respond_with_data(
        "Access to model meta-llama/Llama-4-Maverick-17B-128E is restricted.", status=403
    )


# --- detection ------------------------------------------------------------------------------------------------
def test_a_poll_announces_the_new_models_a_watch_wants_and_no_others(aws, context) -> None:
    # given a watch on Llama 4 since March 2025, and the recorded Hub
    watch(aws)
    serve_hub(aws)
    # when the schedule fires
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then Scout is announced on the bus with its config.json inline, as the release function expects it
    assert report["orgs"] == ["meta-llama"]
    assert report["emitted"] == [SCOUT]
    (event,) = released(aws)
    release = parse_model_released(event)
    assert release.model_id == SCOUT and release.source == "huggingface-hub"
    assert release.config == fixture("meta-llama--Llama-4-Scout-17B-16E.config.json")
    # and the gated Maverick is remembered as unavailable, with the Hub's answer
    assert report["unavailable"] == [
        {
            "model_id": MAVERICK,
            "reason": f"the Hub answered 403 for {aws.hub.url_for('/')}{MAVERICK}/resolve/main/config.json",
        }
    ]
    # and Llama Guard 4 (not Llama-4-*) and Llama 3.1 (older) were not candidates
    assert report["listed"] == 4 and report["wanted"] == 2


def test_a_second_poll_announces_nothing_already_seen(aws, context) -> None:
    # given a poll that has announced Scout and given up on Maverick
    watch(aws)
    serve_hub(aws)
    HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    released(aws)
    # when the next poll runs
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then nothing is announced again
    assert report["emitted"] == [] and report["already_seen"] == 2
    assert released(aws) == []
    assert aws.seen.get(SCOUT).status == "emitted"
    assert aws.seen.get(MAVERICK).status == "unavailable"


def test_models_published_before_the_watch_was_made_are_not_announced(aws, context) -> None:
    # given a watch made today: the recorded Llama 4 models are older
    watch(aws, since=None)
    serve_hub(aws)
    # when
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then the back catalogue is left alone (no config.json fetched, nothing announced)
    assert report["wanted"] == 0 and report["emitted"] == []
    assert [r.path for r, _ in aws.hub.log] == ["/api/models"]


def test_without_watches_the_hub_is_not_asked(aws, context) -> None:
    # when
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then
    assert report["orgs"] == [] and aws.hub.log == []


# --- a slow or busy Hub ---------------------------------------------------------------------------------------
def test_a_busy_hub_is_retried_with_backoff_and_its_retry_after_honoured(aws, context) -> None:
    # given a Hub that answers 503, then 429 asking for 3 s, then the listing
    watch(aws)
    aws.hub.expect_oneshot_request("/api/models").respond_with_data("busy", status=503)
    aws.hub.expect_oneshot_request("/api/models").respond_with_data(
        "slow down", status=429, headers={"Retry-After": "3"}
    )
    serve_hub(aws)
    # when
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then the poll got through, having waited 1 s (backoff) and then the 3 s asked for
    assert report["emitted"] == [SCOUT] and report["errors"] == []
    assert aws.waits == [1.0, 3.0]


def test_a_hub_that_stays_down_is_reported_and_its_releases_found_on_the_next_poll(aws, context) -> None:
    # given a Hub failing every attempt
    watch(aws)
    aws.hub.expect_request("/api/models").respond_with_data("down", status=502)
    # when
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then the failure is reported after the bounded retries, and nothing is marked seen
    assert report["errors"] == [
        {
            "org": "meta-llama",
            "reason": f"the Hub answered 502 for {aws.hub.url_for('/api/models')}?author=meta-llama&sort=createdAt&direction=-1&limit=100",
        }
    ]
    assert aws.waits == [1.0, 2.0, 4.0]
    assert aws.seen.get(SCOUT) is None
    # when the Hub is back
    aws.hub.clear()
    serve_hub(aws)
    again = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then the release is announced
    assert again["emitted"] == [SCOUT]


def test_a_hub_that_does_not_answer_in_time_is_given_up_on(aws, context, httpserver) -> None:
    # given a Hub that takes longer than the client's timeout
    watch(aws)

    def slow(_request: Request) -> Response:
        time.sleep(0.6)
        return Response("[]", content_type="application/json")

    httpserver.expect_request("/api/models").respond_with_handler(slow)
    hub = HubClient(httpserver.url_for("/").rstrip("/"), timeout_s=0.2, attempts=2, sleep=lambda _s: None)
    aws.use(deps.build(deps.settings(), dynamodb=aws.ddb, events=aws.events, hub=hub))
    # when
    started = time.monotonic()
    report = HANDLER.lambda_handler(load_event("scheduler_poll"), context)
    # then the poll ends with the reason instead of hanging
    assert "did not answer" in report["errors"][0]["reason"]
    assert time.monotonic() - started < 5


# --- template.yaml: the schedule ------------------------------------------------------------------------------
def test_the_templates_schedule_passes_what_the_poller_reads(aws) -> None:
    # given the ScheduleV2 event template.yaml declares on the poller
    fn = load_template()["Resources"]["ReleasePollerFunction"]["Properties"]
    (schedule,) = [e["Properties"] for e in fn["Events"].values() if e["Type"] == "ScheduleV2"]
    # when Scheduler fills in its context attributes
    sample = load_event("scheduler_poll")
    payload = (
        schedule["Input"]
        .replace("<aws.scheduler.scheduled-time>", sample["scheduled_time"])
        .replace("<aws.scheduler.execution-id>", sample["execution_id"])
    )
    # then the poller accepts it, and it is the sample event's shape
    assert json.loads(payload) == sample
    assert parse_poll_request(json.loads(payload)).execution_id == sample["execution_id"]
    assert schedule["ScheduleExpression"].startswith("rate(")
    # and polls never overlap (they would race on the seen-state)
    assert fn["ReservedConcurrentExecutions"] == 1
