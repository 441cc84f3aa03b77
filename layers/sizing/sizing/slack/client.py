"""Posting to Slack: to a command's `response_url` (an incoming-webhook-like URL Slack gives with every command
and interaction, valid for 30 minutes) and to a channel or thread with the bot token (`chat.postMessage`).
`slack_sdk`'s WebhookClient and WebClient do the HTTP; the base URL is a setting so tests point it at a fake
Slack API on loopback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import Block
from slack_sdk.webhook import WebhookClient

from sizing.base.errors import Unavailable
from sizing.base.observability import logger

#: Slack answers within a second or two; ten seconds bounds a post so a Lambda never waits on a stuck socket.
HTTP_TIMEOUT_S = 10


@dataclass(frozen=True)
class Message:
    """A Block Kit message: `text` is the notification/fallback line, `blocks` the validated layout."""

    text: str
    blocks: Sequence[Block]

    def blocks_json(self) -> list[dict[str, Any]]:
        return [b.to_dict() for b in self.blocks]  # to_dict() validates every block (slack_sdk models)


class SlackPoster:
    """Sends messages. `token` is read lazily (a callable) so a poster that only answers response_urls never
    needs the bot token."""

    def __init__(self, api_url: str, token: Callable[[], SecretStr]) -> None:
        self.api_url = api_url if api_url.endswith("/") else api_url + "/"
        self._token = token

    def respond(
        self,
        response_url: str,
        message: Message,
        *,
        response_type: Literal["ephemeral", "in_channel"] = "in_channel",
        replace_original: bool = False,
    ) -> None:
        """Answer a command or interaction through its response_url."""
        out = WebhookClient(response_url, timeout=HTTP_TIMEOUT_S).send(
            text=message.text,
            blocks=message.blocks_json(),
            response_type=response_type,
            replace_original=replace_original,
        )
        if out.status_code != 200:
            logger.warning(
                "Slack refused a response_url post", extra={"status": out.status_code, "body": out.body}
            )
            raise Unavailable("Slack did not accept the response", details={"status": out.status_code})

    def post(self, channel: str, message: Message, *, thread_ts: str | None = None) -> str:
        """Post to a channel (in a thread when `thread_ts` is given); returns the message ts."""
        client = WebClient(
            token=self._token().get_secret_value(), base_url=self.api_url, timeout=HTTP_TIMEOUT_S
        )
        try:
            out = client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=message.text, blocks=message.blocks_json()
            )
        except SlackApiError as exc:
            error = exc.response.get("error", "unknown") if exc.response is not None else "unknown"
            logger.warning("chat.postMessage failed", extra={"slack_error": error, "channel": channel})
            raise Unavailable(f"Slack refused the message: {error}", details={"slack_error": error}) from None
        return str(out.get("ts", ""))
