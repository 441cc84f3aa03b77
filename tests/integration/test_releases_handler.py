"""The model-release function on moto: sample ModelReleased events from events/ in; the catalog, watches' runs,
EventBridge events and Slack messages a user would see out. Also the rule → target wiring of template.yaml."""

from __future__ import annotations

import contextlib
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
from support.releases import RELEASED, TRIVIAL_ASL, support_chat

from sizing.lambdas import load_function
from sizing.releases import deps
from sizing.releases.catalog import ModelRegistry
from sizing.releases.hub import HubClient
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
#: A stand-in for the sizing state machine: one Pass state, enough to start executions.
WORKLOAD = support_chat("meta-llama/Llama-3.1-70B-Instruct")


HANDLER = load_function("functions/model_release/")


class FakeSlack:
    """Records what would be posted to Slack (the text and the Block Kit blocks)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def post(self, channel: str, message: Any, *, thread_ts: str | None = None) -> str:
        self.messages.append(
            {
                "channel": channel,
                "text": message.text,
                "blocks": message.blocks_json(),
                "thread_ts": thread_ts,
            }
        )
        return f"1743888000.{len(self.messages):06d}"


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-model-release-test", timeout_s=600, memory_mb=2048)


def _queue_on_bus(sqs: Any, events: Any, name: str, pattern: dict[str, Any]) -> str:
    """An SQS queue receiving what a rule with `pattern` on the bus matches (a stand-in for a subscriber)."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventBusName=BUS, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
    return url


def received(sqs: Any, url: str) -> list[dict[str, Any]]:
    out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [json.loads(m["Body"]) for m in out.get("Messages", [])]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws(), contextlib.ExitStack() as overrides:
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        events.create_event_bus(Name=BUS)
        role = f"arn:aws:iam::123456789012:role/sizing-{REGION}"
        arn = sfn.create_state_machine(name="llm-sizing-run-test", definition=TRIVIAL_ASL, roleArn=role)[
            "stateMachineArn"
        ]
        table = create_table(ddb, "llm-sizing-test")
        ready = _queue_on_bus(sqs, events, "estimates", {"detail-type": ["SizingEstimateReady"]})
        rejected = _queue_on_bus(sqs, events, "rejections", {"detail-type": ["ModelReleaseRejected"]})
        slack = FakeSlack()
        settings = ReleaseSettings(TABLE_NAME=table, EVENT_BUS_NAME=BUS, STATE_MACHINE_ARN=arn)

        # the feature's services over moto, for this test (`use` replaces them within it)
        def use(services: Any) -> None:
            overrides.enter_context(deps.services.override(services))

        use(deps.build(settings, dynamodb=ddb, sfn=sfn, events=events, slack_poster=slack))
        store = SizingStore(table, ddb)
        yield SimpleNamespace(
            ddb=ddb,
            sfn=sfn,
            events=events,
            sqs=sqs,
            table=table,
            store=store,
            registry=ModelRegistry(table, ddb),
            watches=WatchService(store, ModelRegistry(table, ddb).catalog),
            slack=slack,
            ready=ready,
            rejected=rejected,
            state_machine_arn=arn,
            use=use,
        )


def watch(aws: SimpleNamespace, **overrides: Any) -> str:
    request = {"name": "support chat", "spec": WORKLOAD, "model_pattern": "meta-llama/Llama-4-*", **overrides}
    return aws.watches.create(WatchRequest.model_validate(request)).watch_id


def runs(aws: SimpleNamespace) -> list[Any]:
    return aws.store.list_runs(limit=100)[0]


# --- a release re-sizes the matching watches ------------------------------------------------------------------
def test_a_release_is_added_to_the_catalog_and_each_matching_watch_hears_how_it_compares(
    aws, context
) -> None:
    # given a watch that measures and notifies Slack, and one watching another family
    measured = watch(aws, measure=True, top_k=2, budget_usd=300, notify={"slack_channel": "C0SIZING01"})
    watch(aws, name="qwen watchers", model_pattern="Qwen/Qwen3-*")
    # when Llama 4 Scout is announced
    outcome = HANDLER.lambda_handler(load_event("model_release_inline"), context)
    # then the model is in the catalog, with parameters from its config.json
    added = aws.registry.get(RELEASED)
    assert added is not None and added.moe is not None and added.moe.num_experts == 16
    # and only the Llama watch was re-sized, with a one-line verdict at its SLOs
    assert outcome["status"] == "processed"
    assert [w["watch_id"] for w in outcome["watches"]] == [measured]
    result = outcome["watches"][0]
    assert result["verdict"] == "cheaper"
    assert result["headline"].startswith("Llama-4-Scout-17B-16E on g6e.12xlarge: ")
    assert "% cheaper than your current best at the same SLOs" in result["headline"]
    # and a measured run of the new model started for it, within the watch's limits
    (run,) = runs(aws)
    assert run.run_id == result["run_id"] and run.status == "RUNNING"
    assert (run.model, run.source, run.top_k, run.budget_usd) == (RELEASED, "event", 2, 300)
    assert run.spec["slo"] == {"ttft_ms": {"p95": 1500.0}, "tpot_ms": {"p95": 80.0}}
    # and the owners were told on EventBridge and in Slack
    (ready,) = received(aws.sqs, aws.ready)
    assert ready["source"] == "llm-sizing.releases"
    assert ready["detail"]["watch_id"] == measured and ready["detail"]["headline"] == result["headline"]
    assert ready["detail"]["run_id"] == run.run_id
    (message,) = aws.slack.messages
    assert message["channel"] == "C0SIZING01"
    assert result["headline"] in message["text"] and run.run_id in message["text"]
    # and the watch keeps what it was told
    (kept,) = aws.watches.get(measured).recent_results
    assert (kept.model_id, kept.headline, kept.run_id) == (RELEASED, result["headline"], run.run_id)


def test_the_same_release_delivered_twice_yields_one_set_of_estimates_runs_and_messages(aws, context) -> None:
    # given a measuring watch, and a release already handled once
    watch(aws, measure=True, notify={"slack_channel": "#llm-platform"})
    first = HANDLER.lambda_handler(load_event("model_release_inline"), context)
    # when EventBridge delivers it again
    again = HANDLER.lambda_handler(load_event("model_release_inline"), context)
    # then the answer is the first one's, and nothing was started or sent twice
    assert again == first
    assert len(runs(aws)) == 1
    assert len(aws.slack.messages) == 1
    assert len(received(aws.sqs, aws.ready)) == 1


def test_an_estimate_only_watch_gets_no_run(aws, context) -> None:
    # given a watch that only wants estimates
    watch(aws, measure=False)
    # when
    outcome = HANDLER.lambda_handler(load_event("model_release_inline"), context)
    # then it is told how the model compares, and no run is started
    (result,) = outcome["watches"]
    assert result["verdict"] in ("cheaper", "costlier", "same") and result["run_id"] is None
    assert runs(aws) == []
    assert result["notified"] == ["eventbridge"]


# --- malformed releases ---------------------------------------------------------------------------------------
def test_a_malformed_config_is_rejected_with_its_reasons_and_nothing_is_stored(aws, context) -> None:
    # given a matching, measuring watch
    watch(aws, measure=True, notify={"slack_channel": "C0SIZING01"})
    before = aws.ddb.scan(TableName=aws.table)["Items"]
    # when a release arrives whose config.json lacks the layer count and spells a size as a string
    outcome = HANDLER.lambda_handler(load_event("model_release_malformed"), context)
    # then it is rejected, naming each problem
    assert outcome["status"] == "rejected"
    assert "cannot be read as a decoder LLM" in outcome["reason"]
    fields = {p["field"]: p["message"] for p in outcome["problems"]}
    assert fields["num_hidden_layers"] == "missing from config.json"
    assert "positive integer" in fields["intermediate_size"]
    # and nothing was stored, started or sent to the watch
    assert aws.ddb.scan(TableName=aws.table)["Items"] == before
    assert aws.registry.get("meta-llama/Llama-4-Broken-8B") is None
    assert runs(aws) == [] and aws.slack.messages == [] and received(aws.sqs, aws.ready) == []
    # but whoever announced it can see why on the bus
    (rejection,) = received(aws.sqs, aws.rejected)
    assert rejection["detail"]["model_id"] == "meta-llama/Llama-4-Broken-8B"
    assert rejection["detail"]["reason"] == outcome["reason"]


def test_an_event_without_a_model_id_is_rejected_naming_the_field(aws, context) -> None:
    # given
    event = load_event("model_release_inline")
    del event["detail"]["model_id"]
    # when
    outcome = HANDLER.lambda_handler(event, context)
    # then
    assert outcome["status"] == "rejected"
    assert {"field": "detail.model_id", "message": "Field required"} in outcome["problems"]


def test_a_config_url_off_the_hub_is_refused(aws, context) -> None:
    # given a release pointing at some other server
    event = load_event("model_release_url")
    event["detail"]["config"] = "http://169.254.169.254/latest/meta-data/config.json"
    # when
    outcome = HANDLER.lambda_handler(event, context)
    # then nothing is fetched from there and nothing stored
    assert outcome["status"] == "rejected"
    assert outcome["problems"][0]["field"] == "detail.config"
    assert aws.registry.get(RELEASED) is None


# --- config by URL, from the Hub (a local fake) ---------------------------------------------------------------
def test_a_config_given_by_url_is_fetched_from_the_hub(aws, context, httpserver) -> None:
    # given a Hub serving the model's config.json, and a release pointing at it
    config = json.loads((FIXTURES / "meta-llama--Llama-4-Scout-17B-16E.config.json").read_text())
    httpserver.expect_request(f"/{RELEASED}/resolve/main/config.json").respond_with_json(config)
    hub = HubClient(httpserver.url_for("/").rstrip("/"), sleep=lambda _s: None)
    aws.use(deps.build(deps.settings(), dynamodb=aws.ddb, sfn=aws.sfn, events=aws.events, hub=hub))
    event = load_event("model_release_url")
    event["detail"]["config"] = hub.config_url(RELEASED)
    # when
    outcome = HANDLER.lambda_handler(event, context)
    # then
    assert outcome["status"] == "processed" and outcome["watches"] == []
    added = aws.registry.get(RELEASED)
    assert added is not None and added.layers == 48
    assert hub.config_url(RELEASED) in added.source


def test_a_gated_config_is_rejected_with_the_hubs_answer(aws, context, httpserver) -> None:
    # given a Hub that refuses the config (a gated repository, no token)
    httpserver.expect_request(f"/{RELEASED}/resolve/main/config.json").respond_with_data("gated", status=403)
    hub = HubClient(httpserver.url_for("/").rstrip("/"), sleep=lambda _s: None)
    aws.use(deps.build(deps.settings(), dynamodb=aws.ddb, sfn=aws.sfn, events=aws.events, hub=hub))
    event = load_event("model_release_url")
    event["detail"]["config"] = hub.config_url(RELEASED)
    # when
    outcome = HANDLER.lambda_handler(event, context)
    # then
    assert outcome["status"] == "rejected"
    assert "403" in outcome["reason"]
    assert aws.registry.get(RELEASED) is None


# --- template.yaml: the rule on the bus reaches this function -------------------------------------------------
def _function(template: dict[str, Any], code_uri: str) -> dict[str, Any]:
    (found,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function" and r["Properties"].get("CodeUri") == code_uri
    ]
    return found


def test_the_templates_rule_routes_a_published_release_from_the_bus_to_this_function(aws, context) -> None:
    # given the rule template.yaml declares for the function, recreated on the (moto) bus with a queue as target
    template = load_template()
    fn = _function(template, "functions/model_release/")
    (rule,) = [e["Properties"] for e in fn["Properties"]["Events"].values() if e["Type"] == "EventBridgeRule"]
    assert rule["EventBusName"] == {"Ref": "SizingEventBus"}
    assert template["Resources"]["SizingEventBus"]["Type"] == "AWS::Events::EventBus"
    target = _queue_on_bus(aws.sqs, aws.events, "model-release-function", rule["Pattern"])
    # when anyone publishes the sample release on the bus
    sample = load_event("model_release_inline")
    aws.events.put_events(
        Entries=[
            {
                "Source": sample["source"],
                "DetailType": sample["detail-type"],
                "Detail": json.dumps(sample["detail"]),
                "EventBusName": BUS,
            }
        ]
    )
    # then the rule delivers it, and the function handles what it delivers
    (delivered,) = received(aws.sqs, target)
    outcome = HANDLER.lambda_handler(delivered, context)
    assert outcome["status"] == "processed" and outcome["model_id"] == RELEASED
    # and the function's own events do not loop back into it
    for own in ("SizingEstimateReady", "ModelReleaseRejected"):
        aws.events.put_events(
            Entries=[
                {"Source": "llm-sizing.releases", "DetailType": own, "Detail": "{}", "EventBusName": BUS}
            ]
        )
    assert received(aws.sqs, target) == []


class BrokenSlack:
    def post(self, channel: str, message: Any, *, thread_ts: str | None = None) -> str:
        raise ConnectionError("slack.com unreachable")


def test_a_slack_outage_is_reported_without_losing_the_run_or_starting_another(aws, context) -> None:
    # given a measuring watch whose Slack channel cannot be reached
    watch(aws, measure=True, notify={"slack_channel": "C0SIZING01"})
    aws.use(
        deps.build(
            deps.settings(), dynamodb=aws.ddb, sfn=aws.sfn, events=aws.events, slack_poster=BrokenSlack()
        )
    )
    # when the release arrives, and is delivered again
    first = HANDLER.lambda_handler(load_event("model_release_inline"), context)
    HANDLER.lambda_handler(load_event("model_release_inline"), context)
    # then the watch was re-sized and measured once, EventBridge was told, and the Slack failure is on record
    (result,) = first["watches"]
    assert result["run_id"] is not None and len(runs(aws)) == 1
    assert result["notified"] == ["eventbridge"]
    assert result["notify_errors"] == ["slack: Slack did not take the message: ConnectionError"]
