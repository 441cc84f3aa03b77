"""Telling a watch's owners: a `SizingEstimateReady` event on the project bus, and a Slack message.

Both are ports (`Notifier`). The Slack message is Block Kit, posted through the Slack bot's own client
(`sizing.slack.client.SlackPoster`: the bot token from the bot's secret, the Web API base URL from the same
`SLACK_API_URL` setting, so tests and `sizing serve` point it at a local fake or sink).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field

from sizing.base.aws import EventBus
from sizing.base.errors import Problem, Unavailable
from sizing.base.strict import Strict
from sizing.releases.compare import Comparison
from sizing.releases.events import (
    EVENT_SOURCE,
    MODEL_RELEASE_REJECTED,
    SIZING_ESTIMATE_READY,
    ModelReleaseRejected,
    RejectedProblem,
)
from sizing.results import Architecture, EstimateResult
from sizing.results.blocks import Stated
from sizing.store.items import now_iso
from sizing.upgrade import upgrade_result

if TYPE_CHECKING:
    from mypy_boto3_events.type_defs import PutEventsRequestEntryTypeDef

    from sizing.releases.watches import ReleaseWatch
    from sizing.slack.client import Message


#: The latency metrics a release note states p95 figures of.
NOTE_METRICS = ("ttft_ms", "tpot_ms", "e2e_s")


class ArchitectureSummary(Stated):
    """One of the best architectures on the new model, in a few fields (events stay far below EventBridge's
    256 KB). An architecture a run load-tested also carries that run's p95 figures, as `measured_p95` from a
    real endpoint or `simulated_twin_p95` from a local twin (`measured.origin`)."""

    id: str | None = None
    deployment: str | None = None
    instance_type: str | None = None
    usd_per_month: float | None = None
    meets_slo: bool | None = None
    #: metric -> the predicted p95 (a metric the architecture states no figures for is left out)
    predicted_p95: dict[str, float | None] = Field(default_factory=dict)
    simulated_twin_p95: dict[str, float | None] | None = None
    measured_p95: dict[str, float | None] | None = None


class ReleaseNote(Strict):
    """What a watch is told about a release (the `SizingEstimateReady` detail)."""

    watch_id: str
    watch_name: str
    model_id: str
    headline: str
    comparison: Comparison
    run_id: str | None = Field(default=None, description="the measured run started for this release, if any")
    run_status: str | None = None
    estimated_at: str = Field(default_factory=now_iso)
    top_architectures: list[ArchitectureSummary] = Field(
        default_factory=list, description="id, where, monthly cost and SLO verdict of the best few"
    )
    config_digest: str | None = Field(
        default=None, description="digest of the released config.json this estimate is about"
    )


class Notifier(Protocol):
    """Delivers a note about one watch; raises `Unavailable` when the destination did not take it."""

    name: str

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None: ...


class SlackPoster(Protocol):
    """Posts one Block Kit message to a Slack channel (optionally in a thread): `sizing.slack.client.SlackPoster`
    and its local sink are such posters."""

    def post(self, channel: str, message: Message, *, thread_ts: str | None = None) -> str: ...


class EventBridgeNotifier(EventBus):
    """PutEvents of `SizingEstimateReady` on the project bus. `client`: boto3 EventBridge (lazy if absent)."""

    name = "eventbridge"

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None:
        if not watch.notify.eventbridge:
            return
        entry: PutEventsRequestEntryTypeDef = {
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
        detail = ModelReleaseRejected(
            model_id=model_id,
            reason=reason,
            problems=[RejectedProblem(field=p.field, message=p.message) for p in problems],
        )
        entry: PutEventsRequestEntryTypeDef = {
            "Source": EVENT_SOURCE,
            "DetailType": MODEL_RELEASE_REJECTED,
            "Detail": detail.model_dump_json(),
            "EventBusName": self.bus_name,
            "Resources": [],
        }
        with contextlib.suppress(ClientError, BotoCoreError):
            self.client.put_events(Entries=[entry])


class SlackNotifier:
    """Posts the headline, the best architectures on the new model and the run (when one was started) to the
    watch's Slack channel, in the thread the watch was made from."""

    name = "slack"

    def __init__(self, poster: SlackPoster) -> None:
        self.poster = poster

    def notify(self, watch: ReleaseWatch, note: ReleaseNote) -> None:
        channel = watch.notify.slack_channel
        if not channel:
            return
        thread = watch.slack.thread_ts if watch.slack else None
        try:
            self.poster.post(channel, release_message(watch, note), thread_ts=thread)
        except Unavailable as exc:
            raise Unavailable(f"Slack did not take the message: {exc.message}") from None
        except Exception as exc:  # the Slack SDK raises its own errors; none may fail the release
            raise Unavailable(f"Slack did not take the message: {type(exc).__name__}") from None


def release_message(watch: ReleaseWatch, note: ReleaseNote) -> Message:
    """The Block Kit message of a release for a watch: a header, the one-line verdict, the best architectures
    on the new model (cost and SLO verdict), the run started to measure it. `text` is the notification line."""
    from slack_sdk.models.blocks import (
        ContextBlock,
        DividerBlock,
        HeaderBlock,
        MarkdownTextObject,
        PlainTextObject,
        SectionBlock,
    )

    from sizing.slack.blocks import HEADER_MAX, SECTION_TEXT_MAX, clip, escape
    from sizing.slack.client import Message

    def md(text: str) -> MarkdownTextObject:
        return MarkdownTextObject(text=clip(text, SECTION_TEXT_MAX))

    blocks: list[Any] = [
        HeaderBlock(text=PlainTextObject(text=clip(f":rocket: {note.model_id} was released", HEADER_MAX))),
        SectionBlock(text=md(f"Watch *{escape(watch.name)}*: {escape(note.headline)}")),
    ]
    rows = [_architecture_line(a, escape) for a in note.top_architectures]
    if rows:
        blocks += [DividerBlock(), SectionBlock(text=md("\n".join(rows)))]
    context = [f"current model `{escape(watch.current_model)}`"]
    if note.run_id:
        blocks.append(
            SectionBlock(
                text=md(f":stopwatch: Measuring it now: run `{escape(note.run_id)}` ({note.run_status}).")
            )
        )
        context.append(f"run `{escape(note.run_id)}`")
    if note.config_digest:
        context.append(f"config.json `{note.config_digest}`")
    blocks.append(ContextBlock(elements=[md(" · ".join(context))]))
    lines = [f"{note.model_id} was released. Watch {watch.name}: {note.headline}"]
    if note.run_id:
        lines.append(f"Measuring it now: run {note.run_id} ({note.run_status}).")
    return Message(text=" ".join(lines), blocks=blocks)


def _architecture_line(a: ArchitectureSummary, escape: Callable[[str], str]) -> str:
    where = " · ".join(str(x) for x in (a.deployment, a.instance_type) if x)
    cost = a.usd_per_month
    price = f"${cost:,.0f}/month" if cost is not None else "cost n/a"
    verdict = "meets the SLOs" if a.meets_slo else "misses an SLO"
    return f"• {escape(where or a.id or '?')}: {price}, {verdict}"


class WebClientSlackPoster:
    """The default poster: the Slack bot's client (`sizing.slack.client.SlackPoster`, chat.postMessage with
    Block Kit) at `base_url` (the bot's `SLACK_API_URL`). `token` is called on first use (a Secrets Manager
    read), so a release with no Slack watch never touches the secret, nor imports slack_sdk."""

    def __init__(self, token: Callable[[], str], base_url: str | None = None) -> None:
        self._token = token
        self._base_url = base_url
        self._client: Any = None

    def post(self, channel: str, message: Message, *, thread_ts: str | None = None) -> str:
        if self._client is None:
            from pydantic import SecretStr

            from sizing.slack.client import SlackPoster as BotPoster
            from sizing.slack.settings import SLACK_API_URL

            self._client = BotPoster(self._base_url or SLACK_API_URL, lambda: SecretStr(self._token()))
        return str(self._client.post(channel, message, thread_ts=thread_ts))


def _summary(a: Architecture) -> ArchitectureSummary:
    predicted = {
        m: p.p95 for m in NOTE_METRICS if (p := getattr(a.predicted, m)) is not None and p.model_fields_set
    }
    row: dict[str, Any] = {
        "id": a.id,
        "deployment": a.deployment,
        "instance_type": a.instance_type,
        "usd_per_month": a.cost.usd_per_month,
        "meets_slo": a.meets_slo,
        "predicted_p95": predicted,
    }
    run = a.measured
    figures = {} if run is None else {m: p.p95 for m in NOTE_METRICS if (p := getattr(run, m)) is not None}
    if run is not None and figures:
        # the key a run's p95 figures go under: a local twin's are our own model's simulation, never "measured"
        row["simulated_twin_p95" if run.origin == "twin" else "measured_p95"] = figures
    return ArchitectureSummary.model_validate(row)


def summary(result: EstimateResult | dict[str, Any], n: int) -> list[ArchitectureSummary]:
    """The best `n` architectures of an estimate (typed, or its JSON: read by `sizing.upgrade`) in a few fields,
    with a run's p95 figures labelled by what produced them."""
    return [_summary(a) for a in upgrade_result(result, "estimate").architectures[:n]]
