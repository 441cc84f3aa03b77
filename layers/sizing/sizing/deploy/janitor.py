"""The janitor: remove whatever a sizing run provisioned once the run is over or has outlived its deadline.

It finds resources by the run label/tag of `sizing.deploy.labels` — Kubernetes objects (node pools, node
classes, node claims, deployments, services, ...) and SageMaker endpoints, endpoint configs and models — asks
`RunStatusLookup` whether each run has finished, and deletes those of finished runs, those past their
`expires-at` deadline, and those of runs nobody knows that are older than the longest a run may last.

Before that it reconciles the runs table with Step Functions (`reconcile_runs`): a run still RUNNING (or
CANCELLING) whose execution has ended -- because the step that records the outcome could not write, or the
execution was stopped outside the API -- is closed with the execution's outcome, so the sweep that follows
removes what it left behind."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field

from sizing.base import table
from sizing.base.aws import paged, tag_map
from sizing.base.errors import Conflict, NotFound
from sizing.base.strict import Strict
from sizing.deploy import labels as L
from sizing.deploy.kube import KubeClient, ProvisioningError
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S, TEARDOWN_ORDER
from sizing.orchestrate.events import EVENT_SOURCE, RUN_COMPLETED, RUN_FAILED

log = logging.getLogger(__name__)

#: What one backend can fail with; the sweep records it and goes on with the rest.
_FAILURES = (ProvisioningError, BotoCoreError, ClientError)

#: Run statuses after which nothing of the run should exist (the store's terminal statuses, plus CANCELLING:
#: a cancelled run waits for exactly this removal).
FINISHED = frozenset({"REFUSED", "SUCCEEDED", "FAILED", "CANCELLED", "CANCELLING"})
#: Kubernetes kinds swept, in deletion order; NodeClaims last (normally their NodePool's deletion removes them).
KUBE_KINDS = [*TEARDOWN_ORDER, "NodeClaim"]
#: SageMaker resources swept, in deletion order: (kind, list call, list key, name key, arn key, delete call, arg).
SAGEMAKER_KINDS = [
    (
        "endpoint",
        "list_endpoints",
        "Endpoints",
        "EndpointName",
        "EndpointArn",
        "delete_endpoint",
        "EndpointName",
    ),
    (
        "endpoint-config",
        "list_endpoint_configs",
        "EndpointConfigs",
        "EndpointConfigName",
        "EndpointConfigArn",
        "delete_endpoint_config",
        "EndpointConfigName",
    ),
    ("model", "list_models", "Models", "ModelName", "ModelArn", "delete_model", "ModelName"),
]


class RunStatusLookup(Protocol):
    """Where the janitor learns a run's status; None when the run is unknown."""

    def status(self, run_id: str) -> str | None: ...


class InMemoryRunStatus:
    """A `RunStatusLookup` over a dict (tests, local runs)."""

    def __init__(self, statuses: dict[str, str] | None = None) -> None:
        self.statuses = dict(statuses or {})

    def status(self, run_id: str) -> str | None:
        return self.statuses.get(run_id)


class DynamoRunStatus:
    """Reads a run's `status` from the runs table (item PK=`RUN#{run_id}`, SK=`RUN`)."""

    def __init__(self, table_name: str, client: Any | None = None, region: str | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", region_name=region)
        self.table, self.ddb = table_name, client

    def status(self, run_id: str) -> str | None:
        item = self.ddb.get_item(
            TableName=self.table,
            Key={k: {"S": v} for k, v in table.run_key(run_id).items()},
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
            ConsistentRead=True,
        ).get("Item")
        if not item or "status" not in item:
            return None
        return str(item["status"].get("S"))


#: Run statuses whose execution the janitor checks: the run is not over, yet its execution may be.
OPEN = ("RUNNING", "CANCELLING")
#: Step Functions execution statuses after which no step of it runs any more (DescribeExecution `status`;
#: RUNNING and PENDING_REDRIVE are not over) [docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html].
ENDED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
#: Runs read per page of the runs index while looking for open runs (the store's largest page).
RECONCILE_PAGE = 100
#: Characters of an execution's failure kept in the run's error (the error field is shown, not a log).
FAILURE_CHARS = 1000
#: Deployments whose resources a run provisions and the janitor sweeps: a subset of
#: `sizing.base.vocabulary.Deployment` (Bedrock is serverless; a run creates nothing there to remove).
SweptDeployment = Literal["eks", "sagemaker"]


class Reconciled(Strict):
    """One run the janitor closed (or would close, in a dry run) because its execution had ended."""

    run_id: str
    execution_status: str
    was: str
    now: str
    error: str | None = None


class Swept(Strict):
    """One resource the janitor removed (or would remove, in a dry run)."""

    where: SweptDeployment
    kind: str
    name: str
    namespace: str | None = None
    run_id: str
    reason: str


class SweepReport(Strict):
    dry_run: bool = False
    deleted: list[Swept] = Field(default_factory=list)
    #: Runs whose resources were left in place because they are still running within their deadline.
    kept_runs: list[str] = Field(default_factory=list)
    #: Runs closed with their ended execution's outcome (`reconcile_runs`), before the sweep.
    reconciled: list[Reconciled] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


@dataclass
class _Found:
    where: SweptDeployment
    kind: str
    name: str
    namespace: str | None
    run_id: str
    expires_at: float | None
    created_at: float | None
    delete_args: dict[str, Any] = field(default_factory=dict)


def decide(
    status: str | None, deadline: float | None, created_at: float | None, now: float, orphan_after_s: float
) -> str | None:
    """Why a run's resources must go, or None to keep them."""
    if status is not None and status.upper() in FINISHED:
        return f"run {status.upper()}"
    if deadline is not None and now >= deadline:
        return "past its deadline"
    if status is None and created_at is not None and now - created_at >= orphan_after_s:
        return f"unknown run, older than {orphan_after_s / 3600:g} h"
    return None


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _number(value: str | None) -> float | None:
    return float(value) if value and value.isdigit() else None


def _kube_found(kube: KubeClient) -> Iterable[_Found]:
    for kind in KUBE_KINDS:
        for item in kube.list(kind, L.RUN_ID):
            meta = item.get("metadata", {})
            labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
            yield _Found(
                "eks",
                kind,
                meta["name"],
                meta.get("namespace"),
                notes.get(L.RUN_ID_FULL) or labels[L.RUN_ID],
                _number(labels.get(L.EXPIRES_AT)),
                _epoch(meta.get("creationTimestamp")),
            )


def _sagemaker_found(sm: Any) -> Iterable[_Found]:
    for kind, lister, key, name_key, arn_key, deleter, arg in SAGEMAKER_KINDS:
        for item in paged(sm, lister, key):
            tags = tag_map(sm.list_tags(ResourceArn=item[arn_key]).get("Tags", []))
            if L.RUN_ID not in tags:
                continue
            yield _Found(
                "sagemaker",
                kind,
                item[name_key],
                None,
                tags[L.RUN_ID],
                _number(tags.get(L.EXPIRES_AT)),
                _epoch(item.get("CreationTime")),
                {"call": deleter, arg: item[name_key]},
            )


def sweep(
    lookup: RunStatusLookup,
    *,
    kube: KubeClient | None = None,
    sagemaker: Any | None = None,
    now: float | None = None,
    orphan_after_s: float = DEFAULT_MAX_DURATION_S,
    dry_run: bool = False,
) -> SweepReport:
    """Find run-labelled resources in the cluster and SageMaker, delete those whose run is over or expired."""
    now = time.time() if now is None else now
    report = SweepReport(dry_run=dry_run)
    found: list[_Found] = []
    sources: list[tuple[str, Any, Any]] = [
        ("eks", _kube_found, kube),
        ("sagemaker", _sagemaker_found, sagemaker),
    ]
    for source, finder, client in sources:
        if client is None:
            continue
        try:
            found += list(finder(client))
        except _FAILURES as exc:  # one unreachable backend must not stop the other
            report.errors.append(f"listing {source}: {exc}")

    by_run: dict[str, list[_Found]] = {}
    for f in found:
        by_run.setdefault(f.run_id, []).append(f)
    for run_id, items in sorted(by_run.items()):
        deadlines = [f.expires_at for f in items if f.expires_at is not None]
        created = [f.created_at for f in items if f.created_at is not None]
        try:
            status = lookup.status(run_id)
        except _FAILURES as exc:  # cannot tell: keep unless expired
            report.errors.append(f"status of {run_id}: {exc}")
            status = "UNKNOWN"
        reason = decide(status, min(deadlines, default=None), min(created, default=None), now, orphan_after_s)
        if reason is None:
            report.kept_runs.append(run_id)
            continue
        for f in items:
            swept = Swept(
                where=f.where, kind=f.kind, name=f.name, namespace=f.namespace, run_id=run_id, reason=reason
            )
            if dry_run:
                report.deleted.append(swept)
                continue
            try:
                if f.where == "eks":
                    assert kube is not None
                    kube.delete(f.kind, f.name, f.namespace)
                else:
                    args = dict(f.delete_args)
                    getattr(sagemaker, args.pop("call"))(**args)
                report.deleted.append(swept)
                log.info("deleted %s %s/%s of run %s: %s", f.where, f.kind, f.name, run_id, reason)
            except _FAILURES as exc:  # keep going: the next sweep retries what failed
                report.errors.append(f"deleting {f.where} {f.kind}/{f.name}: {exc}")
    return report


# --- reconciliation: runs still open whose execution has ended ------------------------------------------------
def first_failure(sfn: Any, execution_arn: str) -> str:
    """The first task failure of an execution as `Error: cause` (the root cause; later failures echo it)."""
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    while True:
        out = sfn.get_execution_history(**kwargs)
        for ev in out.get("events", []):
            for key, details in ev.items():
                if key.endswith("FailedEventDetails") and key != "executionFailedEventDetails":
                    return f"{details.get('error', '')}: {details.get('cause', '')}".strip(": ")
        if not out.get("nextToken"):
            return ""
        kwargs["nextToken"] = out["nextToken"]


def _json(text: str | None) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def outcome(run_status: str, execution: dict[str, Any], sfn: Any) -> tuple[str, str | None]:
    """(the run's final status, its error) for an open run whose execution has ended.

    A cancelled run (CANCELLING) ends CANCELLED whatever its execution did. For a RUNNING one: an execution
    that SUCCEEDED ends as its output says (the budget guard's refusal is REFUSED, a ranking that succeeded is
    SUCCEEDED, anything else FAILED); FAILED and TIMED_OUT end FAILED with the first failure; ABORTED (stopped
    outside the API) ends CANCELLED."""
    status = execution["status"]
    if run_status == "CANCELLING":
        return "CANCELLED", None
    if status == "SUCCEEDED":
        out = _json(execution.get("output"))
        if ((out.get("estimate") or {}).get("value") or {}).get("refused"):
            return "REFUSED", "refused by the budget guard"
        if ((out.get("ranking") or {}).get("value") or {}).get("status") == "SUCCEEDED":
            return "SUCCEEDED", None
        return "FAILED", "the execution succeeded without recording the run's result"
    if status == "ABORTED":
        return "CANCELLED", "execution stopped outside the API"
    cause = first_failure(sfn, execution["executionArn"]) or ": ".join(
        x for x in (execution.get("error"), execution.get("cause")) if x
    )
    what = "timed out" if status == "TIMED_OUT" else "failed"
    return "FAILED", (f"execution {what}" + (f": {cause}" if cause else ""))[:FAILURE_CHARS]


def _open_runs(store: Any) -> Iterable[Any]:
    for status in OPEN:
        token = None
        while True:
            page, token = store.list_runs(limit=RECONCILE_PAGE, token=token, status=status)
            yield from page
            if not token:
                break


def completion_event(run: Any, final: str, error: str | None, bus: str) -> dict[str, Any]:
    """The EventBridge entry for a run the janitor closed, shaped as the state machine's own: SizingRunCompleted
    for a run that succeeded, SizingRunFailed otherwise (cancelled included, with its status), so what listens
    for a run's end -- the Slack thread, the calibration refit -- hears of it however it ended."""
    import json

    slack = run.slack.model_dump(mode="json") if getattr(run, "slack", None) is not None else None
    detail = {"run_id": run.run_id, "model": run.model, "source": run.source, "slack": slack, "status": final,
              "error": error, "closed_by": "janitor"}  # fmt: skip
    return {
        "EventBusName": bus,
        "Source": EVENT_SOURCE,
        "DetailType": RUN_COMPLETED if final == "SUCCEEDED" else RUN_FAILED,
        "Detail": json.dumps(detail),
    }


def reconcile_runs(
    store: Any, sfn: Any, *, dry_run: bool = False, events: Any = None, bus: str | None = None
) -> tuple[list[Reconciled], list[str]]:
    """Close every run still RUNNING or CANCELLING whose Step Functions execution has ended, with the
    execution's outcome (`outcome`). `store` is a `sizing.store.SizingStore`, `sfn` a Step Functions client;
    with `events` (an EventBridge client) and `bus`, each run closed is announced as the state machine would have
    (`completion_event`). Returns (runs closed, errors); a run closed meanwhile by its own execution is left as
    it is."""
    closed: list[Reconciled] = []
    errors: list[str] = []
    try:
        runs = list(_open_runs(store))
    except _FAILURES as exc:
        return closed, [f"listing open runs: {exc}"]
    for run in runs:
        if not run.execution_arn:
            continue  # not started yet: nothing to compare with
        try:
            execution = sfn.describe_execution(executionArn=run.execution_arn)
            if execution.get("status") not in ENDED:
                continue
            final, error = outcome(run.status, execution, sfn)
            done = Reconciled(
                run_id=run.run_id,
                execution_status=execution["status"],
                was=run.status,
                now=final,
                error=error,
            )
            if not dry_run:
                fields = {"error": error} if error else {}
                store.transition(run.run_id, final, expected_from=run.status, **fields)
                log.info("run %s %s -> %s: execution %s", run.run_id, run.status, final, execution["status"])
                if events is not None and bus:
                    try:
                        events.put_events(Entries=[completion_event(run, final, error, bus)])
                    except _FAILURES as exc:  # closed all the same; the next sweep does not announce it again
                        errors.append(f"announcing run {run.run_id}: {exc}")
            closed.append(done)
        except (Conflict, NotFound):
            continue  # it moved on (or went) since it was listed: its own writer won
        except _FAILURES as exc:  # the next sweep tries again
            errors.append(f"reconciling run {run.run_id}: {exc}")
    return closed, errors
