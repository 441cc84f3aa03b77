"""New-model detection: ask the Hugging Face Hub for the newest models of every watched organisation and emit
`ModelReleased` for each one a watch wants that was not seen before.

A model is wanted when some watch's pattern matches it and it was created after that watch (a watch is about new
releases, not the back catalogue). Seen-state lives in the table (PK=HFSEEN#{id}, SK=SEEN) and is written only
after the event is on the bus, so a crash between the two re-emits rather than loses a release (the release
handler is idempotent). Gated, private or deleted models are remembered as unavailable and not retried; transient
Hub errors are retried on the next poll.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field

from sizing.base import table
from sizing.base.aws import DynamoTable, EventBus
from sizing.base.errors import InvalidInput, Unavailable
from sizing.base.strict import Strict
from sizing.releases.events import EVENT_SOURCE, MODEL_RELEASED, ModelReleased
from sizing.releases.hub import HubClient, HubError, HubModel
from sizing.store.codec import from_item, to_item
from sizing.store.items import now_iso

if TYPE_CHECKING:
    from mypy_boto3_events.type_defs import PutEventsRequestEntryTypeDef

    from sizing.releases.watches import ReleaseWatch

#: Releases emitted per poll at most: each may start estimates (and measured runs) for every matching watch, so
#: a burst (an organisation publishing a whole family at once) is spread over several polls.
MAX_EMITS_PER_POLL = 20
#: A config.json is sent inline when it fits well inside EventBridge's 256 KB entry limit, else as its URL.
MAX_INLINE_CONFIG_BYTES = 200 * 1024
#: BatchGetItem reads at most 100 keys per call (DynamoDB limit).
BATCH_GET_MAX = 100
POLLER_SOURCE = "huggingface-hub"


class SeenModel(Strict):
    model_id: str
    status: Literal["emitted", "unavailable"]
    seen_at: str = Field(default_factory=now_iso)
    created_at: str | None = None
    reason: str | None = None

    @staticmethod
    def key(model_id: str) -> dict[str, str]:
        return table.hub_seen_key(model_id)


class SeenState(DynamoTable):
    """Which Hub models the poller has handled. `client`: boto3 DynamoDB (lazy if absent)."""

    def seen(self, model_ids: Iterable[str]) -> set[str]:
        ids = list(dict.fromkeys(model_ids))
        found: set[str] = set()
        for start in range(0, len(ids), BATCH_GET_MAX):
            keys = [to_item(SeenModel.key(i)) for i in ids[start : start + BATCH_GET_MAX]]
            request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
            while request:
                out = self.client.batch_get_item(RequestItems=request)
                for item in out.get("Responses", {}).get(self.table_name, []):
                    found.add(str(from_item(item)["model_id"]))
                request = out.get("UnprocessedKeys") or {}
        return found

    def get(self, model_id: str) -> SeenModel | None:
        out = self.client.get_item(TableName=self.table_name, Key=to_item(SeenModel.key(model_id)))
        if "Item" not in out:
            return None
        data = {k: v for k, v in from_item(out["Item"]).items() if k not in (table.PK, table.SK, "type")}
        return SeenModel.model_validate(data)

    def mark(self, seen: SeenModel) -> None:
        body = {**seen.model_dump(mode="json"), **SeenModel.key(seen.model_id), "type": "hf_seen"}
        self.client.put_item(TableName=self.table_name, Item=to_item(body))


class BusPublisher(EventBus):
    """Puts `ModelReleased` on the project bus. `client`: boto3 EventBridge (lazy if absent)."""

    def __call__(self, release: ModelReleased) -> None:
        entry: PutEventsRequestEntryTypeDef = {
            "Source": EVENT_SOURCE,
            "DetailType": MODEL_RELEASED,
            "Detail": release.model_dump_json(),
            "EventBusName": self.bus_name,
            "Resources": [],
        }
        try:
            out = self.client.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            raise Unavailable(f"EventBridge did not take ModelReleased: {type(exc).__name__}") from None
        if out.get("FailedEntryCount"):
            failed = out["Entries"][0]
            raise Unavailable(f"EventBridge refused ModelReleased: {failed.get('ErrorCode')}")


class PollReport(Strict):
    """What one poll did (the poller's return value and log line)."""

    orgs: list[str]
    listed: int = 0
    wanted: int = 0
    already_seen: int = 0
    emitted: list[str] = Field(default_factory=list)
    unavailable: list[dict[str, str]] = Field(default_factory=list)
    errors: list[dict[str, str]] = Field(default_factory=list)
    deferred: int = Field(default=0, description="wanted but over this poll's emission cap")


def watched_orgs(watches: Iterable[ReleaseWatch]) -> list[str]:
    return sorted({w.model_pattern.split("/", 1)[0] for w in watches if "/" in w.model_pattern})


def _aware(value: datetime) -> datetime:
    """Hub and store timestamps are UTC; one without a zone is read as UTC so the two always compare."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _created(model: HubModel) -> datetime | None:
    return _aware(model.created_at) if model.created_at else None


def wanted_by(model: HubModel, watches: Iterable[ReleaseWatch]) -> bool:
    """Some watch matches the model, and the model was created after that watch (unknown dates count as new)."""
    for w in watches:
        if not w.matches(model.id):
            continue
        created = _created(model)
        if created is None or created > _aware(datetime.fromisoformat(w.created_at)):
            return True
    return False


def poll(
    hub: HubClient,
    watches: list[ReleaseWatch],
    seen: SeenState,
    publish: Callable[[ModelReleased], None],
    *,
    max_emits: int = MAX_EMITS_PER_POLL,
) -> PollReport:
    """One poll over every watched organisation. Errors of one organisation or model are reported, not raised,
    so the others are still handled."""
    report = PollReport(orgs=watched_orgs(watches))
    wanted: list[HubModel] = []
    for org in report.orgs:
        try:
            models = hub.list_models(org)
        except HubError as exc:
            report.errors.append({"org": org, "reason": exc.message})
            continue
        report.listed += len(models)
        wanted += [m for m in models if not m.private and wanted_by(m, watches)]
    report.wanted = len(wanted)
    done = seen.seen(m.id for m in wanted)
    report.already_seen = sum(1 for m in wanted if m.id in done)
    fresh = sorted(
        (m for m in wanted if m.id not in done),
        key=lambda m: c.timestamp() if (c := _created(m)) else float("inf"),
    )
    report.deferred = max(0, len(fresh) - max_emits)
    for model in fresh[:max_emits]:
        created = model.created_at.isoformat() if model.created_at else None
        try:
            config: dict[str, Any] | str = hub.fetch_config(model.id)
        except (HubError, InvalidInput) as exc:
            if isinstance(exc, HubError) and not exc.permanent:
                report.errors.append({"model_id": model.id, "reason": exc.message})
                continue
            seen.mark(
                SeenModel(model_id=model.id, status="unavailable", created_at=created, reason=exc.message)
            )
            report.unavailable.append({"model_id": model.id, "reason": exc.message})
            continue
        if len(json.dumps(config)) > MAX_INLINE_CONFIG_BYTES:
            config = hub.config_url(model.id)
        release = ModelReleased(model_id=model.id, config=config, source=POLLER_SOURCE)
        try:
            publish(release)
        except Unavailable as exc:
            report.errors.append({"model_id": model.id, "reason": exc.message})
            continue
        seen.mark(SeenModel(model_id=model.id, status="emitted", created_at=created))
        report.emitted.append(model.id)
    return report
