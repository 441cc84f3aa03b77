"""`FakeStepFunctions`: the two calls `RunsService` makes (`start_execution`, `stop_execution`), with AWS's
answers and errors, without moto. `executions` holds what was started: the run's input, as the state machine
would receive it, and its status."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

REGION = "us-east-1"
ACCOUNT = "123456789012"


def _error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


@dataclass
class Execution:
    arn: str
    state_machine_arn: str
    name: str
    input: dict[str, Any]
    status: str = "RUNNING"
    cause: str | None = None


@dataclass
class FakeStepFunctions:
    """Executions by ARN. `refuse` makes the next `start_execution` fail with that AWS error code (e.g.
    "ThrottlingException"), as a throttled or missing state machine would."""

    executions: dict[str, Execution] = field(default_factory=dict)
    refuse: str | None = None

    def start_execution(self, *, stateMachineArn: str, name: str, input: str = "{}") -> dict[str, Any]:
        if self.refuse:
            code, self.refuse = self.refuse, None
            raise _error(code, "Rate exceeded", "StartExecution")
        machine = stateMachineArn.rsplit(":", 1)[-1]
        arn = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{machine}:{name}"
        if arn in self.executions:
            raise _error("ExecutionAlreadyExists", f"Execution Already Exists: '{arn}'", "StartExecution")
        self.executions[arn] = Execution(arn, stateMachineArn, name, json.loads(input))
        return {"executionArn": arn, "startDate": "2026-12-01T00:00:00Z"}

    def stop_execution(self, *, executionArn: str, cause: str = "", error: str = "") -> dict[str, Any]:
        execution = self.executions.get(executionArn)
        if execution is None:
            raise _error(
                "ExecutionDoesNotExist", f"Execution Does Not Exist: '{executionArn}'", "StopExecution"
            )
        if execution.status == "RUNNING":
            execution.status, execution.cause = "ABORTED", cause
        return {"stopDate": "2026-12-01T00:00:01Z"}

    def running(self) -> list[Execution]:
        return [e for e in self.executions.values() if e.status == "RUNNING"]
