"""Release poller: run by EventBridge Scheduler; asks the Hugging Face Hub for new models of the watched
organisations and emits `ModelReleased` for the unseen ones (`sizing.releases.poller`)."""

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.releases import deps
from sizing.releases.events import parse_poll_request


@init_environment(deps.services)
@logger.inject_lambda_context(correlation_id_path="execution_id")
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = parse_poll_request(event)
    report = deps.run_poll()
    logger.info(
        "poll done", extra={"scheduled_time": request.scheduled_time, **report.model_dump(mode="json")}
    )
    metrics.add_metric(name="ReleasesEmitted", unit=MetricUnit.Count, value=len(report.emitted))
    metrics.add_metric(name="PollErrors", unit=MetricUnit.Count, value=len(report.errors))
    return report.model_dump(mode="json")
