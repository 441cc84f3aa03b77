"""Run-completed notifier: EventBridge `SizingRunCompleted` → the measured ranking (or why the run ended) posted
with the bot token in the Slack thread the run was started from."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.slack import deps


@init_environment(deps.services)
@logger.inject_lambda_context(correlation_id_path="id")
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    bot = deps.bot()
    bot.lambda_context = context
    return {"notified": bot.run_completed(event.detail)}
