"""Janitor function (scheduled): closes runs whose execution has ended, then removes whatever a finished or
expired sizing run left behind.

Parses its environment once per container (`JanitorSettings`), builds the run store, the run-status lookup and
the Step Functions, Kubernetes and SageMaker clients lazily (`services`, wired as every function is:
`sizing.base.wiring`), and calls `sizing.deploy.janitor.reconcile_runs` (a run still RUNNING or CANCELLING whose
execution has ended gets the execution's outcome), then `sizing.deploy.janitor.sweep`. Logs every closed run and
every deletion and emits `RunsReconciled`, `ResourcesDeleted`, `RunsKept` and `SweepErrors` metrics."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from sizing.base.envsettings import EnvSettings
from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import Wiring, init_environment
from sizing.deploy.janitor import DynamoRunStatus, reconcile_runs, sweep
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S


class JanitorSettings(EnvSettings):
    """The function's environment (template.yaml)."""

    OWNER = "the janitor function"

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
    #: The bus a run closed here is announced on (SizingRunCompleted / SizingRunFailed); empty: not announced.
    event_bus_name: str = Field(default="", alias="EVENT_BUS_NAME")


@dataclass(frozen=True)
class JanitorServices:
    """The run-status lookup, the run store and the Step Functions, Kubernetes and SageMaker clients, each made
    on first use from one boto3 session in the configured region (None where the settings switch it off)."""

    settings: JanitorSettings

    @cached_property
    def session(self) -> Any:
        import boto3

        return boto3.session.Session(region_name=self.settings.region)

    @cached_property
    def dynamodb(self) -> Any:
        return self.session.client("dynamodb")

    @cached_property
    def lookup(self) -> DynamoRunStatus:
        return DynamoRunStatus(self.settings.table_name, self.dynamodb)

    @cached_property
    def store(self) -> Any:
        from sizing.store import SizingStore

        return SizingStore(self.settings.table_name, self.dynamodb) if self.settings.reconcile else None

    @cached_property
    def events(self) -> Any:
        return self.session.client("events") if self.settings.event_bus_name else None

    @cached_property
    def sfn(self) -> Any:
        return self.session.client("stepfunctions") if self.settings.reconcile else None

    @cached_property
    def kube(self) -> Any:
        s = self.settings
        if not s.eks_cluster_name:
            return None
        from sizing.deploy.kube import ClusterConfig, eks_client_for

        config = ClusterConfig(
            name=s.eks_cluster_name, region=s.region, endpoint=s.eks_endpoint, ca_data=s.eks_ca_data
        )
        return eks_client_for(config, self.session)

    @cached_property
    def sagemaker(self) -> Any:
        return self.session.client("sagemaker") if self.settings.sweep_sagemaker else None


def build(settings: JanitorSettings | None = None) -> JanitorServices:
    return JanitorServices(settings or JanitorSettings.from_env())


#: Built once per container (`sizing.base.wiring`); `services.set(None)` rebuilds from the environment.
services: Wiring[JanitorServices] = Wiring(build)


@init_environment(services)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    c = services()
    s = c.settings
    # runs first: one closed now as FAILED or CANCELLED has its resources swept in this same pass
    closed, reconcile_errors = (
        reconcile_runs(c.store, c.sfn, dry_run=s.dry_run, events=c.events, bus=s.event_bus_name)
        if c.store is not None
        else ([], [])
    )
    report = sweep(
        c.lookup,
        kube=c.kube,
        sagemaker=c.sagemaker,
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
