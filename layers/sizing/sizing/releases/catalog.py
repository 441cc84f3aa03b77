"""Models added at runtime by releases. The Lambda package is read-only, so a released model's `ModelSpec` is
persisted in the table (PK=MODEL#{id}, SK=MODEL; GSI1PK=MODELS lists them, newest first) and every catalog that
must know it is built as the shipped catalog plus the stored models (`with_models`).

Readers that live longer than one release (the API, the Slack bot, the state machine's steps) hold a
`LiveCatalog`: the merged catalog built once per container and rebuilt only when the registry changed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from sizing.base import table
from sizing.base.aws import DynamoTable
from sizing.base.strict import Strict
from sizing.catalog import Catalog, ModelSpec, load_catalog
from sizing.results import EstimateResult
from sizing.store.codec import from_item, to_item
from sizing.store.items import now_iso

MODELS_INDEX_PK = table.MODELS
INDEX_NAME = table.INDEX
#: Seconds a warm container trusts its merged catalog before asking the registry again. A second is shorter than
#: a person takes to ask for an estimate after announcing a release (the release function itself runs for longer),
#: and it bounds the reads to one small Query per container per second however busy the API is (each check costs
#: a few milliseconds in-Region, ~10 ms on the embedded moto).
CHECK_EVERY_S = 1.0


class AddedModel(Strict):
    """A model added to the catalog by a release event."""

    model_id: str
    spec: dict[str, Any] = Field(description="the ModelSpec, as JSON")
    added_at: str = Field(default_factory=now_iso)
    announced_by: str = Field(description="the ModelReleased event's source")
    config_digest: str | None = Field(
        default=None, description="digest of the config.json it was built from (`events.config_digest`)"
    )

    @staticmethod
    def key(model_id: str) -> dict[str, str]:
        return table.model_key(model_id)

    def keys(self) -> dict[str, str]:
        return {
            **self.key(self.model_id),
            table.GSI1PK: MODELS_INDEX_PK,
            table.GSI1SK: table.listed(self.added_at, self.model_id),
        }

    def model_spec(self) -> ModelSpec:
        return ModelSpec.model_validate(self.spec)


def with_models(catalog: Catalog, models: list[ModelSpec]) -> Catalog:
    """A new Catalog: `catalog` plus `models` (a model with an id already present replaces it; its id then
    resolves to it even where it was another model's alias)."""
    if not models:
        return catalog
    merged = {m.id: m for m in catalog.models.values()}
    for m in models:
        merged.pop(m.id, None)
        merged[m.id] = m
    return Catalog(
        list(catalog.accelerators.values()),
        list(catalog.instances.values()),
        list(merged.values()),
        catalog.managed,
    )


class ModelRegistry(DynamoTable):
    """Models added by releases, in the table. `client` is a boto3 DynamoDB client (made lazily if absent)."""

    def put(self, spec: ModelSpec, announced_by: str, config_digest: str | None = None) -> AddedModel:
        """Store (or replace: a re-release with a changed config wins) a released model."""
        added = AddedModel(
            model_id=spec.id,
            spec=spec.model_dump(mode="json"),
            announced_by=announced_by,
            config_digest=config_digest,
        )
        body = {**added.model_dump(mode="json"), **added.keys(), "type": "model"}
        self.client.put_item(TableName=self.table_name, Item=to_item(body))
        return added

    def get(self, model_id: str) -> ModelSpec | None:
        added = self.added(model_id)
        return added.model_spec() if added else None

    def added(self, model_id: str) -> AddedModel | None:
        """The stored release of `model_id` (its spec and the digest of the config it came from)."""
        out = self.client.get_item(
            TableName=self.table_name, Key=to_item(AddedModel.key(model_id)), ConsistentRead=True
        )
        return _added(from_item(out["Item"])) if "Item" in out else None

    def all(self) -> list[ModelSpec]:
        """Every added model, oldest first (so a later release of the same id would win in `with_models`)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": MODELS_INDEX_PK}},
        }
        specs: list[ModelSpec] = []
        while True:
            out = self.client.query(**kwargs)
            specs += [_added(from_item(i)).model_spec() for i in out.get("Items", [])]
            if "LastEvaluatedKey" not in out:
                return specs
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def newest(self) -> str | None:
        """The index key of the latest release (`{added_at}#{model_id}`; None when there is none): every put,
        a re-release of the same id included, writes a later one, so it changes whenever the registry does.
        One Query of one item (0.5 read capacity unit eventually consistent)."""
        out = self.client.query(
            TableName=self.table_name,
            IndexName=INDEX_NAME,
            KeyConditionExpression="GSI1PK = :pk",
            ExpressionAttributeValues={":pk": {"S": MODELS_INDEX_PK}},
            ProjectionExpression="GSI1SK",
            ScanIndexForward=False,
            Limit=1,
        )
        items = out.get("Items", [])
        return items[0]["GSI1SK"]["S"] if items else None

    def catalog(self, base: Catalog | None = None) -> Catalog:
        """The shipped catalog (or `base`) plus every model added by releases."""
        return with_models(base or load_catalog(), self.all())


class BatchCache:
    """What the jobs of one invocation share: each model's stored release, the catalog, and estimates of the
    same spec (a watch's current model is estimated once per batch however many jobs need it)."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry
        self.releases: dict[str, AddedModel | None] = {}
        self.estimates: dict[str, EstimateResult | None] = {}
        self._catalog: Catalog | None = None

    def release(self, model_id: str) -> AddedModel | None:
        if model_id not in self.releases:
            self.releases[model_id] = self.registry.added(model_id)
        return self.releases[model_id]

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = self.registry.catalog()
        return self._catalog


class LiveCatalog:
    """The shipped catalog plus the registry's models, for readers that serve many requests per container.

    Freshness: a cheap check, not a TTL on the catalog. At most every `check_every_s` (`CHECK_EVERY_S`) a call
    asks the registry for its newest release (`ModelRegistry.newest`, one one-item Query) and rebuilds the
    merged catalog only when that changed, so a rebuild happens once per release, and a release is known a
    second after it is stored (plus the index's propagation, typically under a second). A TTL long enough to
    save the same reads would leave every warm container answering "unknown model" for its whole length to the
    person who just announced the model.

    When the registry cannot be read (throttled, no permission), the last catalog built is served (the shipped
    one if none yet), with a warning: shipped models keep working while the table is unavailable."""

    def __init__(
        self,
        registry: ModelRegistry,
        base: Callable[[], Catalog] = load_catalog,
        *,
        check_every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self._base = base
        self.check_every_s = check_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._marker: str | None = None
        self._catalog: Catalog | None = None
        self._checked_at: float | None = None

    @classmethod
    def of_table(cls, table_name: str, client: Any, check_every_s: float | None = None) -> LiveCatalog:
        """The live catalog of the registry in `table_name` (`check_every_s` None: CHECK_EVERY_S)."""
        return cls(
            ModelRegistry(table_name, client=client),
            check_every_s=CHECK_EVERY_S if check_every_s is None else check_every_s,
        )

    def __call__(self) -> Catalog:
        from botocore.exceptions import BotoCoreError, ClientError

        now = self._clock()
        if (
            self._catalog is not None
            and self._checked_at is not None
            and now - self._checked_at < self.check_every_s
        ):
            return self._catalog
        try:
            marker = self.registry.newest()
        except (ClientError, BotoCoreError) as exc:
            from sizing.base.observability import logger

            logger.warning(
                "released models could not be read; serving the last catalog",
                extra={"error": type(exc).__name__},
            )
            return self._catalog or self._base()
        with self._lock:
            if self._catalog is None or marker != self._marker:
                base = self._base()
                self._catalog = self.registry.catalog(base) if marker is not None else base
                self._marker = marker
            self._checked_at = now
            return self._catalog


def _added(data: dict[str, Any]) -> AddedModel:
    return AddedModel.model_validate({k: v for k, v in data.items() if k not in (*table.KEY_ATTRS, "type")})
