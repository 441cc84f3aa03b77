"""Slash command function: `POST /slack/commands` → verify Slack's signature, parse `/sizing ...`, answer an
ephemeral acknowledgement within Slack's three seconds and invoke the estimate worker asynchronously."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import init_environment
from sizing.slack import deps
from sizing.slack.bot import SlackRequest, answer


@init_environment(deps.services)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bot = deps.bot()
    bot.lambda_context = context
    return answer(bot.command, SlackRequest.from_apigw(event)).to_apigw()
