"""Estimate worker: invoked asynchronously by the slash-command function with an `EstimateJob`; estimates the
workload and posts the top architectures as Block Kit to the command's response_url."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.slack import deps
from sizing.slack.bot import EstimateJob


@init_environment(deps.services)
@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps.bot().estimate(EstimateJob.model_validate(event))
    return {"posted": True}
