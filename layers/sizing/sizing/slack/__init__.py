"""The Slack bot: `/sizing` in a chat message → an estimate posted as Block Kit, "Measure these" → a measured
run, and the measured ranking posted back in the thread when the run completes.

`grammar` turns the message into a workload spec, `verify` checks Slack's signature, `blocks` builds the
messages, `client` posts them, `secrets` reads the app's credentials, `bot` holds the logic of each handler and
`deps` builds it from the environment."""

from sizing.slack.bot import EstimateJob, LambdaInvoker, SlackBot, SlackRequest, SlackResponse
from sizing.slack.grammar import Parsed, parse_command
from sizing.slack.verify import Unauthorized, verify_request

__all__ = [
    "EstimateJob",
    "LambdaInvoker",
    "Parsed",
    "SlackBot",
    "SlackRequest",
    "SlackResponse",
    "Unauthorized",
    "parse_command",
    "verify_request",
]
