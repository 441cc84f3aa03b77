"""API function: API Gateway REST events → the sizing API resolver (`sizing.service.api`).

The resolver, its routers and the error mapping live in the sizing layer so that `sizing serve` answers with
exactly the same code; this module only adds the Lambda decorators, in the house order.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.service.api import deps, resolve


@init_environment(deps.services)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(event, context)
