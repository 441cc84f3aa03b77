"""Fan-out of a release: one SQS message per (model, watch), consumed in batches by the release fan-out function
with Powertools' batch processor and partial-batch failure reporting.

A release reaching thousands of watches cannot re-size them inside one invocation (Lambda stops a function
after 15 minutes, and one bad watch would fail the rest with it). So the release function only adds the model
to the catalog and enqueues a `WatchJob` per matching watch; the fan-out function re-sizes each job on its own,
reports the ones that failed (`batchItemFailures`) so only those are redelivered, and the queue's redrive
policy moves a job that keeps failing to the dead-letter queue, where an alarm reports it.

On the embedded AWS (moto) the same queue, redrive policy and handler run: `LocalEventSourceMapping` does what
Lambda's event source mapping does (receive a batch, invoke, delete what succeeded, let the failures come back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field

from sizing.base.errors import Unavailable
from sizing.base.strict import Strict
from sizing.releases.catalog import BatchCache

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

    from sizing.releases.service import ReleaseService, WatchOutcome

#: SendMessageBatch and DeleteMessageBatch take at most 10 entries, ReceiveMessage returns at most 10
#: (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
SQS_BATCH_MAX = 10
#: Times the entries SQS did not take in a SendMessageBatch are sent again before the release itself fails
#: (and is retried by EventBridge/Lambda): SQS reports throttled or internal per-entry failures as retryable.
SEND_RETRIES = 3


class WatchJob(Strict):
    """The message of one (model, watch) pair: what to re-size, and against which config.json of the model."""

    v: Literal[1] = 1
    model_id: str
    config_digest: str = Field(description="digest of the released config.json (`events.config_digest`)")
    watch_id: str

    def payload(self) -> dict[str, str]:
        """The idempotency payload: a watch is re-sized once per model and config."""
        return {"model_id": self.model_id, "config_digest": self.config_digest, "watch_id": self.watch_id}


class WatchQueue:
    """Sends jobs to the fan-out queue. `client`: boto3 SQS (made lazily when not given)."""

    def __init__(self, queue_url: str, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            import boto3

            self._client = boto3.client("sqs")
        return self._client

    def send(self, jobs: Sequence[WatchJob]) -> int:
        """Enqueue every job (10 per SendMessageBatch); Unavailable when SQS keeps refusing some, so the
        release is retried (its jobs are idempotent: a job sent twice re-sizes once)."""
        for start in range(0, len(jobs), SQS_BATCH_MAX):
            pending = {str(i): job for i, job in enumerate(jobs[start : start + SQS_BATCH_MAX])}
            for _attempt in range(SEND_RETRIES + 1):
                entries: list[SendMessageBatchRequestEntryTypeDef] = [
                    {"Id": i, "MessageBody": job.model_dump_json()} for i, job in pending.items()
                ]
                try:
                    out = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
                except (ClientError, BotoCoreError) as exc:
                    raise Unavailable(
                        f"the fan-out queue did not take the jobs: {type(exc).__name__}"
                    ) from None
                failed = {f["Id"] for f in out.get("Failed", [])}
                pending = {i: job for i, job in pending.items() if i in failed}
                if not pending:
                    break
            if pending:
                raise Unavailable(
                    f"the fan-out queue refused {len(pending)} jobs after {SEND_RETRIES} retries"
                )
        return len(jobs)


# --- the consumer: the fan-out function's logic -----------------------------------------------------------------
class FanoutConsumer:
    """Re-sizes each job of an SQS batch on its own (Powertools BatchProcessor): a job that raises is reported
    in `batchItemFailures` and redelivered alone, the others are done. What raises: a transient failure
    (`Unavailable`), another delivery holding the same job, or a fault of the estimate itself; what does not:
    a watch deleted since, a model re-released since (its newer jobs do the work), a workload the new model
    cannot serve (recorded on the watch as its result)."""

    def __init__(self, service: ReleaseService, lambda_context: Any = None) -> None:
        self.service = service
        self.lambda_context = lambda_context
        self.outcomes: list[WatchOutcome] = []

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.batch import (
            BatchProcessor,
            EventType,
            process_partial_response,
        )
        from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

        # a batch whose every job failed answers them all in batchItemFailures (the same redelivery as raising,
        # without an invocation error per poison job)
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        cache = BatchCache(self.service.registry)

        def record_handler(record: SQSRecord) -> dict[str, Any]:
            job = WatchJob.model_validate_json(record.body)
            outcome = self.service.resize_job(job, cache)
            self.outcomes.append(outcome)
            return outcome.model_dump(mode="json")

        answer = process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=self.lambda_context
        )
        return dict(answer)


# --- the embedded AWS: Lambda's event source mapping, over moto's SQS -----------------------------------------
def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """ReceiveMessage's messages as the Lambda SQS event the event source mapping would invoke with."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes", {})),
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


@dataclass
class DrainReport:
    """What a drain did: batches invoked, records that succeeded, record attempts that failed."""

    batches: int = 0
    succeeded: int = 0
    failed_attempts: int = 0


class LocalEventSourceMapping:
    """Lambda's SQS event source mapping on the embedded AWS, with ReportBatchItemFailures: receive up to
    `batch_size` messages, invoke `handler`, delete the records it did not report as failed. A failed record is
    made visible again at once (where AWS waits for the visibility timeout), so the queue's redrive policy
    moves it to the dead-letter queue after maxReceiveCount receives, as SQS does."""

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        handler: Callable[[dict[str, Any], Any], dict[str, Any]],
        *,
        batch_size: int = SQS_BATCH_MAX,
    ) -> None:
        self.client = client
        self.queue_url = queue_url
        self.handler = handler
        self.batch_size = batch_size
        self.queue_arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.region = self.queue_arn.split(":")[3]

    def drain(self, context: Any = None, *, max_batches: int | None = None) -> DrainReport:
        """Deliver batches until the queue is empty (or `max_batches` were delivered)."""
        report = DrainReport()
        while max_batches is None or report.batches < max_batches:
            got = self.client.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=self.batch_size,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
            )
            messages = got.get("Messages", [])
            if not messages:
                break
            report.batches += 1
            event = sqs_event(messages, self.queue_arn, self.region)
            try:
                answer = self.handler(event, context)
                failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
            except Exception:  # the whole invocation failed: every record comes back
                failed = {m["MessageId"] for m in messages}
            done = [m for m in messages if m["MessageId"] not in failed]
            for start in range(0, len(done), SQS_BATCH_MAX):
                self.client.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done[start : start + SQS_BATCH_MAX])
                    ],
                )
            for m in messages:
                if m["MessageId"] in failed:
                    self.client.change_message_visibility(
                        QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                    )
            report.succeeded += len(done)
            report.failed_attempts += len(failed)
        return report
