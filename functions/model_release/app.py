"""Model-release function: a `ModelReleased` event from the project's EventBridge bus → the release service
(`sizing.releases.service`): add the model to the catalog, then enqueue one job per matching watch on the
fan-out queue (`RELEASE_QUEUE_URL`; the release fan-out function re-sizes and notifies), or, without a queue,
re-size every matching watch here.

Returns the outcome (for logs and tests). A malformed event or config.json is answered `rejected` with the
reason, not raised, since a retry cannot fix it; transient failures raise so EventBridge/Lambda retry.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.releases import deps


@init_environment(deps.services)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outcome = deps.release_service(context).handle_event(event)
    if outcome.status == "rejected":
        logger.warning("release rejected", extra={"model_id": outcome.model_id, "reason": outcome.reason})
        metrics.add_metric(name="ReleasesRejected", unit=MetricUnit.Count, value=1)
    else:
        logger.info(
            "release processed",
            extra={
                "model_id": outcome.model_id,
                "config_digest": outcome.config_digest,
                "watches": len(outcome.watches),
                "enqueued": outcome.enqueued,
            },
        )
        metrics.add_metric(name="ReleaseWatchesResized", unit=MetricUnit.Count, value=len(outcome.watches))
        metrics.add_metric(name="ReleaseWatchesEnqueued", unit=MetricUnit.Count, value=outcome.enqueued)
    return outcome.model_dump(mode="json")
