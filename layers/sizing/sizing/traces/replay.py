"""A trace as the estimator replays it: a window of consecutive requests from the busiest hour, with their arrival
times, lengths and prefix hits, time-scaled to whatever rate the capacity search probes.

The window starts at the first request of the trace's busiest clock hour (the hour the peak is sized for) and
holds `WINDOW` requests (the simulator reads its first n). Scaling keeps the shape of the arrivals: at rate r the
window's times are multiplied by (window's own mean rate / r), so a burst stays a burst of the same share of the
traffic. A run longer than the window repeats it, one mean gap after its end.

Prefix hits are bounded by the cache the configuration has: a request's hit counts where the prompt tokens sent
since its blocks were last used fit in the replica's KV cache (an LRU cache that large still holds them; a
conservative reading, since the tokens sent count blocks shared among them once each), floored to the engine's
block size, and never the prompt's last token (its logits give the first output token).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from sizing.base.errors import InvalidInput, Problem
from sizing.traces.formats import TraceFormat
from sizing.traces.reader import Trace, read_trace

#: Requests in a replay window: the planner's report simulation (sizing.plan.capacity.REPORT_REQUESTS) reads this
#: many, its probes fewer.
WINDOW: Final = 1000


@dataclass(frozen=True, eq=False)
class TraceReplay:
    """The replayed window. Equal (and hashed) by `key`: the trace's digest and the window's first request, so
    memoised simulations of one window are found again without hashing its arrays."""

    key: str
    #: arrival times (s) since the window's first request, ascending
    t: np.ndarray = field(repr=False)
    inp: np.ndarray = field(repr=False)
    out: np.ndarray = field(repr=False)
    hit: np.ndarray = field(repr=False)
    reuse_distance: np.ndarray = field(repr=False)
    #: the key of the prefix each hit comes from (`Trace.prefix_key`): a replay against a server sends requests of
    #: one key the same leading text
    prefix_key: np.ndarray | None = field(default=None, repr=False)
    digest: str = ""

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceReplay) and other.key == self.key

    @property
    def n(self) -> int:
        return int(self.t.size)

    @property
    def mean_rate(self) -> float:
        """The window's own mean rate: requests over its span (one mean gap added, so a window of two has one)."""
        if self.n < 2:
            return 1.0
        span = float(self.t[-1] - self.t[0])
        return (self.n - 1) / span if span > 0 else float("inf")

    def _index(self, n: int) -> np.ndarray:
        return np.arange(n) % self.n

    def arrivals(self, n: int, rate_rps: float) -> np.ndarray:
        """The first `n` arrivals at mean `rate_rps` (the window repeated past its end)."""
        if rate_rps <= 0:
            raise ValueError("rate_rps must be positive")
        own = self.mean_rate
        if not np.isfinite(own):
            # every request at one instant: keep them together, then one window per n / rate
            period = self.n / rate_rps
            return (np.arange(n) // self.n) * period
        gap = 1.0 / own
        period = float(self.t[-1] - self.t[0]) + gap
        idx = np.arange(n)
        base = self.t[idx % self.n] - self.t[0] + (idx // self.n) * period
        return np.asarray(base * (own / rate_rps), dtype=float)

    def lengths(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(prompt tokens, answer tokens) of the first `n` requests."""
        i = self._index(n)
        return self.inp[i], self.out[i]

    def cached(self, n: int, inp: np.ndarray, block: int, kv_capacity_tokens: int) -> np.ndarray:
        """Prompt tokens of the first `n` requests read from a prefix cache of `kv_capacity_tokens` with blocks of
        `block` tokens (`inp`: their prompts as the replica takes them)."""
        i = self._index(n)
        hit = np.where(self.reuse_distance[i] <= kv_capacity_tokens, self.hit[i], 0)
        hit = np.minimum(hit, np.maximum(inp - 1, 0))
        b = max(1, int(block))
        return np.asarray((hit // b) * b)

    def as_load(self) -> dict[str, object]:
        """The window as a load test replays it (`sizing.loadtest.config.ReplaySpec`'s fields)."""
        keys = self.prefix_key if self.prefix_key is not None else np.zeros(self.n, dtype=np.int64)
        return {
            "digest": self.digest or self.key,
            "t": [round(float(x), 6) for x in self.t],
            "input_tokens": self.inp.tolist(),
            "output_tokens": self.out.tolist(),
            "hit_tokens": self.hit.tolist(),
            "prefix_keys": keys.tolist(),
        }


def busiest_hour_start(trace: Trace) -> int:
    """Index of the first request of the trace's busiest clock hour (UTC where its times are absolute)."""
    offset = (trace.start or 0.0) % 3600.0
    hours = np.floor((trace.t + offset) / 3600.0).astype(np.int64)
    counts = np.bincount(hours - hours[0])
    busiest = int(np.argmax(counts)) + int(hours[0])
    return int(np.searchsorted(hours, busiest))


def window(trace: Trace, size: int = WINDOW) -> TraceReplay:
    """The replay window of `trace`: `size` consecutive requests from the start of its busiest hour (fewer where
    the trace ends first: then it starts earlier, so it holds `size` where the trace has them)."""
    start = busiest_hour_start(trace)
    start = max(0, min(start, trace.n - size))
    stop = min(trace.n, start + size)
    sl = slice(start, stop)
    t = trace.t[sl] - trace.t[start]
    return TraceReplay(
        key=f"{trace.digest}:{trace.model or ''}:{start}:{stop}",
        t=np.ascontiguousarray(t),
        inp=np.ascontiguousarray(trace.inp[sl]),
        out=np.ascontiguousarray(trace.out[sl]),
        hit=np.ascontiguousarray(trace.hit[sl]),
        reuse_distance=np.ascontiguousarray(trace.reuse_distance[sl]),
        prefix_key=np.ascontiguousarray(trace.prefix_key[sl]),
        digest=trace.digest,
    )


def reread(
    path: str, fmt: TraceFormat | None, model: str | None, digest: str, *, s3_client: Any = None
) -> TraceReplay:
    """The replay window of the trace at `path`, read again where the estimate read it (a run's load generator:
    the window is too large for a state's payload), refused naming the trace when its bytes changed since, so the
    levels measured belong to the trace the estimate sized."""
    trace = read_trace(path, fmt, model, s3_client=s3_client)
    if trace.digest != digest:
        raise InvalidInput(
            f"the trace {path} changed since the estimate read it (its digest was {digest[:19]}..., now"
            f" {trace.digest[:19]}...): start the run again to size for the trace as it is now",
            [Problem("trace", f"{path}: changed since the estimate")],
        )
    return window(trace)
