"""Typed items of the single DynamoDB table: runs, architectures, measurements, rankings and watches.

Each item type knows its own keys; the repository (`sizing.store.repository`) only moves them in and out. Run
statuses and the transitions between them are data here, so the rule "a finished run never goes back to running"
is stated once and enforced by conditional writes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from sizing.base import table
from sizing.base.strict import Strict

RunStatus = Literal[
    "PENDING", "QUEUED", "RUNNING", "REFUSED", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"
]
RunSource = Literal["api", "slack", "event"]

RUN_STATUSES: tuple[RunStatus, ...] = (
    "PENDING",
    "QUEUED",
    "RUNNING",
    "REFUSED",
    "SUCCEEDED",
    "FAILED",
    "CANCELLING",
    "CANCELLED",
)
#: Statuses a run never leaves.
TERMINAL: frozenset[str] = frozenset({"REFUSED", "SUCCEEDED", "FAILED", "CANCELLED"})

#: Allowed predecessors of each status. PENDING is only ever the first status (create_run). QUEUED is a run
#: waiting for a free slot before its execution starts (`sizing serve` bounds the runs it executes at once). A
#: run is REFUSED by the budget guard before anything is provisioned; CANCELLING waits for teardown, which ends
#: in CANCELLED (or FAILED when teardown itself fails).
ALLOWED_FROM: dict[str, frozenset[str]] = {
    "PENDING": frozenset(),
    "QUEUED": frozenset({"PENDING"}),
    "RUNNING": frozenset({"PENDING", "QUEUED"}),
    "REFUSED": frozenset({"PENDING", "RUNNING"}),
    "SUCCEEDED": frozenset({"RUNNING"}),
    "FAILED": frozenset({"PENDING", "QUEUED", "RUNNING", "CANCELLING"}),
    "CANCELLING": frozenset({"PENDING", "RUNNING"}),
    "CANCELLED": frozenset({"PENDING", "QUEUED", "RUNNING", "CANCELLING"}),
}

#: Raw per-step measurements are kept 90 days: long enough to re-calibrate on a quarter's runs; the ranking
#: and the architectures (which carry the merged measured figures) are kept for good.
MEASUREMENT_TTL_S = 90 * 24 * 3600

RUNS_INDEX_PK = table.RUNS
WATCHES_INDEX_PK = table.WATCHES


def now_iso() -> str:
    """UTC timestamp with microseconds: sorts lexically in time order (GSI1SK relies on it)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Item(Strict):
    pass


class SlackThread(Item):
    channel: str = Field(min_length=1, max_length=64)
    thread_ts: str | None = Field(default=None, max_length=64)
    user: str | None = Field(default=None, max_length=64)
    response_url: str | None = Field(default=None, max_length=2048)


class Run(Item):
    """One sizing run: a workload spec measured by one state machine execution."""

    run_id: str
    status: RunStatus = "PENDING"
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    model: str
    spec: dict[str, Any]
    top_k: int = Field(ge=1)
    #: the exact architectures to measure (ids of the estimate's ranking), as a Slack "Measure these N" lists them;
    #: None: the top `top_k` distinct hardware options
    architecture_ids: list[str] | None = None
    budget_usd: float | None = Field(default=None, gt=0)
    execution_arn: str | None = None
    error: str | None = None
    source: RunSource = "api"
    slack: SlackThread | None = None

    @staticmethod
    def key(run_id: str) -> dict[str, str]:
        return table.run_key(run_id)

    def keys(self) -> dict[str, str]:
        return {
            **self.key(self.run_id),
            table.GSI1PK: RUNS_INDEX_PK,
            table.GSI1SK: table.listed(self.created_at, self.run_id),
        }

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class Architecture(Item):
    """One ranked architecture of a run (the Estimate result's architecture shape, measured or not)."""

    run_id: str
    rank: int = Field(ge=0)
    architecture_id: str
    data: dict[str, Any]

    def keys(self) -> dict[str, str]:
        return table.architecture_key(self.run_id, self.rank, self.architecture_id)


class Measurement(Item):
    """One load-test step (a concurrency level or a request rate) of one candidate; expires after the TTL."""

    run_id: str
    candidate_id: str
    recorded_at: str = Field(default_factory=now_iso)
    seq: str
    record: dict[str, Any]
    expires_at: int

    def keys(self) -> dict[str, str]:
        return table.measurement_key(self.run_id, self.candidate_id, self.seq)


class Ranking(Item):
    """The decision of a run: measured and estimated figures merged and ranked by cost under the SLOs."""

    run_id: str
    created_at: str = Field(default_factory=now_iso)
    data: dict[str, Any]

    def keys(self) -> dict[str, str]:
        return table.ranking_key(self.run_id)


class Watch(Item):
    """A saved workload re-sized automatically when a new model is released."""

    watch_id: str
    name: str = Field(min_length=1, max_length=128)
    spec: dict[str, Any]
    model: str | None = None
    created_at: str = Field(default_factory=now_iso)
    source: RunSource = "api"
    slack: SlackThread | None = None

    @staticmethod
    def key(watch_id: str) -> dict[str, str]:
        return table.watch_key(watch_id)

    def keys(self) -> dict[str, str]:
        return {
            **self.key(self.watch_id),
            table.GSI1PK: WATCHES_INDEX_PK,
            table.GSI1SK: table.listed(self.created_at, self.watch_id),
        }
