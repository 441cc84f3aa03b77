"""`InMemoryStore`: the repository `SizingStore` without DynamoDB, for unit tests of `RunsService`, the Slack bot
and the API's paging.

Same methods, same answers and errors as `SizingStore`: items are kept under the table's own keys (PK/SK,
GSI1PK/GSI1SK) after a round trip through the DynamoDB codec (so numbers come back as they would), listings are
newest first from the GSI1 keys with the store's own page tokens, status changes obey `items.ALLOWED_FROM` and a
refused one leaves the run as it was. `tests/integration/test_store_contract.py` runs the same scenarios against
this fake and against `SizingStore` on moto, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from pydantic import BaseModel

from sizing.base.errors import InvalidInput, NotFound, Problem
from sizing.store.codec import from_item, to_item
from sizing.store.items import (
    Architecture,
    Run,
    Watch,
    now_iso,
)
from sizing.store.repository import (
    MAX_PAGE,
    RecordStore,
    check_new_run,
    decode_token,
    encode_token,
    run_exists,
    transition_allowed,
    transition_refused,
)

Key = tuple[str, str]


class InMemoryStore(RecordStore):
    """A `SizingStore` held in a dict. `table_name` is kept for code that reads it; `items()` shows what is
    stored (to see that a refused request wrote nothing)."""

    def __init__(self, table_name: str = "llm-sizing-memory") -> None:
        self.table_name = table_name
        self._items: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()  # conditional writes are atomic, as DynamoDB's are

    # --- storage ------------------------------------------------------------------------------------------
    def items(self) -> list[dict[str, Any]]:
        """Every stored item, with its keys, in key order."""
        return [copy.deepcopy(self._items[k]) for k in sorted(self._items)]

    def _put(self, item_type: str, model: BaseModel, keys: dict[str, str], **kwargs: Any) -> None:
        body = {**model.model_dump(mode="json"), **keys, "type": item_type}
        self._items[(keys["PK"], keys["SK"])] = from_item(to_item(body))

    def _get(self, key: dict[str, str]) -> dict[str, Any] | None:
        found = self._items.get((key["PK"], key["SK"]))
        return copy.deepcopy(found) if found is not None else None

    def _query_prefix(self, pk: str, sk_prefix: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(v)
            for (p, s), v in sorted(self._items.items())
            if p == pk and s.startswith(sk_prefix)
        ]

    def _page(
        self, index_pk: str, limit: int, token: str | None, filters: dict[str, str]
    ) -> tuple[list[dict[str, Any]], str | None]:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(
                f"limit must be between 1 and {MAX_PAGE}", [Problem("limit", f"must be 1..{MAX_PAGE}")]
            )
        listed = sorted(
            (v for v in self._items.values() if v.get("GSI1PK") == index_pk),
            key=lambda v: (v["GSI1SK"], v["PK"], v["SK"]),
            reverse=True,
        )
        if token:
            start = decode_token(token, index_pk)
            after = (start["GSI1SK"]["S"], start["PK"]["S"], start["SK"]["S"])
            listed = [v for v in listed if (v["GSI1SK"], v["PK"], v["SK"]) < after]
        matching = [v for v in listed if all(v.get(k) == want for k, want in filters.items())]
        page = [copy.deepcopy(v) for v in matching[:limit]]
        more = len(matching) > limit
        return page, (encode_token(index_pk, page[-1]) if page and more else None)

    # --- runs ---------------------------------------------------------------------------------------------
    def create_run(self, run: Run) -> Run:
        check_new_run(run)
        with self._lock:
            if (f"RUN#{run.run_id}", "RUN") in self._items:
                raise run_exists(run.run_id)
            self._put("run", run, run.keys())
        return run

    def transition(
        self,
        run_id: str,
        to_status: str,
        expected_from: str | list[str] | tuple[str, ...] | None = None,
        **fields: Any,
    ) -> Run:
        allowed = transition_allowed(to_status, expected_from, fields)
        with self._lock:
            current = self.get_run(run_id)  # NotFound when missing
            if current.status not in allowed:
                raise transition_refused(run_id, current.status, to_status)
            values = {
                k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in fields.items()
            }
            updated = Run.model_validate(
                {**current.model_dump(mode="json"), **values, "status": to_status, "updated_at": now_iso()}
            )
            self._put("run", updated, updated.keys())
        return self.get_run(run_id)

    # --- architectures, measurements, rankings ------------------------------------------------------------
    def put_architectures(self, run_id: str, architectures: list[dict[str, Any]]) -> list[Architecture]:
        items = [
            Architecture(
                run_id=run_id,
                rank=int(a.get("rank", i + 1)),
                architecture_id=str(a.get("id", f"arch-{i + 1}")),
                data=a,
            )
            for i, a in enumerate(architectures)
        ]
        with self._lock:
            for old in self._query_prefix(f"RUN#{run_id}", "ARCH#"):
                del self._items[(old["PK"], old["SK"])]
            for item in items:
                self._put("architecture", item, item.keys())
        return items

    # --- watches ------------------------------------------------------------------------------------------
    def delete_watch(self, watch_id: str) -> None:
        with self._lock:
            if self._items.pop(tuple(Watch.key(watch_id).values()), None) is None:
                raise NotFound(f"no watch with id '{watch_id}'")
