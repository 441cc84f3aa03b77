"""Slack messages of `sizing serve`: with no Slack workspace on a laptop, what the bot would post (to a command's
response_url or a channel with the bot token) is appended to a JSON-lines file under the server's runs folder
and summed up on the console, so a newcomer can follow a `/sizing` command end to end."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import SecretStr

from sizing.slack.client import Message, SlackPoster

#: The bot token of the local sink: never sent anywhere, it only satisfies the bot's secrets interface.
LOCAL_BOT_TOKEN = "xoxb-local-sink"


class LocalSlackSink(SlackPoster):
    """A poster that writes each message as one JSON line to `path` (and a one-line note to `console`)."""

    def __init__(self, path: Path, console: TextIO | None = sys.stdout) -> None:
        super().__init__("http://127.0.0.1/", lambda: SecretStr(LOCAL_BOT_TOKEN))
        self.path = path
        self.console = console
        self._lock = threading.Lock()
        self._count = 0

    def _write(self, record: dict[str, Any]) -> str:
        with self._lock:
            self._count += 1
            ts = f"{datetime.now(UTC).timestamp():.6f}"
            line = {"ts": ts, "at": datetime.now(UTC).isoformat(), **record}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            if self.console is not None:
                where = record.get("channel") or "response_url"
                print(f"slack → {where}: {record['text']}  ({self.path})", file=self.console, flush=True)
            return ts

    def respond(
        self,
        response_url: str,
        message: Message,
        *,
        response_type: Literal["ephemeral", "in_channel"] = "in_channel",
        replace_original: bool = False,
    ) -> None:
        self._write(
            {
                "kind": "response",
                "response_url": response_url,
                "response_type": response_type,
                "replace_original": replace_original,
                "text": message.text,
                "blocks": message.blocks_json(),
            }
        )

    def post(self, channel: str, message: Message, *, thread_ts: str | None = None) -> str:
        return self._write(
            {
                "kind": "post",
                "channel": channel,
                "thread_ts": thread_ts,
                "text": message.text,
                "blocks": message.blocks_json(),
            }
        )


def read_sink(path: Path) -> list[dict[str, Any]]:
    """The messages a sink wrote, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
