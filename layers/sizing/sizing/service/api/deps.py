"""The API's AWS-backed dependencies, built lazily on first use (never at import, so importing the handler is
fast and tests can configure clients first) and replaceable with `configure()` (tests, `sizing serve`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sizing.service.runs import RunsService
from sizing.service.settings import ApiSettings
from sizing.store import SizingStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog
    from sizing.releases.catalog import LiveCatalog

#: Idempotency records share the table (single-table design: one TTL, one IAM grant, one backup policy); they
#: sit under their own partition key and carry the table's TTL attribute, so DynamoDB deletes them itself.
IDEMPOTENCY_PK = "IDEMPOTENCY#runs"


@dataclass
class _State:
    settings: ApiSettings | None = None
    dynamodb: Any = None
    sfn: Any = None
    store: SizingStore | None = None
    runs: RunsService | None = None
    idempotency: DynamoDBPersistenceLayer | None = None
    catalog: LiveCatalog | None = None
    progress: Callable[[str], dict[str, Any] | None] | None = None


_state = _State()


def configure(
    settings: ApiSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    runs: RunsService | None = None,
    progress: Callable[[str], dict[str, Any] | None] | None = None,
) -> None:
    """Replace the settings and/or clients; everything built from them is rebuilt on next use. `sizing serve`
    also gives its own runs service (runs executed on the embedded AWS, bounded, queued) and `progress`, what
    a run's execution has done so far."""
    global _state
    _state = _State(settings=settings, dynamodb=dynamodb, sfn=sfn, runs=runs, progress=progress)


def progress(run_id: str) -> dict[str, Any] | None:
    """A run's execution progress where this server follows executions itself (`sizing serve`); else None."""
    return _state.progress(run_id) if _state.progress is not None else None


def settings() -> ApiSettings:
    if _state.settings is None:
        _state.settings = ApiSettings.from_env()
    return _state.settings


def store() -> SizingStore:
    if _state.store is None:
        _state.store = SizingStore(settings().table_name, client=_state.dynamodb)
    return _state.store


def catalog() -> Catalog:
    """The shipped catalog plus the models added by releases (`LiveCatalog`: rebuilt when a release lands)."""
    if _state.catalog is None:
        from sizing.releases.catalog import LiveCatalog, ModelRegistry

        _state.catalog = LiveCatalog(ModelRegistry(settings().table_name, client=store().client))
    return _state.catalog()


def runs() -> RunsService:
    if _state.runs is None:
        _state.runs = RunsService(
            store(), settings().state_machine_arn, sfn_client=_state.sfn, catalog=catalog
        )
    return _state.runs


def idempotency_layer() -> DynamoDBPersistenceLayer:
    if _state.idempotency is None:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        _state.idempotency = DynamoDBPersistenceLayer(
            table_name=settings().table_name,
            key_attr="PK",
            sort_key_attr="SK",
            static_pk_value=IDEMPOTENCY_PK,
            expiry_attr="expires_at",
            boto3_client=store().client,
        )
    return _state.idempotency


def init_environment(
    handler: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> Callable[..., dict[str, Any]]:
    """Decorator: parse the environment into `ApiSettings` before the first event (a missing variable fails
    the cold start loudly, not the first request that needs it)."""

    @functools.wraps(handler)
    def wrapper(event: dict[str, Any], context: Any) -> dict[str, Any]:
        settings()
        return handler(event, context)

    return wrapper
