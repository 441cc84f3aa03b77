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
import time
import uuid
from typing import Any

from pydantic import BaseModel

from sizing.errors import InvalidInput, NotFound, Problem
from sizing.store.codec import from_item, to_item
from sizing.store.items import (
    MEASUREMENT_TTL_S,
    RUNS_INDEX_PK,
    WATCHES_INDEX_PK,
    Architecture,
    Measurement,
    Ranking,
    Run,
    Watch,
    now_iso,
)
from sizing.store.repository import (
    DEFAULT_PAGE,
    MAX_PAGE,
    check_new_run,
    check_status_filter,
    decode_token,
    encode_token,
    run_exists,
    transition_allowed,
    transition_refused,
)

Key = tuple[str, str]


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("PK", "SK", "GSI1PK", "GSI1SK", "type")}


class InMemoryStore:
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

    def _put(self, item_type: str, model: BaseModel, keys: dict[str, str]) -> None:
        body = {**model.model_dump(mode="json"), **keys, "type": item_type}
        self._items[(keys["PK"], keys["SK"])] = from_item(to_item(body))

    def _get(self, key: dict[str, str]) -> dict[str, Any] | None:
        found = self._items.get((key["PK"], key["SK"]))
        return copy.deepcopy(found) if found is not None else None

    def _prefix(self, pk: str, sk_prefix: str) -> list[dict[str, Any]]:
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

    def get_run(self, run_id: str) -> Run:
        data = self._get(Run.key(run_id))
        if data is None:
            raise NotFound(f"no run with id '{run_id}'")
        return Run.model_validate(_strip(data))

    def list_runs(
        self,
        limit: int = DEFAULT_PAGE,
        token: str | None = None,
        model: str | None = None,
        status: str | None = None,
    ) -> tuple[list[Run], str | None]:
        check_status_filter(status)
        filters = {k: v for k, v in (("model", model), ("status", status)) if v is not None}
        items, next_token = self._page(RUNS_INDEX_PK, limit, token, filters)
        return [Run.model_validate(_strip(i)) for i in items], next_token

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
            for old in self._prefix(f"RUN#{run_id}", "ARCH#"):
                del self._items[(old["PK"], old["SK"])]
            for item in items:
                self._put("architecture", item, item.keys())
        return items

    def get_architectures(self, run_id: str) -> list[dict[str, Any]]:
        items = [Architecture.model_validate(_strip(i)) for i in self._prefix(f"RUN#{run_id}", "ARCH#")]
        return [a.data for a in sorted(items, key=lambda a: a.rank)]

    def put_measurement(
        self, run_id: str, candidate_id: str, step_record: dict[str, Any], *, now: float | None = None
    ) -> Measurement:
        t = time.time() if now is None else now
        m = Measurement(
            run_id=run_id,
            candidate_id=candidate_id,
            seq=f"{int(t * 1e6):020d}-{uuid.uuid4().hex[:8]}",
            record=step_record,
            expires_at=int(t) + MEASUREMENT_TTL_S,
        )
        self._put("measurement", m, m.keys())
        return m

    def list_measurements(self, run_id: str, candidate_id: str | None = None) -> list[Measurement]:
        prefix = f"MEAS#{candidate_id}#" if candidate_id else "MEAS#"
        return [Measurement.model_validate(_strip(i)) for i in self._prefix(f"RUN#{run_id}", prefix)]

    def put_ranking(self, run_id: str, ranking: dict[str, Any]) -> Ranking:
        r = Ranking(run_id=run_id, data=ranking)
        self._put("ranking", r, r.keys())
        return r

    def get_ranking(self, run_id: str) -> dict[str, Any] | None:
        data = self._get({"PK": f"RUN#{run_id}", "SK": "RANKING"})
        return None if data is None else Ranking.model_validate(_strip(data)).data

    # --- watches ------------------------------------------------------------------------------------------
    def put_watch(self, watch: Watch) -> Watch:
        self._put("watch", watch, watch.keys())
        return watch

    def get_watch(self, watch_id: str) -> Watch:
        data = self._get(Watch.key(watch_id))
        if data is None:
            raise NotFound(f"no watch with id '{watch_id}'")
        return Watch.model_validate(_strip(data))

    def list_watches(
        self, limit: int = MAX_PAGE, token: str | None = None, model: str | None = None
    ) -> tuple[list[Watch], str | None]:
        items, next_token = self._page(WATCHES_INDEX_PK, limit, token, {"model": model} if model else {})
        return [Watch.model_validate(_strip(i)) for i in items], next_token

    def delete_watch(self, watch_id: str) -> None:
        with self._lock:
            if self._items.pop(tuple(Watch.key(watch_id).values()), None) is None:  # type: ignore[arg-type]
                raise NotFound(f"no watch with id '{watch_id}'")
