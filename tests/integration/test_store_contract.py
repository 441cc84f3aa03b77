"""The in-memory store (tests/fakes/store.py) answers as `SizingStore` on DynamoDB (moto) does: the same
scenarios run on both and must give the same answers, so unit tests on the fake say something about the real
store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from fakes.store import InMemoryStore
from moto import mock_aws

from sizing.base.errors import Conflict, NotFound
from sizing.store import Run, SizingStore, Watch, create_table


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        yield SizingStore(create_table(ddb, "llm-sizing-contract"), client=ddb)


def _runs(store: Any, n: int, model: str = "m") -> list[Run]:
    return [
        store.create_run(
            Run(run_id=f"r{i}", created_at=f"2026-12-01T10:00:{i:02d}.000000Z", model=model, spec={}, top_k=1)
        )
        for i in range(n)
    ]


def test_listing_pages_are_newest_first_and_end_where_the_runs_do(store: Any) -> None:
    # given five runs
    _runs(store, 5)
    # when they are listed two at a time, following the tokens
    pages, token = [], None
    while True:
        runs, token = store.list_runs(limit=2, token=token)
        pages.append([r.run_id for r in runs])
        if token is None:
            break
    # then every run comes once, newest first
    assert [r for p in pages for r in p] == ["r4", "r3", "r2", "r1", "r0"]
    assert pages[0] == ["r4", "r3"]


def test_filters_and_exact_pages(store: Any) -> None:
    # given runs of two models
    _runs(store, 3)
    store.create_run(
        Run(run_id="x", created_at="2026-12-01T11:00:00.000000Z", model="other", spec={}, top_k=1)
    )
    # when one model's runs are listed, and a page exactly as long as what is left
    only, _ = store.list_runs(model="other")
    exact, token = store.list_runs(limit=4)
    # then
    assert [r.run_id for r in only] == ["x"]
    assert [r.run_id for r in exact] == ["x", "r2", "r1", "r0"]
    after, end = store.list_runs(limit=4, token=token) if token else ([], None)
    assert after == [] and end is None


def test_status_changes_follow_the_rules_and_a_refused_one_changes_nothing(store: Any) -> None:
    # given a running run
    (run,) = _runs(store, 1)
    store.transition(run.run_id, "RUNNING", execution_arn="arn:x")
    store.transition(run.run_id, "SUCCEEDED")
    # when it is asked to run again; then a conflict naming its status, and it stays as it was
    with pytest.raises(Conflict) as err:
        store.transition(run.run_id, "RUNNING")
    assert err.value.details == {"status": "SUCCEEDED"}
    kept = store.get_run(run.run_id)
    assert kept.status == "SUCCEEDED" and kept.execution_arn == "arn:x"
    with pytest.raises(NotFound):
        store.transition("nope", "RUNNING")
    with pytest.raises(Conflict):
        store.create_run(Run(run_id=run.run_id, model="m", spec={}, top_k=1))


def test_architectures_rankings_measurements_and_watches_read_back_alike(store: Any) -> None:
    # given what a run stores
    (run,) = _runs(store, 1)
    store.put_architectures(
        run.run_id, [{"id": "a", "rank": 2, "cost": 1.5}, {"id": "b", "rank": 1, "cost": 2}]
    )
    store.put_architectures(run.run_id, [{"id": "b", "rank": 1, "cost": 2.0}])
    store.put_ranking(run.run_id, {"status": "SUCCEEDED", "top": [0.1, 3]})
    store.put_measurement(run.run_id, "c1", {"requests": 10, "ttft": 0.25}, now=1_700_000_000)
    store.put_watch(Watch(watch_id="w1", name="nightly", spec={}, model="m"))
    # then it reads back the same (numbers as DynamoDB returns them), and a deleted watch is gone
    assert store.get_architectures(run.run_id) == [{"id": "b", "rank": 1, "cost": 2}]
    assert store.get_ranking(run.run_id) == {"status": "SUCCEEDED", "top": [0.1, 3]}
    (m,) = store.list_measurements(run.run_id, "c1")
    assert m.record == {"requests": 10, "ttft": 0.25} and m.expires_at > 1_700_000_000
    assert [w.watch_id for w in store.list_watches(model="m")[0]] == ["w1"]
    store.delete_watch("w1")
    with pytest.raises(NotFound):
        store.delete_watch("w1")
