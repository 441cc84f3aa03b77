"""`RecordingPoster`: a `SlackPoster` that keeps what the bot would have sent to Slack (channel, thread and the
message as Slack would show it) instead of calling the Web API -- for unit tests that read what people see."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from sizing.slack.client import Message, SlackPoster


@dataclass
class Sent:
    channel: str | None
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]]
    response_url: str | None = None
    response_type: str | None = None


@dataclass
class RecordingPoster(SlackPoster):
    sent: list[Sent] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__("http://slack.invalid/api/", lambda: SecretStr("xoxb-test"))

    def post(self, channel: str, message: Message, *, thread_ts: str | None = None) -> str:
        self.sent.append(Sent(channel, thread_ts, message.text, message.blocks_json()))
        return f"1700000000.{len(self.sent):06d}"

    def respond(
        self,
        response_url: str,
        message: Message,
        *,
        response_type: Any = "in_channel",
        replace_original: bool = False,
    ) -> None:
        self.sent.append(Sent(None, None, message.text, message.blocks_json(), response_url, response_type))
