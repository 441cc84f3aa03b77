"""Per-request measurements and their per-step summary (exact percentiles over every sample in the window)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from sizing.base.strict import Strict
from sizing.loadtest.confidence import TargetCheck, Verdict, check_target, level_verdict
from sizing.loadtest.overload import Overload, assess
from sizing.loadtest.server import ServerWindow
from sizing.loadtest.stepsample import StepsSample

#: Requests sent closer together than this share of the level's median inter-token gap (one engine step) count as
#: sent together. The users of a lock-step group send their next requests as their answers end, within the
#: client's and the HTTP round trip's few milliseconds (0.3-6 ms between a group's starts against steps of
#: 25-90 ms on the CPU engine: docs/engine.md, "Lock-step"); users at random phases start a step or more apart.
LOCKSTEP_GAP_SHARE = 0.1
#: Fewest answered requests a closed-loop level needs before its lock-step group is stated: fewer read groups
#: out of a handful of starts.
LOCKSTEP_MIN_REQUESTS = 20
#: A closed-loop level whose requests went out in groups that round to 2 or more (request-weighted mean, beyond
#: chance: users at random phases read about 1) is flagged and re-simulated in groups of that size. The CPU
#: engine's 64-stream levels read 3-13 (1 where answers of 15-50 s left a level two or three cycles), its 16-stream
#: levels 2-6.5, its 4-stream levels 1-1.5 (docs/engine.md); a group of 2 already moved its TTFT by 70% there.
LOCKSTEP_FLAG_GROUP = 1.5

#: Percentiles every distribution reports (the SLO may name any of them).
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))
MS_PER_S = 1000.0


@dataclass
class RequestRecord:
    """One request as the client saw it. Times are wall-clock seconds (epoch) so records from several worker
    processes can be placed in the same step window; durations are measured on a monotonic clock."""

    start: float  # epoch seconds when the request was sent
    end: float  # epoch seconds when the last byte arrived (or the error happened)
    ttft_s: float | None = None  # to the first content token (not the headers, not an empty role chunk)
    itl_s: list[float] = field(default_factory=list)  # gaps between content chunks
    input_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None  # kind: http_429, http_5xx, timeout, connection, protocol, empty_response ...
    response_id: str | None = None  # the server's id for the answer (OpenAI `id`), to match server-side logs

    @property
    def e2e_s(self) -> float:
        return self.end - self.start

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (output tokens - 1)."""
        if self.ttft_s is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def to_wire(self) -> list[Any]:
        """A compact list for shipping from Locust workers to the master (msgpack-friendly)."""
        return [
            self.start,
            self.end,
            self.ttft_s,
            self.itl_s,
            self.input_tokens,
            self.output_tokens,
            self.error,
            self.response_id,
        ]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RequestRecord:
        """A record from a saved line of `requests.jsonl` (its fields beside the level's `step`, which it drops)."""
        return cls(**{k: v for k, v in row.items() if k in cls.__dataclass_fields__})

    @classmethod
    def from_wire(cls, w: Sequence[Any]) -> RequestRecord:
        return cls(w[0], w[1], w[2], list(w[3]), w[4], w[5], w[6], w[7] if len(w) > 7 else None)


def read_worker_log(path: str | Path) -> list[RequestRecord]:
    """The records a Locust worker shipped to its master, in order (`requests.worker-<index>.msgpack`, written
    with `save_requests`: one msgpack list of wire records per report)."""
    import msgpack  # Locust's dependency; only the load-test side writes these logs

    out: list[RequestRecord] = []
    with open(path, "rb") as f:
        for batch in msgpack.Unpacker(f, raw=False):
            out.extend(RequestRecord.from_wire(w) for w in batch)
    return out


class Distribution(Strict):
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    count: int = 0


class StepResult(Strict):
    """One load level's measurements: the record `steps.jsonl` holds per line (latencies in ms, e2e in s)."""

    step: int = Field(ge=0)
    target: dict[str, float] = Field(description='{"concurrency": N} or {"rate_rps": R} or {"users": N}')
    started_at: float
    duration_s: float
    warmup_s: float
    requests: int
    errors: dict[str, int]
    unfinished: int = Field(
        default=0,
        ge=0,
        description="requests sent in the window still running when the step ended (its tail's cap): counted in"
        " `requests`, in no latency figure; the e2e percentiles are then a lower bound, and an SLO check counts"
        " them as misses",
    )
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_s: Distribution
    input_tokens: float | None
    output_tokens: float | None
    requests_per_s: float = Field(description="successful requests sent per second of the window")
    output_tokens_per_s: float = Field(
        description="output tokens delivered per second of the window: the tokens of successful answers whose chunks"
        " arrived inside it, whenever their requests were sent (the engine's own generation rate over the window;"
        " counting whole answers by when they were sent read a closed loop's waves, one answer more or fewer per"
        " stream, up to 17% off the engine's count)"
    )
    meets_slo: bool | None = None
    slo_failures: list[str] = Field(default_factory=list)
    checks: list[TargetCheck] = Field(
        default_factory=list,
        description="each SLO target's percentile with its 95% interval (order statistics), the requests behind"
        " it and its verdict: pass (the interval below the limit), fail (above) or unsure",
    )
    capacity_verdict: Verdict | None = Field(
        default=None, description="the level's confident verdict over every target (None: no targets)"
    )
    overload: Overload | None = Field(
        default=None,
        description="whether the server kept up with an open-loop level's arrivals (sizing.loadtest.overload): an"
        " overloaded level fails its SLO whatever its percentiles read; None: not tested (a closed loop, or too"
        " few arrivals)",
    )
    server: ServerWindow | None = Field(
        default=None,
        description="the server's own figures over the window (its /metrics deltas), where it exposes them",
    )
    trace_digest: str | None = Field(
        default=None,
        description="the digest (sha256:...) of the recorded trace the level replayed, time-scaled to its rate;"
        " None: Poisson arrivals or users",
    )
    flags: list[str] = Field(
        default_factory=list,
        description="what makes the level's figures doubtful, in words (unexpected prefix-cache hits, ...)",
    )
    lockstep_group: float | None = Field(
        default=None,
        description="a closed loop's users: how many requests went out together, on average per request (starts"
        " within a tenth of an engine step of each other): about 1 for users at random phases; more where the"
        ' users fell into lock-step groups that the engine prefills together (docs/engine.md, "Lock-step").'
        " None: an open loop, or too few requests",
    )

    engine_steps: StepsSample | None = Field(
        default=None,
        description="the engine's steps rebuilt from the level's streamed chunks (a sample of the timed ones) and"
        " its first tokens at an idle engine: what the learning loop fits the step time to"
        " (sizing.loadtest.stepsample); None: not rebuilt",
    )

    @property
    def failed(self) -> int:
        """Requests of the window that failed, of every kind (refused, errored, timed out)."""
        return sum(self.errors.values())

    @property
    def level(self) -> float:
        """The load the step ran at: its target's value (concurrency, rate or users)."""
        return float(next(iter(self.target.values())))

    @property
    def sent_rps(self) -> float:
        """The arrival rate the step really ran at: the requests sent in its window (errors and unfinished ones
        included) over the window. Poisson arrivals over a window of tens of seconds land 10-20% off their target
        (the engine grid's levels: 0.84-1.20 of it), and near saturation a level's latencies answer to the rate it
        got, not the one asked for; the step's `level` when it sent nothing."""
        if self.requests > 0 and self.duration_s > 0:
            return round(self.requests / self.duration_s, 4)
        return self.level

    @property
    def answered(self) -> int:
        """Requests of the window that were answered."""
        return self.requests - self.failed - self.unfinished

    def value(self, metric: str, percentile: str) -> float | None:
        dist = getattr(self, metric, None)
        return None if not isinstance(dist, Distribution) else getattr(dist, percentile, None)


def distribution(values: Iterable[float], scale: float = 1.0) -> Distribution:
    """Mean, exact percentiles (linear interpolation between closest ranks) and max of all samples."""
    arr = np.fromiter((v for v in values if v is not None and math.isfinite(v)), dtype=float) * scale
    if arr.size == 0:
        return Distribution()
    qs = np.percentile(arr, [q for _, q in QUANTILES])
    out: dict[str, Any] = {name: round(float(v), 3) for (name, _), v in zip(QUANTILES, qs, strict=True)}
    return Distribution(
        mean=round(float(arr.mean()), 3), max=round(float(arr.max()), 3), count=int(arr.size), **out
    )


def summarize(
    records: Iterable[RequestRecord], *, step: int, target: dict[str, float], window: tuple[float, float],
    warmup_s: float, unfinished: int = 0,
) -> StepResult:  # fmt: skip
    """Summarize the requests sent inside `window` (epoch seconds, after the warm-up), however long they took:
    counting by when requests were sent keeps long answers in (counting by when they finished would favour
    short ones) and leaves out those sent before the load reached steady state. `unfinished`: requests sent in
    the window with no record yet (still running when the step ended). Throughput alone counts by arrival: the
    tokens delivered inside the window (`delivered_tokens`)."""
    lo, hi = window
    records = list(records)
    inside = [r for r in records if lo <= r.start < hi]
    ok = [r for r in inside if r.error is None]
    itl = [g for r in ok for g in r.itl_s]
    group = (
        lockstep_group([r.start for r in ok], float(np.median(itl)) if itl else None)
        if "concurrency" in target or "users" in target
        else None
    )
    errors = Counter(r.error for r in inside if r.error is not None)
    duration = max(hi - lo, 1e-9)
    out_tokens = [r.output_tokens for r in ok if r.output_tokens is not None]
    in_tokens = [r.input_tokens for r in ok if r.input_tokens is not None]
    return StepResult(
        step=step,
        target=target,
        started_at=round(lo - warmup_s, 3),
        duration_s=round(duration, 3),
        warmup_s=warmup_s,
        requests=len(inside) + unfinished,
        errors=dict(sorted(errors.items())),
        unfinished=unfinished,
        ttft_ms=distribution((r.ttft_s for r in ok if r.ttft_s is not None), MS_PER_S),
        tpot_ms=distribution((t for r in ok if (t := r.tpot_s) is not None), MS_PER_S),
        itl_ms=distribution(itl, MS_PER_S),
        e2e_s=distribution(r.e2e_s for r in ok),
        input_tokens=round(float(np.mean(in_tokens)), 1) if in_tokens else None,
        output_tokens=round(float(np.mean(out_tokens)), 1) if out_tokens else None,
        requests_per_s=round(len(ok) / duration, 4),
        output_tokens_per_s=round(delivered_tokens(records, lo, hi) / duration, 2),
        flags=[lockstep_flag(group)] if group is not None and group >= LOCKSTEP_FLAG_GROUP else [],
        lockstep_group=group,
    )


def delivered_tokens(records: Iterable[RequestRecord], lo: float, hi: float) -> float:
    """Output tokens of successful answers that arrived in [lo, hi) (epoch seconds): each answer's first chunk at
    its start + TTFT, each next one an inter-token gap later, its tokens spread evenly over its chunks. A request
    sent in the warm-up still streaming in the window counts for what it delivered there, one sent at the window's
    end only for what it delivered before it closed."""
    total = 0.0
    for r in records:
        if r.error is not None or r.ttft_s is None or not r.output_tokens:
            continue
        first = r.start + r.ttft_s
        if first >= hi or first + sum(r.itl_s) < lo:
            continue
        arrivals = first + np.concatenate(([0.0], np.cumsum(r.itl_s)))
        inside = int(np.count_nonzero((arrivals >= lo) & (arrivals < hi)))
        total += r.output_tokens * inside / arrivals.size
    return total


def lockstep_group(starts: Sequence[float], step_s: float | None) -> float | None:
    """How many requests went out together, on average per request, beyond chance: the request-weighted mean size of
    the runs of starts less than LOCKSTEP_GAP_SHARE of an engine step (`step_s`, the median inter-token gap) apart,
    less the 2 x rate x gap that starts at random instants add (so users at random phases read about 1). None
    without a step or with fewer than LOCKSTEP_MIN_REQUESTS starts."""
    if step_s is None or not step_s > 0 or len(starts) < LOCKSTEP_MIN_REQUESTS:
        return None
    t = np.sort(np.asarray(starts, dtype=float))
    gap = LOCKSTEP_GAP_SHARE * step_s
    ends = np.flatnonzero(np.diff(t) > gap)
    sizes = np.diff(np.concatenate(([0], ends + 1, [t.size])))
    span = float(t[-1] - t[0])
    chance = 2 * (t.size - 1) / span * gap if span > 0 else 0.0
    return round(max(1.0, float((sizes * sizes).sum() / sizes.sum()) - chance), 2)


def lockstep_users(group: float | None) -> int:
    """Users per lock-step group to re-simulate a measured closed-loop level with (`ClosedLoop.group`): the
    level's measured group, rounded, where it is flagged (LOCKSTEP_FLAG_GROUP); else 1, users at random phases."""
    if group is None or group < LOCKSTEP_FLAG_GROUP:
        return 1
    return round(group)


def lockstep_flag(group: float) -> str:
    """The flag of a closed-loop level whose users fell into lock-step groups of `group`."""
    return (
        f"users in lock-step: requests went out in groups of {group:.1f} on average (users at random phases: about"
        " 1). Each group is prefilled together and finishes together, so TTFT reads a group's prefill, not a"
        ' population\'s; the estimator re-simulates the level with groups of that size (docs/engine.md, "Lock-step")'
    )


#: Largest share of failed requests at which a level can still meet its SLO (1%: one failed request in a
#: hundred already breaks a p99 target).
MAX_ERROR_RATE = 0.01


#: A request's figure of a metric, in the unit StepResult reports it.
METRIC_OF: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft_ms": lambda r: None if r.ttft_s is None else r.ttft_s * MS_PER_S,
    "tpot_ms": lambda r: None if r.tpot_s is None else r.tpot_s * MS_PER_S,
    "e2e_s": lambda r: r.e2e_s,
}


def confident_checks(
    records: Iterable[RequestRecord], window: tuple[float, float], targets: Sequence[tuple[str, str, float]],
    unfinished: int = 0,
) -> list[TargetCheck]:  # fmt: skip
    """Each target's verdict with its interval, over the answered requests sent in `window`."""
    lo, hi = window
    ok = sorted((r for r in records if lo <= r.start < hi and r.error is None), key=lambda r: r.start)
    out = []
    for metric, pct, limit in targets:
        if metric == "itl_ms":
            values = [g * MS_PER_S for r in ok for g in r.itl_s]
        else:
            values = [v for r in ok if (v := METRIC_OF[metric](r)) is not None]
        out.append(check_target(values, metric, pct, limit, unfinished))
    return out


def backlog(
    records: Iterable[RequestRecord],
    inflight: Iterable[float],
    window: tuple[float, float],
    level_start: float,
) -> Overload | None:
    """The backlog test (`sizing.loadtest.overload.assess`) over `window` for the level begun at `level_start`:
    its recorded requests (answered or failed) and those still in flight (`inflight`: when each was sent). The
    waits it states are times to first token, or e2e where no request measured one (a non-streaming API)."""
    recs = [r for r in records if r.start >= level_start]
    running = [t for t in inflight if t >= level_start]
    timed = any(r.ttft_s is not None for r in recs)
    waits: list[float | None] = [r.ttft_s if timed else (r.e2e_s if r.error is None else None) for r in recs]
    return assess(
        [r.start for r in recs] + running, [r.end for r in recs] + [math.inf] * len(running), window,
        waits + [None] * len(running), level_start,
    )  # fmt: skip


def with_checks(result: StepResult, checks: list[TargetCheck]) -> StepResult:
    """The level with its targets' checks and its confident verdict: theirs, or a failure when the server fell
    behind its arrivals (`StepResult.overload`), which no percentile of a transient can outweigh."""
    verdict: Verdict | None = level_verdict(checks) if checks else None
    if verdict is not None and result.overload is not None and result.overload.overloaded:
        verdict = "fail"
    return result.model_copy(update={"checks": checks, "capacity_verdict": verdict})


def check_slo(result: StepResult, targets: Sequence[tuple[str, str, float]]) -> StepResult:
    """Mark whether every SLO percentile holds (and errors stay under MAX_ERROR_RATE, and the server kept up with
    an open-loop level's arrivals: `StepResult.overload`)."""
    failures: list[str] = []
    still = f" ({result.unfinished} still running when the step ended)" if result.unfinished else ""
    if result.answered <= 0:
        failures.append("no successful request" + still)
    elif result.failed / result.requests > MAX_ERROR_RATE:
        failures.append(f"errors {result.failed}/{result.requests} above {MAX_ERROR_RATE:.0%}")
    done = result.answered + result.unfinished
    for metric, pct, limit in targets:
        v = result.value(metric, pct)
        # an unfinished request's e2e is longer than anything measured: when more of them than the percentile
        # leaves out are missing, the percentile is beyond the step's end -- a miss, not a pass
        share_out = 1.0 - float(pct.lstrip("p")) / 100.0
        if metric == "e2e_s" and result.answered > 0 and result.unfinished / max(done, 1) > share_out:
            failures.append(
                f"{metric}.{pct} beyond the step's end: {result.unfinished} of {done} requests unfinished"
            )
        elif v is not None and v > limit:
            failures.append(f"{metric}.{pct} {v:g} > {limit:g}")
    if targets and result.overload is not None and result.overload.overloaded:
        failures.append(result.overload.reason())
    return result.model_copy(update={"meets_slo": not failures, "slo_failures": failures})


CSV_COLUMNS = (
    "step", "target", "duration_s", "requests", "errors", "unfinished", "requests_per_s", "output_tokens_per_s",
    "input_tokens", "output_tokens",
    *(f"{m}_{k}" for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_s") for k in ("mean", "p50", "p95", "p99")),
    "meets_slo", "lockstep_group",
)  # fmt: skip


def csv_row(r: StepResult) -> list[Any]:
    row: list[Any] = [
        r.step,
        ";".join(f"{k}={v:g}" for k, v in r.target.items()),
        r.duration_s,
        r.requests,
        r.failed,
        r.unfinished,
        r.requests_per_s,
        r.output_tokens_per_s,
        r.input_tokens,
        r.output_tokens,
    ]
    for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_s"):
        d = getattr(r, m)
        row += [d.mean, d.p50, d.p95, d.p99]
    row += [r.meets_slo, r.lockstep_group]
    return row
