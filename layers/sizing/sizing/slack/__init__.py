"""The Slack bot: `/sizing` in a chat message → an estimate posted as Block Kit, "Measure these" → a measured
run, and the measured ranking posted back in the thread when the run completes.

`grammar` turns the message into a workload spec, `verify` checks Slack's signature, `blocks` builds the
messages, `client` posts them, `secrets` reads the app's credentials, `bot` holds the logic of each handler and
`deps` builds it from the environment.

Setting up the Slack app (once per workspace):
1. Slash command `/sizing` with Request URL = the stack output `SlackCommandsUrl`; Interactivity on, with
   Request URL = `SlackInteractionsUrl`. Bot token scopes: `commands`, `chat:write`, and `chat:write.public` so
   the measured ranking can be posted in channels the bot was not invited to.
2. Put the app's signing secret and bot token in the secret `SlackSecretArn` as
   `{"signing_secret": "...", "bot_token": "xoxb-..."}`; the functions pick it up within `SLACK_SECRET_MAX_AGE_S`.
"""

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
