"""DynamoDB single-table repository: runs, architectures, measurements, rankings and watches as typed items."""

from sizing.store.items import (
    ALLOWED_FROM,
    RUN_STATUSES,
    TERMINAL,
    Architecture,
    Measurement,
    Ranking,
    Run,
    RunSource,
    RunStatus,
    SlackThread,
    Watch,
)
from sizing.store.repository import SizingStore
from sizing.store.schema import create_table, table_definition

__all__ = [
    "ALLOWED_FROM",
    "RUN_STATUSES",
    "TERMINAL",
    "Architecture",
    "Measurement",
    "Ranking",
    "Run",
    "RunSource",
    "RunStatus",
    "SizingStore",
    "SlackThread",
    "Watch",
    "create_table",
    "table_definition",
]
