"""A trace turned into what the workload model needs: empirical length distributions (joint samples, evenly strided
over the trace), the busiest hour's rate as the peak, the day's shape where the trace covers a day, the prefix
most requests share, and the window the estimator replays. Reading is memoised per file state, so an estimate
and its comparison against Poisson read a trace once.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Final

from sizing.base.distributions import TokenDistribution
from sizing.traces.formats import MOONCAKE_BLOCK_TOKENS, TraceFormat
from sizing.traces.reader import Trace, read_trace
from sizing.traces.replay import TraceReplay, window
from sizing.traces.summary import LENGTH_PERCENTILES, needed, samples, summarize

#: Hours a trace must cover for its own day shape to replace traffic.profile.
DAY_HOURS: Final = 24.0
#: Traces kept read in a process (an estimate and its Poisson comparison read one twice). A bound on memory.
TRACES_KEPT: Final = 4


@dataclass(frozen=True)
class Recorded:
    inp: TokenDistribution
    out: TokenDistribution
    peak_rps: float
    #: 24 hourly weights (busiest 1) where the trace covers a day, else None
    weights: list[float] | None
    shared_prefix: int
    replay: TraceReplay | None
    figures: dict[str, Any]


def _stamp(path: str) -> tuple[float, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime, st.st_size


@functools.lru_cache(maxsize=TRACES_KEPT)
def _read(path: str, fmt: TraceFormat | None, model: str | None, stamp: Any) -> Trace:  # noqa: ARG001 (stamp: the file's size and time, part of the cache key)
    return read_trace(path, fmt, model)


def load(path: str, fmt: TraceFormat | None = None, model: str | None = None, s3_client: Any = None) -> Trace:
    """The trace at `path`, read once per state of the file (S3 objects, and any read with a client given, are
    read each time)."""
    if s3_client is not None or path.startswith("s3://"):
        return read_trace(path, fmt, model, s3_client=s3_client)
    return _read(path, fmt, model, _stamp(path))


def recorded(
    path: str,
    fmt: TraceFormat | None = None,
    model: str | None = None,
    *,
    replay: bool = True,
    input_mean_cap: float | None = None,
    s3_client: Any = None,
) -> Recorded:
    """What the workload model takes from the trace at `path`."""
    trace = load(path, fmt, model, s3_client)
    figures = summarize(trace)
    ins, outs = samples(trace)
    i_dist, o_dist = TokenDistribution.empirical(ins), TokenDistribution.empirical(outs)
    weights = None
    if trace.span_s >= DAY_HOURS * 3600:
        rates = figures["hourly_rps"]
        top = max(rates)
        weights = [r / top for r in rates] if top > 0 else None
    # the prefix most requests share: the median hit, in whole blocks, below the input's mean
    shared = (
        int(figures["prefix_reuse"]["median_hit_tokens"]) // MOONCAKE_BLOCK_TOKENS * MOONCAKE_BLOCK_TOKENS
    )
    cap = input_mean_cap if input_mean_cap is not None else i_dist.mean
    while shared and shared >= cap:
        shared -= MOONCAKE_BLOCK_TOKENS
    figures["replayed"] = replay
    win = window(trace) if replay else None
    if win is not None:
        figures["replay_window"] = {
            "requests": win.n,
            "own_mean_rps": round(win.mean_rate, 4),
            "starts_s": round(float(trace.t[int(win.key.rsplit(":", 2)[1])]), 3),
        }
    figures["shared_prefix_tokens"] = shared
    return Recorded(i_dist, o_dist, float(figures["busiest_hour_rps"]), weights, max(0, shared), win, figures)


def short_for_slo(requests: int, percentiles: list[str]) -> str | None:
    """What the answer says where the trace holds too few requests for an SLO percentile (one beyond it): the
    estimate repeats them to simulate it, so that percentile rests on repeats. None when it holds enough."""
    short = sorted({q for q in percentiles if q in LENGTH_PERCENTILES and requests < needed(q)}, key=needed)
    if not short:
        return None
    return (
        f"too few requests for the SLO's {', '.join(short)} ({requests:,} in the trace; "
        + ", ".join(f"{q} needs {needed(q):,}" for q in short)
        + f"): the estimate repeats the trace's {requests:,} requests to simulate it, so that percentile rests on"
        " repeats; a longer trace gives one of its own"
    )
