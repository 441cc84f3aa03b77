"""The API's services (`sizing.base.wiring`): settings and AWS-backed clients in one frozen bundle, built on first use
(never at import, so importing the handler is fast). Tests give their own with `services.override(build(...))`;
`sizing serve` builds its own with `configure(...)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sizing.base.wiring import Wiring
from sizing.base.wiring import idempotency_layer as persistence_layer
from sizing.releases.catalog import LiveCatalog
from sizing.service.runs import RunsService
from sizing.service.settings import ApiSettings
from sizing.store import SizingStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog

#: Idempotency records share the table (single-table design: one TTL, one IAM grant, one backup policy); they
#: sit under their own partition key and carry the table's TTL attribute, so DynamoDB deletes them itself.
IDEMPOTENCY_PK = "IDEMPOTENCY#runs"

Progress = Callable[[str], dict[str, Any] | None]


@dataclass(frozen=True)
class ApiServices:
    """What the API's routes use. `dynamodb`/`sfn`: boto3 clients (made lazily when None); `given_runs`: a runs
    service of the host's own (`sizing serve` executes runs on the embedded AWS); `progress`: what a run's
    execution has done so far, where the host follows executions itself."""

    settings: ApiSettings
    dynamodb: Any = None
    sfn: Any = None
    given_runs: RunsService | None = None
    progress: Progress | None = None
    #: Seconds between checks of the release registry (`releases.catalog.CHECK_EVERY_S` when None).
    catalog_check_s: float | None = None

    @cached_property
    def store(self) -> SizingStore:
        return SizingStore(self.settings.table_name, client=self.dynamodb)

    @cached_property
    def live_catalog(self) -> LiveCatalog:
        """The shipped catalog plus the models added by releases (rebuilt when a release lands)."""
        return LiveCatalog.of_table(self.settings.table_name, self.store.client, self.catalog_check_s)

    @cached_property
    def runs(self) -> RunsService:
        if self.given_runs is not None:
            return self.given_runs
        return RunsService(
            self.store, self.settings.state_machine_arn, sfn_client=self.sfn, catalog=self.live_catalog
        )

    @cached_property
    def idempotency(self) -> DynamoDBPersistenceLayer:
        return persistence_layer(self.settings.table_name, IDEMPOTENCY_PK, self.store.client)


def build(
    settings: ApiSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    runs: RunsService | None = None,
    progress: Progress | None = None,
    catalog_check_s: float | None = None,
) -> ApiServices:
    """The API's services: `settings` parsed from the environment when not given."""
    return ApiServices(settings or ApiSettings.from_env(), dynamodb, sfn, runs, progress, catalog_check_s)


services: Wiring[ApiServices] = Wiring(build)


def configure(
    settings: ApiSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    runs: RunsService | None = None,
    progress: Progress | None = None,
) -> None:
    """For hosts that keep one bundle for the process (`sizing serve`): use these settings and clients from now
    on; with no arguments, build from the environment again."""
    services.set(lambda: build(settings, dynamodb=dynamodb, sfn=sfn, runs=runs, progress=progress))


# --- what the routes call -------------------------------------------------------------------------------------
def settings() -> ApiSettings:
    return services().settings


def store() -> SizingStore:
    return services().store


def runs() -> RunsService:
    return services().runs


def catalog() -> Catalog:
    """The current catalog: the shipped models and those released since."""
    return services().live_catalog()


def idempotency_layer() -> DynamoDBPersistenceLayer:
    return services().idempotency


def progress(run_id: str) -> dict[str, Any] | None:
    """A run's execution progress where this server follows executions itself (`sizing serve`); else None."""
    follow = services().progress
    return follow(run_id) if follow is not None else None
