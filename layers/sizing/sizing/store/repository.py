"""`SizingStore`: the DynamoDB single-table repository of runs, architectures, measurements, rankings and
watches.

Keys (one table, `PK`/`SK`, plus `GSI1` for listings): the table's key scheme, `sizing.base.table`. A run's items all share its
partition: deleting a finished run removes the partition, run item first.

Status changes are conditional writes against `items.ALLOWED_FROM`, so two writers racing (the state machine
finishing while a user cancels) cannot move a finished run back to running.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sizing.base import table
from sizing.base.aws import DynamoTable
from sizing.base.errors import Conflict, InvalidInput, NotFound, Problem
from sizing.base.strict import Lenient, Strict
from sizing.store.codec import from_item, to_item, to_value
from sizing.store.items import (
    ALLOWED_FROM,
    MEASUREMENT_TTL_S,
    RUN_STATUSES,
    RUNS_INDEX_PK,
    TERMINAL,
    WATCHES_INDEX_PK,
    Architecture,
    Measurement,
    Ranking,
    Run,
    Watch,
    now_iso,
)

KEY_ATTRS = table.KEY_ATTRS
RUNS_INDEX = table.INDEX
#: Page sizes: the API's default and ceiling (a page of runs is a few KB each; 100 keeps a response far below
#: API Gateway's 10 MB payload limit and Lambda's 6 MB).
DEFAULT_PAGE = 20
MAX_PAGE = 100
#: BatchWriteItem takes at most 25 requests (DynamoDB limit).
BATCH_WRITE_MAX = 25
TOKEN_VERSION = 1


class _Keyed(Lenient):
    """What the store reads of an architecture it keeps: its rank and id (the rest is kept as given)."""

    rank: int | None = None
    id: str | None = None


class _Token(Strict):
    """The decoded form of an opaque page token: the last item's keys in the listing it came from."""

    v: int = Field(ge=TOKEN_VERSION, le=TOKEN_VERSION)
    index: str = Field(pattern=r"^(RUNS|WATCHES)$")
    pk: str = Field(max_length=300)
    sk: str = Field(max_length=300)
    gsi1sk: str = Field(max_length=300)


def encode_token(index_pk: str, item: dict[str, Any]) -> str:
    raw = _Token(
        v=TOKEN_VERSION, index=index_pk, pk=item[table.PK], sk=item[table.SK], gsi1sk=item[table.GSI1SK]
    )
    return base64.urlsafe_b64encode(raw.model_dump_json().encode()).decode().rstrip("=")


def decode_token(token: str, index_pk: str) -> dict[str, Any]:
    """The ExclusiveStartKey a token stands for; InvalidInput when it was not made by `encode_token` for this
    listing."""
    bad = InvalidInput("the page token is not valid", [Problem("token", "not a token from this listing")])
    try:
        padded = token + "=" * (-len(token) % 4)
        data = _Token.model_validate_json(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, ValidationError, UnicodeError):
        raise bad from None
    prefix = table.RUN_PREFIX if index_pk == RUNS_INDEX_PK else table.WATCH_PREFIX
    if data.index != index_pk or not data.pk.startswith(prefix):
        raise bad
    return {
        table.PK: {"S": data.pk},
        table.SK: {"S": data.sk},
        table.GSI1PK: {"S": index_pk},
        table.GSI1SK: {"S": data.gsi1sk},
    }


def _strip_keys(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in KEY_ATTRS and k != "type"}


# --- run rules ----------------------------------------------------------------------------------------------
# What a run write must satisfy, whatever stores it: the table (SizingStore) and the in-memory fake the unit tests
# use call these, so the two cannot drift apart.


def check_new_run(run: Run) -> None:
    """A new run starts PENDING."""
    if run.status != "PENDING":
        raise Conflict(f"a run starts PENDING, not {run.status}", [Problem("status", "must be PENDING")])


def run_exists(run_id: str) -> Conflict:
    return Conflict(f"run {run_id} already exists", [Problem("run_id", "already exists")])


def check_status_filter(status: str | None) -> None:
    """A runs listing's status filter names a run status."""
    if status is not None and status not in RUN_STATUSES:
        raise InvalidInput(
            f"unknown status '{status}'", [Problem("status", f"one of {', '.join(RUN_STATUSES)}")]
        )


def transition_allowed(
    to_status: str, expected_from: str | list[str] | tuple[str, ...] | None, fields: dict[str, Any]
) -> set[str]:
    """The statuses a run may move to `to_status` from (narrowed by `expected_from`), after checking that
    `to_status` is a status and `fields` are settable run fields of the right types."""
    if to_status not in ALLOWED_FROM:
        raise InvalidInput(f"unknown status '{to_status}'", [Problem("status", "not a run status")])
    allowed = set(ALLOWED_FROM[to_status])
    if expected_from is not None:
        allowed &= {expected_from} if isinstance(expected_from, str) else set(expected_from)
    unknown = set(fields) - (set(Run.model_fields) - {"run_id", "status", "created_at", "updated_at"})
    if unknown:
        raise InvalidInput(
            f"cannot set {sorted(unknown)} on a run", [Problem(f, "not settable") for f in unknown]
        )
    if not allowed:
        raise Conflict(f"a run cannot move to {to_status} from {expected_from}")
    # type-check the fields before writing
    Run.model_validate({"run_id": "x", "model": "x", "spec": {}, "top_k": 1, **fields})
    return allowed


def delete_refused(run_id: str, current: str) -> Conflict:
    """A run that has not finished is not deleted: its execution still writes to it and may hold resources."""
    return Conflict(
        f"run {run_id} is {current}; only a finished run ({', '.join(sorted(TERMINAL))}) can be deleted",
        [Problem("status", f"{current} is not finished")],
        {"status": current},
        "conflict",
    )


def transition_refused(run_id: str, current: str, to_status: str) -> Conflict:
    return Conflict(
        f"run {run_id} is {current}; it cannot move to {to_status}",
        [Problem("status", f"{current} → {to_status} is not allowed")],
        {"status": current},
        "conflict",
    )


class RecordStore:
    """The sizing records (runs, architectures, measurements, rankings, watches) over four primitives a store
    provides: `_put`, `_get`, `_query_prefix` (a partition's items by sort-key prefix) and `_page` (an index newest
    first). `SizingStore` provides them on the table; the tests' in-memory store on a dict. The writes whose
    atomicity each store keeps its own way (create, transition, replacing architectures, deleting a watch) are
    theirs."""

    def _put(self, item_type: str, model: BaseModel, keys: dict[str, str], **kwargs: Any) -> None:
        raise NotImplementedError

    def _get(self, key: dict[str, str]) -> dict[str, Any] | None:
        raise NotImplementedError

    def _query_prefix(self, pk: str, sk_prefix: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _page(
        self, index_pk: str, limit: int, token: str | None, filters: dict[str, str]
    ) -> tuple[list[dict[str, Any]], str | None]:
        raise NotImplementedError

    def get_run(self, run_id: str) -> Run:
        data = self._get(Run.key(run_id))
        if data is None:
            raise NotFound(f"no run with id '{run_id}'")
        return Run.model_validate(_strip_keys(data))

    def has_run(self, run_id: str) -> bool:
        """Whether a run with this id is stored (a deleted one is not)."""
        return self._get(Run.key(run_id)) is not None

    def list_runs(
        self,
        limit: int = DEFAULT_PAGE,
        token: str | None = None,
        model: str | None = None,
        status: str | None = None,
    ) -> tuple[list[Run], str | None]:
        """Runs newest first, optionally only one model's or one status's; returns (page, next token)."""
        check_status_filter(status)
        filters = {k: v for k, v in (("model", model), ("status", status)) if v is not None}
        items, next_token = self._page(RUNS_INDEX_PK, limit, token, filters)
        return [Run.model_validate(_strip_keys(i)) for i in items], next_token

    def get_architectures(self, run_id: str) -> list[dict[str, Any]]:
        """A run's architectures in rank order (empty until the run has ranked any)."""
        items = [
            Architecture.model_validate(_strip_keys(i))
            for i in self._query_prefix(table.run_pk(run_id), table.ARCH_PREFIX)
        ]
        return [a.data for a in sorted(items, key=lambda a: a.rank)]

    def put_measurement(
        self, run_id: str, candidate_id: str, step_record: dict[str, Any], *, now: float | None = None
    ) -> Measurement:
        """Store one load-test step of a candidate; it expires `MEASUREMENT_TTL_S` after now."""
        t = time.time() if now is None else now
        seq = f"{int(t * 1e6):020d}-{uuid.uuid4().hex[:8]}"
        m = Measurement(
            run_id=run_id,
            candidate_id=candidate_id,
            seq=seq,
            record=step_record,
            expires_at=int(t) + MEASUREMENT_TTL_S,
        )
        self._put("measurement", m, m.keys())
        return m

    def list_measurements(self, run_id: str, candidate_id: str | None = None) -> list[Measurement]:
        prefix = f"{table.MEAS_PREFIX}{candidate_id}#" if candidate_id else table.MEAS_PREFIX
        items = self._query_prefix(table.run_pk(run_id), prefix)
        return [Measurement.model_validate(_strip_keys(i)) for i in items]

    def put_ranking(self, run_id: str, ranking: dict[str, Any]) -> Ranking:
        r = Ranking(run_id=run_id, data=ranking)
        self._put("ranking", r, r.keys())
        return r

    def get_ranking(self, run_id: str) -> dict[str, Any] | None:
        data = self._get(table.ranking_key(run_id))
        return None if data is None else Ranking.model_validate(_strip_keys(data)).data

    def put_watch(self, watch: Watch) -> Watch:
        self._put("watch", watch, watch.keys())
        return watch

    def get_watch(self, watch_id: str) -> Watch:
        data = self._get(Watch.key(watch_id))
        if data is None:
            raise NotFound(f"no watch with id '{watch_id}'")
        return Watch.model_validate(_strip_keys(data))

    def list_watches(
        self, limit: int = MAX_PAGE, token: str | None = None, model: str | None = None
    ) -> tuple[list[Watch], str | None]:
        filters = {"model": model} if model else {}
        items, next_token = self._page(WATCHES_INDEX_PK, limit, token, filters)
        return [Watch.model_validate(_strip_keys(i)) for i in items], next_token


class SizingStore(DynamoTable, RecordStore):
    """Repository over the one table. `client` is a boto3 DynamoDB client (made lazily when not given)."""

    # --- helpers ------------------------------------------------------------------------------------------
    def _put(self, item_type: str, model: BaseModel, keys: dict[str, str], **kwargs: Any) -> None:
        body = {**model.model_dump(mode="json"), **keys, "type": item_type}
        self.client.put_item(TableName=self.table_name, Item=to_item(body), **kwargs)

    def _get(self, key: dict[str, str]) -> dict[str, Any] | None:
        out = self.client.get_item(TableName=self.table_name, Key=to_item(key), ConsistentRead=True)
        return from_item(out["Item"]) if "Item" in out else None

    def _query_prefix(self, pk: str, sk_prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":sk": {"S": sk_prefix}},
            "ConsistentRead": True,
        }
        if not sk_prefix:  # the whole partition (a key condition may not hold an empty string)
            kwargs["KeyConditionExpression"] = "PK = :pk"
            kwargs["ExpressionAttributeValues"] = {":pk": {"S": pk}}
        while True:
            out = self.client.query(**kwargs)
            items += [from_item(i) for i in out.get("Items", [])]
            if "LastEvaluatedKey" not in out:
                return items
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), BATCH_WRITE_MAX):
            pending: dict[str, Any] = {self.table_name: requests[start : start + BATCH_WRITE_MAX]}
            while pending:
                out = self.client.batch_write_item(RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}

    def _page(
        self,
        index_pk: str,
        limit: int,
        token: str | None,
        filters: dict[str, str],
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Newest first from GSI1, filtered; keeps querying until `limit` matches or the index ends, and makes
        the next token from the last item returned (not DynamoDB's LastEvaluatedKey, which may lie past
        items a filter skipped on a short page)."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(
                f"limit must be between 1 and {MAX_PAGE}", [Problem("limit", f"must be 1..{MAX_PAGE}")]
            )
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": RUNS_INDEX,
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": index_pk}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if filters:
            names = {f"#f{i}": name for i, name in enumerate(filters)}
            values = {f":f{i}": to_value(value) for i, value in enumerate(filters.values())}
            kwargs["FilterExpression"] = " AND ".join(f"#f{i} = :f{i}" for i in range(len(filters)))
            kwargs["ExpressionAttributeNames"] = names
            kwargs["ExpressionAttributeValues"].update(values)
        if token:
            kwargs["ExclusiveStartKey"] = decode_token(token, index_pk)
        found: list[dict[str, Any]] = []
        while True:
            out = self.client.query(**kwargs)
            found += [from_item(i) for i in out.get("Items", [])]
            more = "LastEvaluatedKey" in out
            if len(found) >= limit or not more:
                break
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        page = found[:limit]
        next_token = encode_token(index_pk, page[-1]) if page and (more or len(found) > limit) else None
        return page, next_token

    # --- runs ---------------------------------------------------------------------------------------------
    def create_run(self, run: Run) -> Run:
        """Store a new run (status PENDING). Conflict when the id is taken."""
        check_new_run(run)
        try:
            self._put("run", run, run.keys(), ConditionExpression="attribute_not_exists(PK)")
        except self.client.exceptions.ConditionalCheckFailedException:
            raise run_exists(run.run_id) from None
        return run

    def transition(
        self,
        run_id: str,
        to_status: str,
        expected_from: str | list[str] | tuple[str, ...] | None = None,
        **fields: Any,
    ) -> Run:
        """Move a run to `to_status` (setting `fields` too) if its current status allows it: by default any
        allowed predecessor of `to_status`; `expected_from` narrows that. NotFound for an unknown run,
        Conflict when the run is in another status (the stored run is unchanged)."""
        allowed = transition_allowed(to_status, expected_from, fields)
        values = {"updated_at": now_iso(), "status": to_status, **fields}
        names = {f"#a{i}": k for i, k in enumerate(values)}
        expr_values: dict[str, Any] = {
            f":a{i}": to_value(_jsonable(v)) for i, v in enumerate(values.values())
        }
        from_names = sorted(allowed)
        expr_values.update({f":from{i}": {"S": s} for i, s in enumerate(from_names)})
        names["#status"] = "status"
        condition = (
            "attribute_exists(PK) AND #status IN ("
            + ", ".join(f":from{i}" for i in range(len(from_names)))
            + ")"
        )
        try:
            out = self.client.update_item(
                TableName=self.table_name,
                Key=to_item(Run.key(run_id)),
                UpdateExpression="SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(values))),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=expr_values,
                ReturnValues="ALL_NEW",
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            current = self.get_run(run_id)  # NotFound when missing
            raise transition_refused(run_id, current.status, to_status) from None
        return Run.model_validate(_strip_keys(from_item(out["Attributes"])))

    def delete_run(self, run_id: str) -> Run:
        """Delete a finished run and everything stored under it (architectures, measurements, ranking); returns
        the run as it was. NotFound when there is none, Conflict (the run unchanged) when it has not finished.
        The run item goes first, under the condition that it is finished, so no reader finds a run whose
        results are half gone; a finished run is never written again, so nothing races the rest."""
        terminal = sorted(TERMINAL)
        try:
            out = self.client.delete_item(
                TableName=self.table_name,
                Key=to_item(Run.key(run_id)),
                ConditionExpression="attribute_exists(PK) AND #status IN ("
                + ", ".join(f":t{i}" for i in range(len(terminal)))
                + ")",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={f":t{i}": {"S": s} for i, s in enumerate(terminal)},
                ReturnValues="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            raise delete_refused(run_id, self.get_run(run_id).status) from None  # NotFound when missing
        rest = self._query_prefix(f"RUN#{run_id}", "")
        self._batch_write([{"DeleteRequest": {"Key": to_item({"PK": i["PK"], "SK": i["SK"]})}} for i in rest])
        return Run.model_validate(_strip_keys(from_item(out["Attributes"])))

    # --- architectures, measurements, rankings ------------------------------------------------------------
    def put_architectures(self, run_id: str, architectures: list[dict[str, Any]]) -> list[Architecture]:
        """Replace a run's ranked architectures (each an Estimate-result architecture; `rank` and `id` used
        for the key when present, else the list order)."""
        keyed = [_Keyed.model_validate(a) for a in architectures]
        items = [
            Architecture(
                run_id=run_id,
                rank=k.rank if k.rank is not None else i + 1,
                architecture_id=k.id if k.id is not None else f"arch-{i + 1}",
                data=a,
            )
            for i, (a, k) in enumerate(zip(architectures, keyed, strict=True))
        ]
        old = self._query_prefix(table.run_pk(run_id), table.ARCH_PREFIX)
        deletes = [
            {"DeleteRequest": {"Key": to_item({table.PK: o[table.PK], table.SK: o[table.SK]})}} for o in old
        ]
        new_keys = {(i.keys()[table.SK]) for i in items}
        deletes = [d for d in deletes if d["DeleteRequest"]["Key"][table.SK]["S"] not in new_keys]
        puts = [
            {
                "PutRequest": {
                    "Item": to_item({**i.model_dump(mode="json"), **i.keys(), "type": "architecture"})
                }
            }
            for i in items
        ]
        self._batch_write(deletes + puts)
        return items

    # --- watches ------------------------------------------------------------------------------------------
    def delete_watch(self, watch_id: str) -> None:
        """Delete a watch; NotFound when there is none."""
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key=to_item(Watch.key(watch_id)),
                ConditionExpression="attribute_exists(PK)",
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            raise NotFound(f"no watch with id '{watch_id}'") from None


def _jsonable(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
