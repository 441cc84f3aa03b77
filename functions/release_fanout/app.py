"""Release fan-out function: a batch of `WatchJob` messages from the fan-out queue (one per model and watch,
enqueued by the model-release function) → each watch re-sized on its own (`sizing.releases.fanout`).

Answers Lambda's partial batch response: the jobs that failed are listed in `batchItemFailures`, so only they
are redelivered; after the queue's maxReceiveCount they move to its dead-letter queue (an alarm reports them).
"""

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.releases import deps


@init_environment(deps.services)
@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    consumer = deps.fanout_consumer(context)
    answer = consumer.handle(event)
    failed = len(answer.get("batchItemFailures", []))
    resized = sum(1 for o in consumer.outcomes if o.skipped is None)
    logger.info(
        "release jobs handled",
        extra={"jobs": len(event.get("Records", [])), "resized": resized, "failed": failed},
    )
    metrics.add_metric(name="ReleaseWatchesResized", unit=MetricUnit.Count, value=resized)
    metrics.add_metric(name="ReleaseJobsFailed", unit=MetricUnit.Count, value=failed)
    return answer
