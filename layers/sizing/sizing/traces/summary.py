"""What a trace says about its traffic: the empirical lengths (joint input/output, kept as samples), the arrival
process (rate per hour of the day, burstiness: peak-to-mean at 1 s and 1 min and the index of dispersion of the
counts), prefix reuse, and multi-turn sessions. Every figure is computed from counts and times, never from text.

Percentiles need requests beyond them: a percentile q is reported only where at least one request lies above it
(n >= 1 / (1 - q)); otherwise the summary says how many it would take.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from sizing.traces.reader import Trace

#: Percentiles of the lengths shown, and the requests each needs (one beyond it: n >= 1 / (1 - q)).
LENGTH_PERCENTILES: Final = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
#: Windows of the burstiness figures: one second (what a replica's queue feels) and one minute (what an
#: autoscaler sees).
BURST_WINDOWS_S: Final = {"1s": 1.0, "1min": 60.0}
#: Joint (input, output) samples kept of a trace for the workload's length distributions: evenly strided over
#: the trace, so they follow its mix through the day. Enough for a p99.9 (10 beyond it), small enough to hash
#: and copy on every estimate.
MAX_SAMPLES: Final = 20_000


def needed(q: str) -> int:
    """Requests a percentile needs: one beyond it."""
    return math.ceil(1.0 / (1.0 - LENGTH_PERCENTILES[q] / 100.0) - 1e-9)


def _lengths(x: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"mean": round(float(x.mean()), 1), "max": int(x.max())}
    for q, pct in LENGTH_PERCENTILES.items():
        out[q] = round(float(np.percentile(x, pct)), 1) if x.size >= needed(q) else None
    return out


def _counts(t: np.ndarray, width: float) -> np.ndarray:
    """Requests per window of `width` seconds over the trace's span (empty windows counted)."""
    bins = int(t[-1] // width) + 1 if t.size else 0
    return np.bincount((t // width).astype(np.int64), minlength=bins)


def burstiness(t: np.ndarray) -> dict[str, Any]:
    """Per window: the busiest window's count over the mean count (peak-to-mean), and the index of dispersion of
    the counts (variance / mean: 1 for a Poisson stream, 0 for constant gaps, above 1 for bursts). A window is
    read only where the trace spans at least two of them."""
    out: dict[str, Any] = {}
    span = float(t[-1] - t[0]) if t.size > 1 else 0.0
    for name, width in BURST_WINDOWS_S.items():
        if span < 2 * width:
            out[name] = None
            continue
        c = _counts(t, width)[: int(span // width)]  # whole windows only: the last one is cut short
        mean = float(c.mean())
        out[name] = {
            "peak_to_mean": round(float(c.max()) / mean, 3) if mean > 0 else None,
            "index_of_dispersion": round(float(c.var()) / mean, 3) if mean > 0 else None,
            "peak_rps": round(float(c.max()) / width, 4),
        }
    return out


def hourly(trace: Trace) -> tuple[list[float], float, str]:
    """Mean requests/s per hour of the day (UTC where the trace's times are absolute, else hours since its start),
    the busiest clock hour's rate, and the basis of the hours."""
    t = trace.t
    if trace.start is not None:
        clock = (t + trace.start) / 3600.0
        basis = "UTC hour of day"
    else:
        clock = t / 3600.0
        basis = "hours since the trace's start (its times are relative)"
    hour_index = np.floor(clock).astype(np.int64)
    first = int(hour_index[0])
    per_hour = np.bincount(hour_index - first)
    span_h = max(float(t[-1]) / 3600.0, 1e-9)
    if float(t[-1]) <= 0:
        busiest = 0.0  # every request at one instant: the trace gives no rate
    elif span_h < 1.0:
        # less than an hour: its rate over its span stands for its hour
        busiest = (trace.n - 1) / float(t[-1])
    else:
        busiest = float(per_hour.max()) / 3600.0
    hod = (np.arange(per_hour.size) + first) % 24
    sums = np.bincount(hod, weights=per_hour, minlength=24)
    days = np.bincount(hod, minlength=24)
    rate = [float(s) / (d * 3600.0) if d else 0.0 for s, d in zip(sums, days, strict=True)]
    return rate, busiest, basis


def reuse(trace: Trace) -> dict[str, Any]:
    """Prefix reuse: the share of prompt tokens a prefix cache already held (leading blocks seen before), the
    share of requests with any hit, and, from hash_ids, the share of prompt blocks seen before anywhere."""
    prompt = int(trace.inp.sum())
    hits = int(trace.hit.sum())
    out: dict[str, Any] = {
        "source": trace.reuse_source,
        "prefix_hit_share": round(hits / prompt, 4) if prompt else 0.0,
        "requests_with_hit_share": round(float((trace.hit > 0).mean()), 4),
        "median_hit_tokens": int(np.median(trace.hit)) if trace.n else 0,
    }
    if trace.blocks_total:
        out["blocks_seen_share"] = round(trace.blocks_seen / trace.blocks_total, 4)
    return out


def sessions(trace: Trace) -> dict[str, Any] | None:
    """Multi-turn sessions, where the trace names them: how many, turns per session, the share of requests that
    follow an earlier turn, and the time between turns."""
    s = trace.session
    named = s != 0
    if not named.any():
        return None
    ids, inverse, turns = np.unique(s[named], return_inverse=True, return_counts=True)
    t = trace.t[named]
    order = np.lexsort((t, inverse))
    gaps = np.diff(t[order])
    same = inverse[order][1:] == inverse[order][:-1]
    between = gaps[same]
    return {
        "sessions": int(ids.size),
        "turns_mean": round(float(turns.mean()), 2),
        "turns_p95": round(float(np.percentile(turns, 95)), 1) if ids.size >= needed("p95") else None,
        "follow_up_share": round(float(same.sum()) / max(1, int(named.sum())), 4),
        "gap_between_turns_s_median": round(float(np.median(between)), 2) if between.size else None,
    }


def samples(trace: Trace, limit: int = MAX_SAMPLES) -> tuple[list[int], list[int]]:
    """Joint (input, output) samples, evenly strided over the trace (all of them when fewer than `limit`)."""
    step = max(1, math.ceil(trace.n / limit))
    return trace.inp[::step].tolist(), trace.out[::step].tolist()


def summarize(trace: Trace) -> dict[str, Any]:
    """Every figure `sizing workload --trace` shows (and --json prints), from counts and times only."""
    rate, busiest, basis = hourly(trace)
    span = trace.span_s
    ins, outs = trace.inp, trace.out
    short = [q for q in LENGTH_PERCENTILES if trace.n < needed(q)]
    corr = None
    if trace.n > 2 and ins.std() > 0 and outs.std() > 0:
        corr = round(float(np.corrcoef(np.log(ins), np.log(outs))[0, 1]), 3)
    out: dict[str, Any] = {
        "source": trace.source,
        "format": trace.format,
        "digest": trace.digest,
        "requests": trace.n,
        "model": trace.model,
        "models": trace.models,
        "span_s": round(span, 3),
        "start": trace.start,
        "mean_rps": round(trace.n / span, 4) if span > 0 else None,
        "busiest_hour_rps": round(busiest, 4),
        "hourly_rps": [round(x, 4) for x in rate],
        "hours": basis,
        "burstiness": burstiness(trace.t),
        "input_tokens": _lengths(ins),
        "output_tokens": _lengths(outs),
        "input_output_log_correlation": corr,
        "prefix_reuse": reuse(trace),
        "sessions": sessions(trace),
        "estimated_counts": trace.estimated,
        "notes": list(trace.notes),
    }
    if short:
        out["notes"].append(
            f"too few requests for {', '.join(short)} ({trace.n:,} in the trace; "
            + ", ".join(f"{q} needs {needed(q):,}" for q in short)
            + "): those percentiles of the lengths are not given"
        )
    return out
