"""Runs: create a sizing run, start its state machine execution, cancel it. Used by the HTTP API, the Slack bot
and event-driven re-sizing alike, so the rules live here once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sizing.base.errors import Conflict, Unavailable
from sizing.catalog import load_catalog
from sizing.store import Run, RunSource, SizingStore, SlackThread
from sizing.workload.parse import parse_spec

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

    from sizing.catalog import Catalog

#: Candidates measured when the caller does not say (`top_k`; the API, the Slack bot, a watch and the state
#: machine's fallback all read this one): the top three estimates usually span the cheapest deployment kinds (EKS
#: GPU, Inferentia, SageMaker) while keeping a run's GPU hours (its cost) small -- a stated product choice.
DEFAULT_TOP_K = 3
#: Each measured candidate is a real deployment with GPU nodes: ten bounds what one run can spend.
MAX_TOP_K = 10
#: Statuses of a run whose execution has not started: stored (PENDING), or waiting for a slot (QUEUED, under
#: `sizing serve`, which bounds the runs it executes at once).
NOT_STARTED = ("PENDING", "QUEUED")


class RunsService:
    """Create, start and cancel runs. `sfn_client` is a boto3 Step Functions client (made lazily if absent);
    `catalog` is the catalog runs are validated against, or a callable giving the current one (a long-lived
    service asks it each time, so models released since are known); the shipped catalog when absent."""

    def __init__(
        self,
        store: SizingStore,
        state_machine_arn: str | None,
        sfn_client: SFNClient | None = None,
        catalog: Catalog | Callable[[], Catalog] | None = None,
    ) -> None:
        self.store = store
        self.state_machine_arn = state_machine_arn
        self._sfn = sfn_client
        self._catalog = catalog

    @property
    def sfn(self) -> SFNClient:
        if self._sfn is None:
            import boto3

            self._sfn = boto3.client("stepfunctions")
        return self._sfn

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            return load_catalog()
        return self._catalog() if callable(self._catalog) else self._catalog

    def create_run(
        self,
        raw_spec: Any,
        *,
        top_k: int = DEFAULT_TOP_K,
        architecture_ids: list[str] | None = None,
        budget_usd: float | None = None,
        source: RunSource = "api",
        slack: SlackThread | None = None,
        field_prefix: str = "spec",
    ) -> Run:
        """Validate the spec (InvalidInput / NotFound naming `field_prefix.<field>`), store the run PENDING,
        start its execution and mark it RUNNING. Unavailable when the state machine cannot be started (the
        stored run is then FAILED with the reason)."""
        catalog = self.catalog
        spec = parse_spec(raw_spec, prefix=field_prefix, catalog=catalog)
        model = catalog.model(spec.model, field_name=f"{field_prefix}.model" if field_prefix else "model")
        if not self.state_machine_arn:
            raise Unavailable("measured runs are not available here: no state machine is configured")
        run = Run(
            run_id=uuid.uuid4().hex,
            model=model.id,
            spec=spec.model_dump(mode="json", exclude_none=True),
            top_k=len(architecture_ids) if architecture_ids else top_k,
            architecture_ids=architecture_ids or None,
            budget_usd=budget_usd,
            source=source,
            slack=slack,
        )
        self.store.create_run(run)
        return self._start(run)

    def _start(self, run: Run) -> Run:
        from botocore.exceptions import BotoCoreError, ClientError

        assert self.state_machine_arn is not None
        payload = {
            "run_id": run.run_id,
            "model": run.model,
            "spec": run.spec,
            "top_k": run.top_k,
            "architecture_ids": run.architecture_ids,
            "budget_usd": run.budget_usd,
            "source": run.source,
            "slack": run.slack.model_dump(mode="json") if run.slack else None,
        }
        try:
            out = self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=run.run_id, input=json.dumps(payload)
            )
        except (ClientError, BotoCoreError) as exc:
            reason = _aws_reason(exc)
            self.store.transition(
                run.run_id, "FAILED", expected_from=NOT_STARTED, error=f"not started: {reason}"
            )
            raise Unavailable(
                "the sizing run could not be started; try again later", details={"run_id": run.run_id}
            ) from None
        return self.store.transition(
            run.run_id, "RUNNING", expected_from=NOT_STARTED, execution_arn=out["executionArn"]
        )

    def get_run(self, run_id: str) -> Run:
        return self.store.get_run(run_id)

    def delete_run(self, run_id: str) -> Run:
        """Delete a finished run with its stored results (architectures, measurements, ranking); returns it as
        it was. NotFound when there is none; Conflict when it has not finished (cancel it first)."""
        return self.store.delete_run(run_id)

    def cancel_run(self, run_id: str) -> Run:
        """Stop a run's execution. A run with an execution becomes CANCELLING (teardown of what it provisioned
        follows: the janitor removes anything labelled with a cancelled run); one that never started is
        CANCELLED at once. Cancelling twice is harmless; cancelling a finished run is a Conflict."""
        run = self.store.get_run(run_id)
        if run.status == "CANCELLING":
            return run
        if run.finished:
            raise Conflict(
                f"run {run_id} already finished ({run.status}); there is nothing to cancel",
                details={"status": run.status},
                code="conflict",
            )
        if run.execution_arn is None:
            return self.store.transition(run_id, "CANCELLED", expected_from=NOT_STARTED, error="cancelled")
        from botocore.exceptions import ClientError

        run = self.store.transition(run_id, "CANCELLING", expected_from=("PENDING", "RUNNING"))
        try:
            self.sfn.stop_execution(executionArn=run.execution_arn or "", cause="cancelled by the user")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
                raise Unavailable(
                    "the run is marked cancelling but its execution could not be stopped; try again",
                    details={"run_id": run_id},
                ) from None
        return run


def _aws_reason(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'error')}: {err.get('Message', '')}".strip()
    return type(exc).__name__
