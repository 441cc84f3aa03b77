"""`RunsService` on the in-memory store and Step Functions fakes: a run is stored, its execution started with
the run as input and the run marked RUNNING; a refused start leaves a FAILED run that says why; cancelling
follows the run's state."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.stepfunctions import FakeStepFunctions
from fakes.store import InMemoryStore

from sizing.base.errors import Conflict, InvalidInput, Unavailable
from sizing.service.runs import RunsService

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:llm-sizing-run-test"
SPEC: dict[str, Any] = {
    "name": "service-test",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}},
}


@pytest.fixture
def parts() -> tuple[RunsService, InMemoryStore, FakeStepFunctions]:
    store, sfn = InMemoryStore(), FakeStepFunctions()
    return RunsService(store, MACHINE, sfn_client=sfn), store, sfn  # type: ignore[arg-type]


def test_a_created_run_is_running_with_its_execution_started_on_the_run(parts: Any) -> None:
    service, store, sfn = parts
    # when a run is created
    run = service.create_run(SPEC, top_k=2)
    # then it is stored RUNNING, with the execution that was started for it, whose input is the run
    assert store.get_run(run.run_id).status == "RUNNING"
    (execution,) = sfn.running()
    assert run.execution_arn == execution.arn and execution.name == run.run_id
    assert execution.input["run_id"] == run.run_id and execution.input["top_k"] == 2
    assert execution.input["model"] == "meta-llama/Llama-3.1-8B"  # the catalog id of the alias


def test_a_refused_start_leaves_a_failed_run_that_says_why(parts: Any) -> None:
    service, store, sfn = parts
    # given Step Functions throttling the start
    sfn.refuse = "ThrottlingException"
    # when a run is created; then the caller is told to try later, and the stored run says what happened
    with pytest.raises(Unavailable) as err:
        service.create_run(SPEC)
    run = store.get_run(err.value.details["run_id"])
    assert run.status == "FAILED" and "ThrottlingException" in (run.error or "")
    assert sfn.running() == []


def test_a_bad_spec_names_the_field_and_stores_nothing(parts: Any) -> None:
    service, store, _ = parts
    # when the spec's rate is negative; then the problem names the field, and no run is stored
    with pytest.raises(InvalidInput) as err:
        service.create_run({**SPEC, "rate": {"peak_rps": -1}})
    assert any(p.field.startswith("spec.rate") for p in err.value.problems)
    assert store.items() == []


def test_cancelling_stops_the_execution_and_a_finished_run_cannot_be_cancelled(parts: Any) -> None:
    service, store, sfn = parts
    run = service.create_run(SPEC)
    # when it is cancelled (twice)
    first = service.cancel_run(run.run_id)
    again = service.cancel_run(run.run_id)
    # then it is CANCELLING and its execution stopped; cancelling again changes nothing
    assert first.status == again.status == "CANCELLING"
    assert sfn.executions[run.execution_arn].status == "ABORTED"
    # and once the run has ended, cancelling it is a conflict that says so
    store.transition(run.run_id, "CANCELLED")
    with pytest.raises(Conflict, match="already finished"):
        service.cancel_run(run.run_id)
