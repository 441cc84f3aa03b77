"""Page cursors of GET /runs and GET /watches: `next_token` is `{created_at}~{id}` of a page's last item, and
any string of that form (the document's pattern) is a position in the listing, so it is answered, never refused."""

from __future__ import annotations

import re

import pytest
from fakes.store import InMemoryStore

from sizing.service.api.paging import CURSOR_PATTERN, from_store, to_store
from sizing.store.items import RUNS_INDEX_PK, Run

SizingStore = InMemoryStore  # the repository's interface, held in memory (tests/fakes/store.py)


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


def add_runs(store: SizingStore, *created: str) -> None:
    for i, at in enumerate(created):
        store.create_run(Run(run_id=f"run{i}", created_at=at, model="m", spec={}, top_k=1))


def page(store: SizingStore, limit: int, token: str | None) -> tuple[list[str], str | None]:
    after = to_store(token, RUNS_INDEX_PK, "RUN#", "RUN")
    runs, next_token = store.list_runs(limit=limit, token=after)
    return [r.run_id for r in runs], from_store(next_token, RUNS_INDEX_PK)


def test_next_token_is_the_last_runs_time_and_id_and_leads_to_the_next_page(store: SizingStore) -> None:
    # given three runs
    add_runs(
        store, "2026-12-01T10:00:00.000000Z", "2026-12-01T11:00:00.000000Z", "2026-12-01T12:00:00.000000Z"
    )
    # when they are listed two at a time
    first, token = page(store, 2, None)
    second, end = page(store, 2, token)
    # then the token names the last run of the first page, matches the document's pattern, and leads on
    assert first == ["run2", "run1"] and token == "2026-12-01T11:00:00.000000Z~run1"
    assert token is not None and re.match(CURSOR_PATTERN, token)
    assert second == ["run0"] and end is None


def test_a_well_formed_cursor_of_no_stored_run_answers_the_runs_older_than_it(store: SizingStore) -> None:
    # given three runs, and a cursor between the newest two naming a run that never existed
    add_runs(
        store, "2026-12-01T10:00:00.000000Z", "2026-12-01T11:00:00.000000Z", "2026-12-01T12:00:00.000000Z"
    )
    cursor = "2026-12-01T11:30:00.000000Z~never-was"
    # when the page after it is asked for; then it holds the runs created before that time
    assert page(store, 10, cursor) == (["run1", "run0"], None)
    # and a cursor before every run answers an empty page, one after every run the whole listing
    assert page(store, 10, "0000-00-00T00:00:00.000000Z~a") == ([], None)
    assert page(store, 10, "9999-99-99T99:99:99.999999Z~z")[0] == ["run2", "run1", "run0"]
