"""Telling a watch's owners: a `SizingEstimateReady` event on the project bus, and a Slack message.

Both are ports (`Notifier`); the Slack side goes through a `SlackPoster` so tests use a fake and the Slack bot's
own client (`sizing.slack`) can be plugged in. The default poster uses `slack_sdk.WebClient` when installed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field

from sizing.aws import EventBus
from sizing.errors import Problem
from sizing.releases.compare import Comparison
from sizing.releases.events import EVENT_SOURCE, MODEL_RELEASE_REJECTED, SIZING_ESTIMATE_READY
from sizing.service.errors import Unavailable
from sizing.store.items import now_iso

if TYPE_CHECKING:
    from sizing.releases.watches import ReleaseWatch


class ReleaseNote(BaseModel):
    """What a watch is told about a release (the `SizingEstimateReady` detail)."""

    model_config = ConfigDict(extra="forbid")
    watch_id: str
    watch_name: str
    model_id: str
    headline: str
    comparison: Comparison
    run_id: str | None = Field(default=None, description="the measured run started for this release, if any")
    run_status: str | None = None
    estimated_at: str = Field(default_factory=now_iso)
    top_architectures: list[dict[str, Any]] = Field(
        default_factory=list, description="id, where, monthly cost and SLO verdict of the best few"
    )


class Notifier(Protocol):
    """Delivers a note about one watch; raises `Unavailable` when the destination did not take it."""

    name: str

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None: ...


class SlackPoster(Protocol):
    """Posts one message to a Slack channel (optionally in a thread)."""

    def post_message(self, channel: str, text: str, thread_ts: str | None = None) -> None: ...


class EventBridgeNotifier(EventBus):
    """PutEvents of `SizingEstimateReady` on the project bus. `client`: boto3 EventBridge (lazy if absent)."""

    name = "eventbridge"

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None:
        if not watch.notify.eventbridge:
            return
        entry = {
            "Source": EVENT_SOURCE,
            "DetailType": SIZING_ESTIMATE_READY,
            "Detail": note.model_dump_json(),
            "EventBusName": self.bus_name,
            "Resources": [],
        }
        try:
            out = self.client.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            raise Unavailable(f"EventBridge did not take the event: {type(exc).__name__}") from None
        if out.get("FailedEntryCount"):
            failed = out["Entries"][0]
            raise Unavailable(
                f"EventBridge refused the event: {failed.get('ErrorCode')} {failed.get('ErrorMessage')}"
            )

    def reject(self, model_id: str | None, reason: str, problems: list[Problem]) -> None:
        """Publish `ModelReleaseRejected` so whoever announced the release can see why it was refused. Best
        effort: the rejection is also in the handler's answer and log."""
        detail = {
            "model_id": model_id,
            "reason": reason,
            "problems": [{"field": p.field, "message": p.message} for p in problems],
        }
        entry = {
            "Source": EVENT_SOURCE,
            "DetailType": MODEL_RELEASE_REJECTED,
            "Detail": json.dumps(detail),
            "EventBusName": self.bus_name,
            "Resources": [],
        }
        with contextlib.suppress(ClientError, BotoCoreError):
            self.client.put_events(Entries=[entry])


class SlackNotifier:
    """Posts the headline (and the run, when one was started) to the watch's Slack channel."""

    name = "slack"

    def __init__(self, poster: SlackPoster) -> None:
        self.poster = poster

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None:
        channel = watch.notify.slack_channel
        if not channel:
            return
        lines = [f":rocket: *{note.model_id}* was released. Watch *{watch.name}*:", note.headline]
        if note.run_id:
            lines.append(f"Measuring it now: run `{note.run_id}` ({note.run_status}).")
        thread = watch.slack.thread_ts if watch.slack else None
        try:
            self.poster.post_message(channel, "\n".join(lines), thread)
        except Unavailable:
            raise
        except Exception as exc:  # the Slack SDK raises its own errors; none may fail the release
            raise Unavailable(f"Slack did not take the message: {type(exc).__name__}") from None


class WebClientSlackPoster:
    """The default poster: `slack_sdk.WebClient(token).chat_postMessage`. `token` is called on first use (a
    Secrets Manager read), so a release with no Slack watch never touches the secret."""

    def __init__(self, token: Callable[[], str], base_url: str | None = None) -> None:
        self._token = token
        self._base_url = base_url
        self._client: Any = None

    def post_message(self, channel: str, text: str, thread_ts: str | None = None) -> None:
        if self._client is None:
            try:
                from slack_sdk import WebClient
            except ImportError:
                raise Unavailable("Slack notifications need slack_sdk, which is not installed") from None
            base_url = self._base_url or WebClient.BASE_URL
            self._client = WebClient(token=self._token(), base_url=base_url)
        self._client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts)


#: The key a run's p95 figures go under: a local twin's are our own model's simulation, never "measured".
RUN_FIGURES_KEYS = {"twin": "simulated_twin_p95", "endpoint": "measured_p95"}


def _p95(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.get("p95")
        for k, v in figures.items()
        if k in ("ttft_ms", "tpot_ms", "e2e_s") and isinstance(v, dict)
    }


def summary(result: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The best `n` architectures of an estimate in a few fields (events stay far below EventBridge's 256 KB).
    An architecture a run load-tested also carries that run's p95 figures, as `measured_p95` from a real
    endpoint or `simulated_twin_p95` from a local twin (`measured.origin`)."""
    out = []
    for a in result.get("architectures", [])[:n]:
        row = {
            "id": a.get("id"),
            "deployment": a.get("deployment"),
            "instance_type": a.get("instance_type"),
            "usd_per_month": (a.get("cost") or {}).get("usd_per_month"),
            "meets_slo": a.get("meets_slo"),
            "predicted_p95": {
                k: v.get("p95") for k, v in (a.get("predicted") or {}).items() if isinstance(v, dict)
            },
        }
        run = a.get("measured")
        if isinstance(run, dict) and _p95(run):
            origin = "twin" if run.get("origin") == "twin" else "endpoint"
            row[RUN_FIGURES_KEYS[origin]] = _p95(run)
        out.append(row)
    return json.loads(json.dumps(out))
