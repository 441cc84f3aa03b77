"""Watches: a saved workload re-sized when a model matching its pattern is released.

The store's `Watch` item (`sizing.store`) holds the workload spec, the model pattern (its `model` field) and the
Slack channel; what only releases need (measure or only estimate, how many candidates, the budget, whether to
publish on EventBridge) sits beside it in a `ReleaseOptions` item under the same partition key (SK=RELEASE), so
the store's item stays as its owner defined it.
"""

from __future__ import annotations

import fnmatch
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from sizing.base import table
from sizing.base.strict import Strict
from sizing.service.runs import DEFAULT_TOP_K, MAX_TOP_K
from sizing.store import RunSource, SizingStore, SlackThread, Watch
from sizing.store.codec import from_item, to_item
from sizing.store.items import WATCHES_INDEX_PK, now_iso
from sizing.store.repository import MAX_PAGE
from sizing.workload.parse import parse_spec

if TYPE_CHECKING:
    from sizing.catalog import Catalog

#: `org/name-glob`: the organisation is literal (the poller asks the Hub for that organisation's models), the
#: name may use `*` and `?` (fnmatch). Same character set as Hugging Face ids.
PATTERN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.*?-]+$")
PATTERN_MAX = 200
#: Slack channel ids (C0123ABCD, G..., D...) or #names: Slack caps channel names at 80 characters.
SLACK_CHANNEL_PATTERN = r"^(#[a-z0-9_-]{1,80}|[CGD][A-Z0-9]{2,20})$"
#: A run's budget ceiling accepted on a watch (the same bound as POST /runs).
MAX_BUDGET_USD = 1_000_000
OPTIONS_SK = table.RELEASE_OPTIONS_SK
RESULT_SK_PREFIX = table.RESULT_PREFIX
#: Results shown with a watch (GET /watches/{id}): the last few releases, enough to see the trend at a glance.
RECENT_RESULTS = 5
#: BatchWriteItem takes at most 25 requests (DynamoDB limit).
BATCH_WRITE_MAX = 25
#: BatchGetItem reads at most 100 keys per call (DynamoDB limit), one page of watches.
BATCH_GET_MAX = 100
#: The table's index listing watches by creation time (GSI1PK=WATCHES, GSI1SK={created_at}#{id}).
WATCHES_INDEX = table.INDEX


class NotifyTargets(Strict):
    """Where a watch's results go: a Slack channel, and/or a `SizingEstimateReady` event on the project bus."""

    slack_channel: str | None = Field(
        default=None, pattern=SLACK_CHANNEL_PATTERN, description="Slack channel id (C0123ABCD) or #name"
    )
    eventbridge: bool = Field(
        default=True, strict=True, description="publish SizingEstimateReady on the project bus"
    )


def _check_pattern(value: str) -> str:
    if len(value) > PATTERN_MAX or not PATTERN_RE.match(value):
        raise ValueError("must be org/name with * or ? wildcards in the name only, e.g. meta-llama/Llama-4-*")
    return value


class WatchRequest(Strict):
    """POST /watches: a saved workload, the models to watch for, and what to do when one is released."""

    name: str = Field(min_length=1, max_length=128)
    spec: dict[str, Any] = Field(description="the workload spec (its `model` is your current model)")
    model_pattern: str = Field(description="models to watch, e.g. meta-llama/Llama-4-* or Qwen/Qwen3-*")
    measure: bool = Field(
        default=False, strict=True, description="start a measured run for a matching release"
    )
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=MAX_TOP_K, description="candidates a run measures")
    budget_usd: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    notify: NotifyTargets = Field(default_factory=NotifyTargets)

    _pattern = field_validator("model_pattern")(_check_pattern)


class ReleaseOptions(Strict):
    """The release-only settings of a watch (item PK=WATCH#{id}, SK=RELEASE)."""

    watch_id: str
    measure: bool = False
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=MAX_TOP_K)
    budget_usd: float | None = Field(default=None, gt=0)
    eventbridge: bool = True

    def keys(self) -> dict[str, str]:
        return table.watch_options_key(self.watch_id)


class WatchResult(Strict):
    """What a watch was told about one release (item PK=WATCH#{id}, SK=RESULT#{at}#{model}), newest first."""

    watch_id: str
    model_id: str
    at: str = Field(default_factory=now_iso)
    config_digest: str | None = Field(default=None, description="which config.json of the model it is about")
    verdict: str | None = None
    headline: str | None = None
    change_pct: float | None = None
    run_id: str | None = None
    error: str | None = None

    def keys(self) -> dict[str, str]:
        return table.watch_result_key(self.watch_id, self.at, self.model_id)


class ReleaseWatch(Strict):
    """A watch as the API shows it and the release handler uses it."""

    watch_id: str
    name: str
    spec: dict[str, Any]
    model_pattern: str
    current_model: str
    measure: bool
    top_k: int
    budget_usd: float | None = None
    notify: NotifyTargets
    created_at: str
    source: RunSource
    slack: SlackThread | None = None
    recent_results: list[WatchResult] = Field(
        default_factory=list, description="what the last releases gave (GET /watches/{id} only), newest first"
    )

    def matches(self, model_id: str) -> bool:
        return matches(self.model_pattern, model_id)

    @classmethod
    def of(cls, watch: Watch, options: ReleaseOptions | None) -> ReleaseWatch:
        opts = options or ReleaseOptions(watch_id=watch.watch_id)
        return cls(
            watch_id=watch.watch_id,
            name=watch.name,
            spec=watch.spec,
            model_pattern=watch.model or "",
            current_model=str(watch.spec.get("model", "")),
            measure=opts.measure,
            top_k=opts.top_k,
            budget_usd=opts.budget_usd,
            notify=NotifyTargets(
                slack_channel=watch.slack.channel if watch.slack else None, eventbridge=opts.eventbridge
            ),
            created_at=watch.created_at,
            source=watch.source,
            slack=watch.slack,
        )


def matches(pattern: str, model_id: str) -> bool:
    """Does a released model id match a watch's pattern? Case-insensitive, like Hub ids."""
    return bool(pattern) and fnmatch.fnmatchcase(model_id.lower(), pattern.lower())


class WatchService:
    """Create, read, list and delete watches (store `Watch` + `ReleaseOptions`). `catalog` gives the catalog
    that validates a watch's current model (the shipped one plus models added by releases)."""

    def __init__(self, store: SizingStore, catalog: Callable[[], Catalog]) -> None:
        self.store = store
        self._catalog = catalog

    def create(self, request: WatchRequest, *, source: RunSource = "api") -> ReleaseWatch:
        """Validate the saved workload (InvalidInput naming `spec.<field>`; NotFound for an unknown current
        model) and store the watch."""
        watch, options = self._build(request, source, self._catalog())
        # options first: a listed watch always has its options
        self._put_options(options)
        self.store.put_watch(watch)
        return ReleaseWatch.of(watch, options)

    def create_many(self, requests: list[WatchRequest], *, source: RunSource = "api") -> list[ReleaseWatch]:
        """`create` for many watches at once (25 items per BatchWriteItem, every options item before its watch
        item): a bulk import, or a benchmark's thousands of watches. Validates them all before storing any."""
        catalog = self._catalog()
        built = [self._build(r, source, catalog) for r in requests]
        options = [
            {**o.model_dump(mode="json"), **o.keys(), "type": "watch_release_options"} for _w, o in built
        ]
        watches = [{**w.model_dump(mode="json"), **w.keys(), "type": "watch"} for w, _o in built]
        self._batch_write([{"PutRequest": {"Item": to_item(body)}} for body in options + watches])
        return [ReleaseWatch.of(w, o) for w, o in built]

    def _build(
        self, request: WatchRequest, source: RunSource, catalog: Catalog
    ) -> tuple[Watch, ReleaseOptions]:
        spec = parse_spec(request.spec, prefix="spec", catalog=catalog)
        model = catalog.model(spec.model, field_name="spec.model")
        raw = {**request.spec, "model": model.id}
        watch_id = uuid.uuid4().hex
        options = ReleaseOptions(
            watch_id=watch_id,
            measure=request.measure,
            top_k=request.top_k,
            budget_usd=request.budget_usd,
            eventbridge=request.notify.eventbridge,
        )
        slack = SlackThread(channel=request.notify.slack_channel) if request.notify.slack_channel else None
        watch = Watch(
            watch_id=watch_id,
            name=request.name,
            spec=raw,
            model=request.model_pattern,
            source=source,
            slack=slack,
        )
        return watch, options

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), BATCH_WRITE_MAX):
            pending: dict[str, Any] = {self.store.table_name: requests[start : start + BATCH_WRITE_MAX]}
            while pending:
                out = self.store.client.batch_write_item(RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}

    def get(self, watch_id: str) -> ReleaseWatch:
        """One watch with its recent results."""
        found = self.find(watch_id)
        found.recent_results = self.results(watch_id)
        return found

    def find(self, watch_id: str) -> ReleaseWatch:
        """One watch without its results (what re-sizing it needs); NotFound when there is no such watch."""
        watch = self.store.get_watch(watch_id)
        return ReleaseWatch.of(watch, self._options([watch_id]).get(watch_id))

    def page(self, limit: int = MAX_PAGE, token: str | None = None) -> tuple[list[ReleaseWatch], str | None]:
        watches, next_token = self.store.list_watches(limit=limit, token=token)
        options = self._options([w.watch_id for w in watches])
        return [ReleaseWatch.of(w, options.get(w.watch_id)) for w in watches], next_token

    def all(self) -> Iterator[ReleaseWatch]:
        token: str | None = None
        while True:
            page, token = self.page(MAX_PAGE, token)
            yield from page
            if token is None:
                return

    def matching(self, model_id: str) -> list[ReleaseWatch]:
        """Every watch whose pattern matches a released model, oldest first (a stable processing order)."""
        return sorted((w for w in self.all() if w.matches(model_id)), key=lambda w: w.created_at)

    def matching_ids(self, model_id: str) -> list[str]:
        """The ids of every watch whose pattern matches a released model, oldest first: what a fan-out needs,
        read in DynamoDB's 1 MB query pages of the two attributes it looks at (thousands of watches a page,
        where `matching` reads 100 watches and their options a page)."""
        kwargs: dict[str, Any] = {
            "TableName": self.store.table_name,
            "IndexName": WATCHES_INDEX,
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": WATCHES_INDEX_PK}},
            "ProjectionExpression": "watch_id, #pattern",
            "ExpressionAttributeNames": {"#pattern": "model"},
            "ScanIndexForward": True,
        }
        ids: list[str] = []
        while True:
            out = self.store.client.query(**kwargs)
            for item in out.get("Items", []):
                data = from_item(item)
                if matches(str(data.get("model") or ""), model_id):
                    ids.append(str(data["watch_id"]))
            if "LastEvaluatedKey" not in out:
                return ids
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def delete(self, watch_id: str) -> None:
        """Delete a watch, its options and its results; NotFound when there is no such watch."""
        self.store.delete_watch(watch_id)
        keys = [table.watch_options_key(watch_id)]
        keys += [r.keys() for r in self.results(watch_id, limit=None)]
        self._batch_write([{"DeleteRequest": {"Key": to_item(k)}} for k in keys])

    # --- results ------------------------------------------------------------------------------------------
    def record(self, result: WatchResult) -> None:
        body = {**result.model_dump(mode="json"), **result.keys(), "type": "watch_release_result"}
        self.store.client.put_item(TableName=self.store.table_name, Item=to_item(body))

    def results(self, watch_id: str, limit: int | None = RECENT_RESULTS) -> list[WatchResult]:
        """A watch's results, newest first (all of them when `limit` is None)."""
        kwargs: dict[str, Any] = {
            "TableName": self.store.table_name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
            "ExpressionAttributeValues": {
                ":pk": {"S": table.watch_pk(watch_id)},
                ":sk": {"S": RESULT_SK_PREFIX},
            },
            "ScanIndexForward": False,
        }
        if limit is not None:
            kwargs["Limit"] = limit
        found: list[WatchResult] = []
        while True:
            out = self.store.client.query(**kwargs)
            found += [
                WatchResult.model_validate(
                    {k: v for k, v in from_item(i).items() if k not in (table.PK, table.SK, "type")}
                )
                for i in out.get("Items", [])
            ]
            if "LastEvaluatedKey" not in out or (limit is not None and len(found) >= limit):
                return found[:limit] if limit is not None else found
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    # --- options items ------------------------------------------------------------------------------------
    def _put_options(self, options: ReleaseOptions) -> None:
        body = {**options.model_dump(mode="json"), **options.keys(), "type": "watch_release_options"}
        self.store.client.put_item(TableName=self.store.table_name, Item=to_item(body))

    def _options(self, watch_ids: list[str]) -> dict[str, ReleaseOptions]:
        out: dict[str, ReleaseOptions] = {}
        ids = list(dict.fromkeys(watch_ids))
        for start in range(0, len(ids), BATCH_GET_MAX):
            keys = [to_item(table.watch_options_key(i)) for i in ids[start : start + BATCH_GET_MAX]]
            request: dict[str, Any] = {self.store.table_name: {"Keys": keys, "ConsistentRead": True}}
            while request:
                got = self.store.client.batch_get_item(RequestItems=request)
                for item in got.get("Responses", {}).get(self.store.table_name, []):
                    data = {k: v for k, v in from_item(item).items() if k not in (table.PK, table.SK, "type")}
                    options = ReleaseOptions.model_validate(data)
                    out[options.watch_id] = options
                request = got.get("UnprocessedKeys") or {}
        return out
