"""Janitor function (scheduled): closes runs whose execution has ended, then removes whatever a finished or
expired sizing run left behind.

Parses its environment once per container, builds the run store, the run-status lookup and the Step Functions,
Kubernetes and SageMaker clients lazily, and calls `sizing.deploy.janitor.reconcile_runs` (a run still RUNNING
or CANCELLING whose execution has ended gets the execution's outcome), then `sizing.deploy.janitor.sweep`. Logs
every closed run and every deletion and emits `RunsReconciled`, `ResourcesDeleted`, `RunsKept` and
`SweepErrors` metrics."""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from sizing.deploy.janitor import DynamoRunStatus, reconcile_runs, sweep
from sizing.deploy.manifests import DEFAULT_MAX_DURATION_S
from sizing.service.observability import logger, metrics, tracer


class JanitorSettings(BaseModel):
    """The function's environment (template.yaml)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    table_name: str = Field(alias="TABLE_NAME", min_length=1)
    region: str = Field(default="us-east-1", alias="AWS_REGION")
    #: Empty: no cluster to sweep (SageMaker only).
    eks_cluster_name: str = Field(default="", alias="EKS_CLUSTER_NAME")
    eks_endpoint: str | None = Field(default=None, alias="EKS_ENDPOINT")
    eks_ca_data: str | None = Field(default=None, alias="EKS_CA_DATA")
    sweep_sagemaker: bool = Field(default=True, alias="SWEEP_SAGEMAKER")
    orphan_after_s: int = Field(default=DEFAULT_MAX_DURATION_S, alias="ORPHAN_AFTER_S", ge=600)
    dry_run: bool = Field(default=False, alias="DRY_RUN")
    #: Close runs still RUNNING/CANCELLING whose Step Functions execution has ended (false: only sweep).
    reconcile: bool = Field(default=True, alias="RECONCILE_RUNS")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> JanitorSettings:
        env = os.environ if environ is None else environ
        names = [f.alias for f in cls.model_fields.values() if f.alias]
        return cls.model_validate({n: env[n] for n in names if env.get(n) not in (None, "")})


@functools.cache
def settings() -> JanitorSettings:
    return JanitorSettings.from_env()


@functools.cache
def clients() -> dict[str, Any]:
    """The lookup and the clients, built once per container."""
    import boto3

    from sizing.deploy.kube import ClusterConfig, eks_client_for
    from sizing.store import SizingStore

    s = settings()
    session = boto3.session.Session(region_name=s.region)
    ddb = session.client("dynamodb")
    out: dict[str, Any] = {"lookup": DynamoRunStatus(s.table_name, ddb)}
    out["store"] = SizingStore(s.table_name, ddb) if s.reconcile else None
    out["sfn"] = session.client("stepfunctions") if s.reconcile else None
    out["kube"] = (
        eks_client_for(
            ClusterConfig(
                name=s.eks_cluster_name, region=s.region, endpoint=s.eks_endpoint, ca_data=s.eks_ca_data
            ),
            session,
        )
        if s.eks_cluster_name
        else None
    )
    out["sagemaker"] = session.client("sagemaker") if s.sweep_sagemaker else None
    return out


@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    s, c = settings(), clients()
    # runs first: one closed now as FAILED or CANCELLED has its resources swept in this same pass
    closed, reconcile_errors = (
        reconcile_runs(c["store"], c["sfn"], dry_run=s.dry_run) if c["store"] is not None else ([], [])
    )
    report = sweep(
        c["lookup"],
        kube=c["kube"],
        sagemaker=c["sagemaker"],
        orphan_after_s=s.orphan_after_s,
        dry_run=s.dry_run,
    )
    report.reconciled, report.errors = closed, [*reconcile_errors, *report.errors]
    metrics.add_metric(name="RunsReconciled", unit=MetricUnit.Count, value=len(closed))
    metrics.add_metric(name="ResourcesDeleted", unit=MetricUnit.Count, value=len(report.deleted))
    metrics.add_metric(name="RunsKept", unit=MetricUnit.Count, value=len(report.kept_runs))
    metrics.add_metric(name="SweepErrors", unit=MetricUnit.Count, value=len(report.errors))
    for run in closed:
        logger.info("run closed", extra={"run": run.model_dump()})
    for item in report.deleted:
        logger.info("removed", extra={"resource": item.model_dump()})
    for error in report.errors:
        logger.warning("sweep error", extra={"error": error})
    return report.model_dump(mode="json")
