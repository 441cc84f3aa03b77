"""The DynamoDB repository on moto: runs, their status rules, listings and the items under a run."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from sizing.base.errors import Conflict, InvalidInput, NotFound
from sizing.store import Run, SizingStore, Watch, create_table
from sizing.store.items import MEASUREMENT_TTL_S

pytestmark = pytest.mark.integration

SPEC = {"model": "meta-llama/Llama-3.1-8B-Instruct", "rate": {"peak_rps": 2.5}}


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[SizingStore]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        yield SizingStore(create_table(client, "sizing-test"), client=client)


def _run(run_id: str, model: str = "meta-llama/Llama-3.1-8B-Instruct", created_at: str | None = None) -> Run:
    extra = {"created_at": created_at} if created_at else {}
    return Run(run_id=run_id, model=model, spec={**SPEC, "model": model}, top_k=3, **extra)


def test_a_created_run_reads_back_with_its_spec_and_numbers_intact(store: SizingStore) -> None:
    # given
    run = _run("r1").model_copy(update={"budget_usd": 12.5})
    # when
    store.create_run(run)
    # then
    back = store.get_run("r1")
    assert back == run
    assert back.spec["rate"]["peak_rps"] == 2.5


def test_a_run_id_cannot_be_created_twice(store: SizingStore) -> None:
    store.create_run(_run("r1"))
    with pytest.raises(Conflict):
        store.create_run(_run("r1"))


def test_an_unknown_run_is_not_found(store: SizingStore) -> None:
    with pytest.raises(NotFound):
        store.get_run("nope")
    with pytest.raises(NotFound):
        store.transition("nope", "RUNNING")


def test_a_run_moves_through_its_lifecycle_and_records_fields(store: SizingStore) -> None:
    # given
    store.create_run(_run("r1"))
    # when
    running = store.transition("r1", "RUNNING", expected_from="PENDING", execution_arn="arn:exec:1")
    done = store.transition("r1", "SUCCEEDED")
    # then
    assert running.status == "RUNNING" and running.execution_arn == "arn:exec:1"
    assert done.status == "SUCCEEDED"
    assert store.get_run("r1").updated_at >= running.updated_at


def test_a_finished_run_never_goes_back_to_running(store: SizingStore) -> None:
    # given a run that failed
    store.create_run(_run("r1"))
    store.transition("r1", "FAILED", error="budget exceeded")
    # when / then
    with pytest.raises(Conflict) as info:
        store.transition("r1", "RUNNING")
    assert info.value.details["status"] == "FAILED"
    assert store.get_run("r1").status == "FAILED"


def test_expected_from_narrows_the_allowed_predecessors(store: SizingStore) -> None:
    store.create_run(_run("r1"))
    with pytest.raises(Conflict):
        store.transition("r1", "CANCELLING", expected_from="RUNNING")
    assert store.get_run("r1").status == "PENDING"


def test_runs_list_newest_first_in_pages_with_opaque_tokens(store: SizingStore) -> None:
    # given five runs created one after the other
    for i in range(5):
        store.create_run(_run(f"r{i}", created_at=f"2026-01-0{i + 1}T00:00:00.000000Z"))
    # when
    first, token = store.list_runs(limit=2)
    second, token2 = store.list_runs(limit=2, token=token)
    third, token3 = store.list_runs(limit=2, token=token2)
    # then
    assert [r.run_id for r in first + second + third] == ["r4", "r3", "r2", "r1", "r0"]
    assert token and token2 and token3 is None


def test_runs_filter_by_model_and_status_across_pages(store: SizingStore) -> None:
    # given runs of two models, one of them running
    for i in range(6):
        model = "meta-llama/Llama-3.1-70B-Instruct" if i % 2 else "meta-llama/Llama-3.1-8B-Instruct"
        store.create_run(_run(f"r{i}", model=model, created_at=f"2026-01-0{i + 1}T00:00:00.000000Z"))
    store.transition("r3", "RUNNING")
    # when
    big, token = store.list_runs(limit=2, model="meta-llama/Llama-3.1-70B-Instruct")
    rest, end = store.list_runs(limit=2, model="meta-llama/Llama-3.1-70B-Instruct", token=token)
    running, _ = store.list_runs(status="RUNNING")
    # then
    assert [r.run_id for r in big + rest] == ["r5", "r3", "r1"]
    assert end is None
    assert [r.run_id for r in running] == ["r3"]


@pytest.mark.parametrize("token", ["garbage", "eyJ2IjoxfQ", "", "x" * 50])
def test_a_forged_or_broken_token_is_invalid_input(store: SizingStore, token: str) -> None:
    with pytest.raises(InvalidInput):
        store.list_runs(token=token or "=")


def test_architectures_are_replaced_and_read_in_rank_order(store: SizingStore) -> None:
    # given
    store.create_run(_run("r1"))
    store.put_architectures(
        "r1", [{"rank": 2, "id": "b", "x": 0.5}, {"rank": 1, "id": "a"}, {"rank": 3, "id": "c"}]
    )
    # when
    store.put_architectures("r1", [{"rank": 1, "id": "c"}, {"rank": 2, "id": "a"}])
    # then
    assert [a["id"] for a in store.get_architectures("r1")] == ["c", "a"]


def test_measurements_expire_after_the_ttl_and_list_by_candidate(store: SizingStore) -> None:
    # given
    now = 1_800_000_000.0
    store.put_measurement("r1", "cand-a", {"concurrency": 8, "ttft_ms": {"p95": 412.5}}, now=now)
    store.put_measurement("r1", "cand-b", {"concurrency": 8}, now=now + 1)
    # when
    all_steps = store.list_measurements("r1")
    only_a = store.list_measurements("r1", "cand-a")
    # then
    assert len(all_steps) == 2
    assert only_a[0].record == {"concurrency": 8, "ttft_ms": {"p95": 412.5}}
    assert only_a[0].expires_at == int(now) + MEASUREMENT_TTL_S


def test_a_ranking_and_watches_round_trip(store: SizingStore) -> None:
    # given
    store.put_ranking("r1", {"architectures": [{"id": "a", "cost": {"usd_per_month": 1234.56}}]})
    store.put_watch(Watch(watch_id="w1", name="chat", spec=SPEC, model="meta-llama/Llama-3.1-8B-Instruct"))
    store.put_watch(Watch(watch_id="w2", name="rag", spec=SPEC))
    # then
    assert store.get_ranking("r1") == {"architectures": [{"id": "a", "cost": {"usd_per_month": 1234.56}}]}
    assert store.get_watch("w1").name == "chat"
    assert {w.watch_id for w in store.list_watches()[0]} == {"w1", "w2"}
    store.delete_watch("w1")
    with pytest.raises(NotFound):
        store.get_watch("w1")
    with pytest.raises(NotFound):
        store.delete_watch("w1")
