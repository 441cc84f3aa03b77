"""The janitor closes runs the deployed stack left open: a run still RUNNING (or CANCELLING) whose Step Functions
execution has ended gets the execution's outcome, and what it left behind is swept in the same pass. On moto,
with executions that really ran (moto executes the ASL): one whose last write to the table fails, as RunFailed's
does when DynamoDB refuses it (docs/reliability.md), one that times out, one stopped outside the API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sizing.deploy.architecture import DeployTarget
from sizing.deploy.janitor import ENDED, reconcile_runs
from sizing.deploy.sagemaker import SageMakerProvisioner
from sizing.lambdas import load_function
from sizing.store import SizingStore
from sizing.store.items import Run
from sizing.store.schema import create_table

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TABLE = "llm-sizing-reconcile-test"
ROLE = "arn:aws:iam::123456789012:role/sizing-run"
SM = DeployTarget.from_id("sagemaker:g4dn.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
#: Seconds an execution is given to reach its end on moto (they end within ~1 s; the bound only stops a hang).
ENDS_WITHIN_S = 30

#: Small state machines standing in for the run's: each ends the way a real execution can.
MACHINES: dict[str, dict[str, Any]] = {
    # ends SUCCEEDED with its input as output (a ranking, a refusal, or nothing recorded)
    "records": {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}},
    # ends FAILED: its DynamoDB write is refused (here: the table it names does not exist)
    "write-fails": {
        "StartAt": "RunFailed",
        "States": {
            "RunFailed": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:updateItem",
                "Parameters": {
                    "TableName": "no-such-table",
                    "Key": {"PK": {"S": "RUN#r"}, "SK": {"S": "RUN"}},
                    "UpdateExpression": "SET #s = :s",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":s": {"S": "FAILED"}},
                },
                "End": True,
            }
        },
    },
    # ends TIMED_OUT: it outlives its own TimeoutSeconds
    "too-slow": {
        "StartAt": "Measure",
        "TimeoutSeconds": 1,
        "States": {"Measure": {"Type": "Wait", "Seconds": 5, "End": True}},
    },
    # runs until stopped
    "measures": {"StartAt": "Measure", "States": {"Measure": {"Type": "Wait", "Seconds": 600, "End": True}}},
}


@pytest.fixture
def aws() -> Iterator[SimpleNamespace]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        create_table(ddb, TABLE)
        arns = {
            name: sfn.create_state_machine(name=name, definition=json.dumps(d), roleArn=ROLE)[
                "stateMachineArn"
            ]
            for name, d in MACHINES.items()
        }
        yield SimpleNamespace(ddb=ddb, sfn=sfn, store=SizingStore(TABLE, ddb), machines=arns)


def open_run(
    aws: SimpleNamespace, run_id: str, machine: str | None, given: dict[str, Any] | None = None, **how: str
) -> str | None:
    """A run RUNNING on an execution of `machine` (or QUEUED without one); `stop=True` stops the execution
    outside the API, `status="CANCELLING"` cancels the run first as POST /runs/{id}/cancel does."""
    aws.store.create_run(Run(run_id=run_id, model="meta-llama/Llama-3.1-8B", spec={}, top_k=1))
    if machine is None:
        aws.store.transition(run_id, "QUEUED")
        return None
    arn = aws.sfn.start_execution(
        stateMachineArn=aws.machines[machine], name=run_id, input=json.dumps(given or {})
    )["executionArn"]
    aws.store.transition(run_id, "RUNNING", execution_arn=arn)
    if how.get("status") == "CANCELLING":
        aws.store.transition(run_id, "CANCELLING")
    if how.get("stop"):
        aws.sfn.stop_execution(executionArn=arn, cause="stopped in the console")
    return str(arn)


def wait_until_ended(sfn: Any, arns: list[str]) -> None:
    end = time.monotonic() + ENDS_WITHIN_S
    while time.monotonic() < end:
        if all(sfn.describe_execution(executionArn=a)["status"] in ENDED for a in arns):
            return
        time.sleep(0.1)


def state(store: SizingStore, run_id: str) -> tuple[str, str | None]:
    run = store.get_run(run_id)
    return run.status, run.error


def test_open_runs_whose_execution_ended_are_closed_with_its_outcome(aws: SimpleNamespace) -> None:
    # given runs left open in every way an execution can end, one still measuring and one queued
    ended = [
        open_run(aws, "r-succeeded", "records", {"ranking": {"value": {"status": "SUCCEEDED"}}}),
        open_run(aws, "r-refused", "records", {"estimate": {"value": {"refused": True}}}),
        open_run(aws, "r-no-result", "records", {}),
        open_run(aws, "r-failed", "write-fails"),
        open_run(aws, "r-timed-out", "too-slow"),
        open_run(aws, "r-stopped", "measures", stop="yes"),
        open_run(aws, "r-cancelling", "measures", status="CANCELLING", stop="yes"),
    ]
    open_run(aws, "r-measuring", "measures")
    open_run(aws, "r-queued", None)
    wait_until_ended(aws.sfn, [a for a in ended if a])
    # when the janitor reconciles (twice: the second finds nothing left to do)
    closed, errors = reconcile_runs(aws.store, aws.sfn)
    again, _ = reconcile_runs(aws.store, aws.sfn)
    # then each ended run has its execution's outcome, in words
    final = {r: state(aws.store, r) for r in ("r-succeeded", "r-refused", "r-no-result", "r-stopped")}
    assert final == {
        "r-succeeded": ("SUCCEEDED", None),
        "r-refused": ("REFUSED", "refused by the budget guard"),
        "r-no-result": ("FAILED", "the execution succeeded without recording the run's result"),
        "r-stopped": ("CANCELLED", "execution stopped outside the API"),
    }
    failed_status, failed_error = state(aws.store, "r-failed")
    assert failed_status == "FAILED"
    assert failed_error is not None
    assert failed_error.startswith("execution failed: DynamoDB.ResourceNotFoundException: ")
    timed_status, timed_error = state(aws.store, "r-timed-out")
    assert timed_status == "FAILED"
    assert timed_error is not None and timed_error.startswith("execution timed out")
    assert state(aws.store, "r-cancelling")[0] == "CANCELLED"
    # and the run still measuring and the queued one are left as they are
    assert state(aws.store, "r-measuring") == ("RUNNING", None)
    assert state(aws.store, "r-queued")[0] == "QUEUED"
    # and the report names each closed run with what its execution did
    assert {(c.run_id, c.execution_status, c.was, c.now) for c in closed} == {
        ("r-succeeded", "SUCCEEDED", "RUNNING", "SUCCEEDED"),
        ("r-refused", "SUCCEEDED", "RUNNING", "REFUSED"),
        ("r-no-result", "SUCCEEDED", "RUNNING", "FAILED"),
        ("r-failed", "FAILED", "RUNNING", "FAILED"),
        ("r-timed-out", "TIMED_OUT", "RUNNING", "FAILED"),
        ("r-stopped", "ABORTED", "RUNNING", "CANCELLED"),
        ("r-cancelling", "ABORTED", "CANCELLING", "CANCELLED"),
    }
    assert errors == [] and again == []


def test_a_dry_run_reports_the_runs_it_would_close_and_changes_none(aws: SimpleNamespace) -> None:
    # given a run whose execution failed writing its outcome
    arn = open_run(aws, "r-failed", "write-fails")
    assert arn is not None
    wait_until_ended(aws.sfn, [arn])
    # when the janitor reconciles as a dry run
    closed, _ = reconcile_runs(aws.store, aws.sfn, dry_run=True)
    # then it says what it would do, and the run is still RUNNING
    assert [(c.run_id, c.now) for c in closed] == [("r-failed", "FAILED")]
    assert state(aws.store, "r-failed")[0] == "RUNNING"


def test_a_run_the_janitor_closes_is_announced_as_its_execution_would_have(aws: SimpleNamespace) -> None:
    # given a bus whose run events land in a queue, and a cancelled run and a succeeded one left open
    events = boto3.client("events", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    events.create_event_bus(Name="sizing")
    queue = sqs.create_queue(QueueName="run-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="runs", EventBusName="sizing", EventPattern=json.dumps({"source": ["llm-sizing"]}))
    events.put_targets(Rule="runs", EventBusName="sizing", Targets=[{"Id": "q", "Arn": queue_arn}])
    ended = [
        open_run(aws, "r-cancelling", "measures", status="CANCELLING", stop="yes"),
        open_run(aws, "r-succeeded", "records", {"ranking": {"value": {"status": "SUCCEEDED"}}}),
    ]
    wait_until_ended(aws.sfn, [a for a in ended if a])
    # when the janitor closes them
    closed, errors = reconcile_runs(aws.store, aws.sfn, events=events, bus="sizing")
    # then each is announced on the bus as the state machine would have: the run, how it ended, who closed it
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    seen = {(e["detail-type"], e["detail"]["run_id"], e["detail"]["status"], e["detail"]["closed_by"])
            for e in (json.loads(m["Body"]) for m in got)}  # fmt: skip
    assert errors == [] and len(closed) == 2
    assert seen == {
        ("SizingRunFailed", "r-cancelling", "CANCELLED", "janitor"),
        ("SizingRunCompleted", "r-succeeded", "SUCCEEDED", "janitor"),
    }


def load_handler() -> ModuleType:
    """The function as a fresh container sees it: settings and clients built from this test's environment."""
    app = load_function("functions/janitor/")
    app.services.set(None)
    return app


def test_the_scheduled_janitor_closes_a_run_left_running_and_sweeps_what_it_left_in_the_same_pass(
    aws: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a run whose execution failed while its SageMaker candidate was still up, and the run left RUNNING
    arn = open_run(aws, "run-orphaned", "write-fails")
    assert arn is not None
    sm = boto3.client("sagemaker", region_name="us-east-1")
    SageMakerProvisioner("arn:aws:iam::123456789012:role/sm", client=sm).apply(SM, "run-orphaned", SM.id)
    wait_until_ended(aws.sfn, [arn])
    # and the function's environment pointing at that table, with no cluster
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    event = json.loads((ROOT / "events" / "janitor_scheduled.json").read_text())
    context = SimpleNamespace(
        function_name="llm-sizing-janitor-dev",
        function_version="$LATEST",
        memory_limit_in_mb=512,
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:llm-sizing-janitor-dev",
        aws_request_id="0b6b7d4e-0000-4000-8000-000000000001",
        get_remaining_time_in_millis=lambda: 300_000,
    )
    # when the schedule fires
    result = load_handler().lambda_handler(event, context)
    # then the run is FAILED with the execution's failure, and its endpoint, config and model are gone
    status, error = state(aws.store, "run-orphaned")
    assert status == "FAILED" and error is not None and "DynamoDB.ResourceNotFoundException" in error
    assert [(r["run_id"], r["now"]) for r in result["reconciled"]] == [("run-orphaned", "FAILED")]
    assert {(d["kind"], d["reason"]) for d in result["deleted"]} == {
        ("endpoint", "run FAILED"),
        ("endpoint-config", "run FAILED"),
        ("model", "run FAILED"),
    }
    assert sm.list_endpoints()["Endpoints"] == [] and result["errors"] == []
    # and a RunsReconciled metric of 1 was emitted
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert any(m.get("RunsReconciled") in ([1.0], 1.0) for m in emf)
