"""A release fanned out on moto's SQS: the model-release function enqueues one job per (model, watch), the
fan-out function re-sizes them in batches with partial-batch failure reporting, the queue's redrive policy from
template.yaml moves a poison watch to the dead-letter queue. Sample events from events/ in; the watches'
results, EventBridge events, Slack messages and runs a user would see out."""

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
from sizing.releases.fanout import LocalEventSourceMapping, WatchJob, sqs_event
from sizing.releases.settings import ReleaseSettings
from sizing.releases.watches import WatchRequest, WatchService
from sizing.store import SizingStore, create_table
from sizing.store.schema import load_template

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
BUS = "llm-sizing-test"
WORKLOAD = support_chat("meta-llama/Llama-3.1-70B-Instruct")

RELEASE = load_function("functions/model_release/")
FANOUT = load_function("functions/release_fanout/")


class FakeSlack:
    """Records what would be posted to Slack (text and Block Kit blocks)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def post(self, channel: str, message: Any, *, thread_ts: str | None = None) -> str:
        self.messages.append({"channel": channel, "text": message.text, "blocks": message.blocks_json()})
        return f"1743888000.{len(self.messages):06d}"


def _resource(template: dict[str, Any], name: str) -> dict[str, Any]:
    return template["Resources"][name]["Properties"]


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-release-fanout-test", timeout_s=180, memory_mb=2048)


def _queue_on_bus(sqs: Any, events: Any, name: str, pattern: dict[str, Any]) -> str:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventBusName=BUS, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
    return url


def received(sqs: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        if not got.get("Messages"):
            return out
        out += [json.loads(m["Body"]) for m in got["Messages"]]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    template = load_template()
    queue_props = _resource(template, "ReleaseFanoutQueue")
    (jobs_source,) = template["Resources"]["ReleaseFanoutFunction"]["Properties"]["Events"].values()
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
        # the fan-out queue and its dead-letter queue as template.yaml declares them
        dlq = sqs.create_queue(QueueName="release-fanout-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        redrive = {**queue_props["RedrivePolicy"], "deadLetterTargetArn": dlq_arn}
        queue = sqs.create_queue(
            QueueName="release-fanout",
            Attributes={
                "VisibilityTimeout": str(queue_props["VisibilityTimeout"]),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        ready = _queue_on_bus(sqs, events, "estimates", {"detail-type": ["SizingEstimateReady"]})
        slack = FakeSlack()
        settings = ReleaseSettings(
            TABLE_NAME=table, EVENT_BUS_NAME=BUS, STATE_MACHINE_ARN=arn, RELEASE_QUEUE_URL=queue
        )

        # the feature's services over moto, for this test (`use` replaces them within it)
        def use(services: Any) -> None:
            overrides.enter_context(deps.services.override(services))

        use(deps.build(settings, dynamodb=ddb, sfn=sfn, events=events, sqs=sqs, slack_poster=slack))
        store = SizingStore(table, ddb)
        yield SimpleNamespace(
            ddb=ddb,
            sqs=sqs,
            store=store,
            registry=ModelRegistry(table, ddb),
            watches=WatchService(store, ModelRegistry(table, ddb).catalog),
            slack=slack,
            ready=ready,
            queue=queue,
            dlq=dlq,
            max_receives=int(redrive["maxReceiveCount"]),
            mapping=LocalEventSourceMapping(
                sqs, queue, FANOUT.lambda_handler, batch_size=jobs_source["Properties"]["BatchSize"]
            ),
            use=use,
        )


def watch(aws: SimpleNamespace, name: str = "support chat", **overrides: Any) -> str:
    spec = {**WORKLOAD, "name": name}
    request = {"name": name, "spec": spec, "model_pattern": "meta-llama/Llama-4-*", **overrides}
    return aws.watches.create(WatchRequest.model_validate(request)).watch_id


def results(aws: SimpleNamespace, watch_id: str) -> list[Any]:
    return aws.watches.results(watch_id, limit=None)


def dead_letters(aws: SimpleNamespace) -> list[WatchJob]:
    got = aws.sqs.receive_message(QueueUrl=aws.dlq, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [WatchJob.model_validate_json(m["Body"]) for m in got.get("Messages", [])]


# --- fan-out ------------------------------------------------------------------------------------------------
def test_a_release_enqueues_one_job_per_matching_watch_and_each_is_resized_on_its_own(aws, context) -> None:
    # given three Llama watches (one posting to Slack) and one watching another family
    ids = [watch(aws, f"chat {i}") for i in range(2)]
    ids.append(watch(aws, "chat slack", notify={"slack_channel": "C0SIZING01"}))
    other = watch(aws, "qwen", model_pattern="Qwen/Qwen3-*")
    # when Llama 4 Scout is announced
    outcome = RELEASE.lambda_handler(load_event("model_release_inline"), context)
    # then the release function only added the model and queued a job per matching watch
    assert outcome["status"] == "processed" and outcome["enqueued"] == 3 and outcome["watches"] == []
    assert aws.registry.get(RELEASED) is not None
    # and when the fan-out function drains the queue, every matching watch has its verdict
    report = aws.mapping.drain(context)
    assert (report.succeeded, report.failed_attempts) == (3, 0)
    for watch_id in ids:
        (result,) = results(aws, watch_id)
        assert result.model_id == RELEASED and result.config_digest == outcome["config_digest"]
        assert result.headline.startswith("Llama-4-Scout-17B-16E on ")
    assert results(aws, other) == []
    # and each owner heard on EventBridge, and the Slack watch got a Block Kit message
    assert sorted(e["detail"]["watch_id"] for e in received(aws.sqs, aws.ready)) == sorted(ids)
    (message,) = aws.slack.messages
    assert message["channel"] == "C0SIZING01"
    assert message["blocks"][0]["type"] == "header" and RELEASED in message["blocks"][0]["text"]["text"]
    assert results(aws, ids[2])[0].headline in message["text"]
    assert dead_letters(aws) == []


def test_watches_stored_in_bulk_are_each_matched_once_with_their_options(aws, context) -> None:
    # given 60 watches stored at once (three BatchWriteItem pages), every third watching another family
    requests = [
        WatchRequest.model_validate(
            {
                "name": f"bulk {i}",
                "spec": WORKLOAD,
                "model_pattern": "Qwen/Qwen3-*" if i % 3 == 0 else "meta-llama/Llama-4-*",
                "measure": i % 2 == 0,
            }
        )
        for i in range(60)
    ]
    created = aws.watches.create_many(requests)
    # when Llama 4 Scout is released
    outcome = RELEASE.lambda_handler(load_event("model_release_inline"), context)
    # then one job was queued per Llama watch, and each watch reads back with the options it was given
    assert outcome["enqueued"] == 40
    assert sorted(aws.watches.matching_ids(RELEASED)) == sorted(
        w.watch_id for w in created if w.model_pattern.startswith("meta-llama/")
    )
    assert [aws.watches.find(w.watch_id).measure for w in created[:4]] == [True, False, True, False]


# --- faults -------------------------------------------------------------------------------------------------
def test_a_watch_whose_estimate_fails_lands_in_the_dead_letter_queue_after_its_retries(
    aws, context, monkeypatch
) -> None:
    # given three watches, one of whose estimates fails every time (a fault in the estimator)
    import sizing.plan.search

    real = sizing.plan.search.estimate

    def estimate(spec: Any, **kwargs: Any) -> Any:
        if spec.name == "poison":
            raise RuntimeError("the simulator diverged")
        return real(spec, **kwargs)

    monkeypatch.setattr(sizing.plan.search, "estimate", estimate)
    good = [watch(aws, "chat a"), watch(aws, "chat b")]
    poison = watch(aws, "poison")
    # when the release fans out and the queue is drained
    RELEASE.lambda_handler(load_event("model_release_inline"), context)
    report = aws.mapping.drain(context)
    # then the others completed
    for watch_id in good:
        assert len(results(aws, watch_id)) == 1
    assert sorted(e["detail"]["watch_id"] for e in received(aws.sqs, aws.ready)) == sorted(good)
    # and the poison watch was tried maxReceiveCount times, then moved to the dead-letter queue
    assert report.failed_attempts == aws.max_receives
    (dead,) = dead_letters(aws)
    assert (dead.watch_id, dead.model_id) == (poison, RELEASED)
    assert results(aws, poison) == []


def test_redelivering_a_batch_resizes_nothing_twice(aws, context) -> None:
    # given a measuring Slack watch and an estimate-only one, and a batch the fan-out function handled whose
    # messages came back (the invocation timed out before Lambda deleted them)
    measured = watch(aws, "measured", measure=True, notify={"slack_channel": "C0SIZING01"})
    plain = watch(aws, "plain")
    RELEASE.lambda_handler(load_event("model_release_inline"), context)
    got = aws.sqs.receive_message(QueueUrl=aws.queue, MaxNumberOfMessages=10, AttributeNames=["All"])
    batch = got["Messages"]
    first = FANOUT.lambda_handler(sqs_event(batch, aws.mapping.queue_arn, REGION), context)
    assert first == {"batchItemFailures": []}
    for m in batch:
        aws.sqs.change_message_visibility(
            QueueUrl=aws.queue, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
        )
    # when the batch is delivered again
    report = aws.mapping.drain(context)
    # then it succeeds, and nothing was estimated, started or sent twice
    assert (report.succeeded, report.failed_attempts) == (2, 0)
    assert [len(results(aws, w)) for w in (measured, plain)] == [1, 1]
    assert len(aws.store.list_runs(limit=100)[0]) == 1
    assert len(aws.slack.messages) == 1
    assert len(received(aws.sqs, aws.ready)) == 2


def test_a_malformed_job_is_reported_failed_while_the_rest_of_the_batch_completes(aws, context) -> None:
    # given the sample batch: a job for a watch that no longer exists, and a message that is not a job
    RELEASE.lambda_handler(load_event("model_release_inline"), context)
    event = load_event("release_fanout_jobs")
    # when the fan-out function handles it
    answer = FANOUT.lambda_handler(event, context)
    # then only the malformed message is redelivered; the deleted watch's job is done with nothing to do
    assert answer == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}


# --- re-release with a changed config.json --------------------------------------------------------------------
def test_a_re_release_with_a_changed_config_resizes_its_watches_again(aws, context) -> None:
    # given a watch re-sized for Llama 4 Scout
    watch_id = watch(aws, notify={"slack_channel": "C0SIZING01"})
    first = RELEASE.lambda_handler(load_event("model_release_inline"), context)
    aws.mapping.drain(context)
    # when the model is re-released with a corrected config.json (40 layers), then delivered once more
    second = RELEASE.lambda_handler(load_event("model_release_config_changed"), context)
    aws.mapping.drain(context)
    RELEASE.lambda_handler(load_event("model_release_config_changed"), context)
    aws.mapping.drain(context)
    # then the catalog holds the new config and the watch was re-sized against it, once
    added = aws.registry.get(RELEASED)
    assert added is not None and added.layers == 40
    assert second["config_digest"] != first["config_digest"]
    kept = results(aws, watch_id)
    assert sorted(r.config_digest for r in kept) == sorted([first["config_digest"], second["config_digest"]])
    digests = [e["detail"]["config_digest"] for e in received(aws.sqs, aws.ready)]
    assert sorted(digests) == sorted([first["config_digest"], second["config_digest"]])
    assert len(aws.slack.messages) == 2


def test_jobs_of_a_superseded_config_are_left_to_the_newer_release(aws, context) -> None:
    # given a watch, and two releases of the model enqueued before either was re-sized
    watch_id = watch(aws)
    RELEASE.lambda_handler(load_event("model_release_inline"), context)
    newer = RELEASE.lambda_handler(load_event("model_release_config_changed"), context)
    # when the queue is drained
    report = aws.mapping.drain(context)
    # then the watch was re-sized once, against the config the catalog now holds
    assert report.failed_attempts == 0
    (result,) = results(aws, watch_id)
    assert result.config_digest == newer["config_digest"]


# --- template.yaml --------------------------------------------------------------------------------------------
def test_the_template_fans_out_through_a_queue_with_a_dead_letter_queue_and_an_alarm() -> None:
    # given template.yaml
    resources = load_template()["Resources"]
    release = resources["ModelReleaseFunction"]["Properties"]
    fanout = resources["ReleaseFanoutFunction"]["Properties"]
    queue = resources["ReleaseFanoutQueue"]["Properties"]
    alarm = resources["ReleaseFanoutDeadLetterAlarm"]["Properties"]
    # then the release function sends to the queue the fan-out function consumes with partial batch responses
    assert release["Environment"]["Variables"]["RELEASE_QUEUE_URL"] == {"Ref": "ReleaseFanoutQueue"}
    (source,) = fanout["Events"].values()
    assert source["Type"] == "SQS" and source["Properties"]["Queue"] == {
        "Fn::GetAtt": "ReleaseFanoutQueue.Arn"
    }
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # and a batch still running is never handed to a second consumer (visibility ≥ 6 × the timeout)
    assert queue["VisibilityTimeout"] >= 6 * fanout["Timeout"]
    # and failed jobs go to the dead-letter queue, whose depth raises the alarm
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": "ReleaseFanoutDeadLetterQueue.Arn"}
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": "ReleaseFanoutDeadLetterQueue.QueueName"}
