"""The load-test process's own state: its settings (set once by `configure`), and the collector of raw request
records -- this process's, and on a master those its workers send -- with the requests it has in flight. Only ever
imported inside the load-test process, and `locust` first (`sizing.loadtest.locustfile`)."""

import locust  # noqa: I001  (first: gevent monkey-patching before ssl/boto3)

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust.env import Environment

from sizing.loadtest.config import LoadTestConfig
from sizing.loadtest.metrics import RequestRecord
from sizing.loadtest.prompts import load_dataset

assert locust  # imported for its side effect


@dataclass
class _State:
    """Per-process settings, set once by `configure` before users start."""

    cfg: LoadTestConfig | None = None
    dataset: list[dict[str, Any]] | None = None
    rate_per_dispatcher: float = 0.0
    seeds: Any = field(default_factory=lambda: itertools.count(1))
    aws_client: Any = None
    process_index: int = 0
    shipped_log: Path | None = None


STATE = _State()


class Collector:
    """Raw records of this process (and, on the master, those the workers sent), the requests this process has in
    flight, and (on the master) what each worker's last report said about its own."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.total = 0
        self._inflight: dict[int, float] = {}
        self._keys = itertools.count()
        #: worker id -> (epoch seconds its last report was made, oldest start it still had in flight or None, the
        #: starts of every request it had in flight)
        self.reported: dict[str, tuple[float, float | None, list[float]]] = {}

    def begin(self) -> int:
        """A request is about to be sent: remember when (epoch seconds, no later than its record's start)."""
        key = next(self._keys)
        self._inflight[key] = time.time()
        return key

    def end(self, key: int) -> None:
        """The request has ended: recorded (after `add`), or its user was stopped."""
        self._inflight.pop(key, None)

    def oldest_inflight(self) -> float | None:
        return min(self._inflight.values(), default=None)

    def inflight_starts(self) -> list[float]:
        """When each request this process has in flight was sent (epoch seconds)."""
        return list(self._inflight.values())

    def unfinished(self, lo: float, hi: float) -> int:
        """Requests sent in [lo, hi) still running: this process's own, and those the workers' last reports
        listed (a master runs no users)."""
        mine = sum(1 for t in self._inflight.values() if lo <= t < hi)
        theirs = sum(1 for _, _, starts in self.reported.values() for t in starts if lo <= t < hi)
        return mine + theirs

    def add(self, env: Environment, rec: RequestRecord, name: str) -> None:
        self.records.append(rec)
        self.total += 1
        env.events.request.fire(
            request_type="STREAM",
            name=name,
            response_time=rec.e2e_s * 1000,
            response_length=rec.output_tokens or 0,
            exception=None if rec.error is None else RuntimeError(rec.error),
            context={},
        )

    def drain(self) -> list[RequestRecord]:
        out, self.records = self.records, []
        return out


COLLECTOR = Collector()


def configure(cfg: LoadTestConfig, process_index: int = 0) -> None:
    """Set this process's settings; `process_index` (0 master/local, 1.. workers) keeps seeds distinct."""
    STATE.cfg = cfg
    STATE.process_index = process_index
    STATE.dataset = load_dataset(cfg.dataset) if cfg.dataset else None
    STATE.shipped_log = None
    if cfg.save_requests and process_index > 0:  # a worker: its own log of every record it ships
        STATE.shipped_log = Path(cfg.out_dir) / f"requests.worker-{process_index}.msgpack"
        STATE.shipped_log.parent.mkdir(parents=True, exist_ok=True)
        STATE.shipped_log.write_bytes(b"")


def configured() -> LoadTestConfig:
    if STATE.cfg is None:
        raise RuntimeError("sizing load test not configured (give --sizing-config)")
    return STATE.cfg
