"""A measured configuration answered from its measurement (`basis: measured`).

The adopted profile carries a table of measured configurations: per run and candidate, the model, accelerator,
performance-deciding ServingConfig (`sizing.base.serving_config.serving_key`), the token shape drawn (mean prompt and output tokens)
and the measured closed-loop levels. An estimate of the same model, accelerator and ServingConfig whose token
shape is within `MAX_TOKEN_DISTANCE` of a measured one, at a concurrency within the measured levels, is the
measured figures interpolated between the two levels around it (linear in log concurrency). The newest such
measurement answers. Anything else is the (calibrated or modelled) prediction.

The planner asks the same match (`matches`) of every replica it sizes, and takes the replica's SLO capacity from
the measured levels: `slo_edge` (where the SLO's edge lies on them), `at_throughput` (the measured figures at a
rate) and `conservative_rate` (the lower of the measured closed-loop edge and the open-loop edge of the estimator
rescaled to the measurement); `sizing.plan.measured` does the simulation part, docs/learning.md section 4 says why.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

#: Token shapes closer than this (|log ratio| of the mean prompt and of the mean output length, the larger of the
#: two) count as the same shape: 20% (assumed: a fifth more tokens moves prefill time and KV use by about as much
#: as a level of the measured sweep is noisy, ~5-10% between repeated Locust runs of one level).
MAX_TOKEN_DISTANCE = math.log(1.2)
#: Measured configurations kept in a profile (newest first): bounds the object estimators load.
MAX_CONFIGURATIONS = 500
LATENCIES = ("ttft_ms", "tpot_ms", "e2e_s")
#: Requests simulated per re-simulated measured level: the planner's operating-point figure
#: (plan.capacity.REPORT_REQUESTS) and, for a closed loop, at least this many rounds of its users so a steady state
#: exists (perf.predict.ROUNDS). The run's merge, the level store and the planner's measured capacity share them.
LEVEL_REQUESTS = 1000
LEVEL_ROUNDS = 4
RATES = ("output_tokens_per_s", "requests_per_s")


def table(levels: list[Any]) -> list[dict[str, Any]]:
    """The measured-configuration table of a profile from measured level items (`levels.MeasuredLevel`)."""
    groups: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for lv in levels:
        groups[(lv.run_id, lv.candidate_id)].append(lv)
    out = []
    for (run_id, cid), lvs in groups.items():
        first = lvs[0]
        out.append(
            {
                "run_id": run_id,
                "candidate_id": cid,
                "recorded_at": max(lv.recorded_at for lv in lvs),
                "model": first.model,
                "accelerator": first.accelerator,
                "family": first.family,
                "instance_type": first.instance_type,
                "engine": first.engine,
                "engine_version": first.engine_version,
                "tensor_parallel": first.tensor_parallel,
                "quantization": first.quantization,
                "serving_key": first.serving_key,
                "input_tokens": round(sum(lv.input_tokens for lv in lvs) / len(lvs), 2),
                "output_tokens": round(sum(lv.output_tokens for lv in lvs) / len(lvs), 2),
                "shared_prefix_tokens": first.shared_prefix_tokens,
                "levels": [
                    {"concurrency": lv.level, **{k: lv.measured.get(k) for k in (*LATENCIES, *RATES)}}
                    for lv in sorted(lvs, key=lambda x: x.level)
                ],
            }
        )
    out.sort(key=lambda c: c["recorded_at"], reverse=True)
    return out[:MAX_CONFIGURATIONS]


def token_distance(a_in: float, a_out: float, b_in: float, b_out: float) -> float:
    return max(abs(math.log(a_in / b_in)), abs(math.log(a_out / b_out)))


def prefix_distance(a: float, b: float) -> float:
    """How far apart two shared prefixes are, on the token distance's scale: none and some are apart (a prefix
    cache serves one and not the other)."""
    if a <= 0 or b <= 0:
        return 0.0 if a <= 0 and b <= 0 else math.inf
    return abs(math.log(a / b))


def _mix(a: Any, b: Any, w: float) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _mix(a.get(k), b.get(k), w) for k in a}
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + (b - a) * w
    return a if w < 0.5 else b


def interpolate(levels: list[dict[str, Any]], concurrency: float) -> tuple[dict[str, Any], list[int]] | None:
    """The figures at `concurrency` from the measured levels around it (None outside the measured range)."""
    pts = sorted(levels, key=lambda lv: lv["concurrency"])
    if not pts or not pts[0]["concurrency"] <= concurrency <= pts[-1]["concurrency"]:
        return None
    for lo, hi in zip(pts, pts[1:] + pts[-1:], strict=True):
        if lo["concurrency"] == concurrency:
            return {k: lo.get(k) for k in (*LATENCIES, *RATES)}, [lo["concurrency"]]
        if lo["concurrency"] < concurrency < hi["concurrency"]:
            w = math.log(concurrency / lo["concurrency"]) / math.log(hi["concurrency"] / lo["concurrency"])
            return (
                {k: _mix(lo.get(k), hi.get(k), w) for k in (*LATENCIES, *RATES)},
                [lo["concurrency"], hi["concurrency"]],
            )
    return None


def matches(
    data: dict[str, Any] | None,
    *,
    model: str,
    accelerator: str,
    serving: dict[str, Any],
    input_tokens: float,
    output_tokens: float,
    shared_prefix_tokens: float = 0,
) -> Iterator[tuple[dict[str, Any], float]]:
    """The measured configurations of `data` (newest first) of this model, accelerator and performance-deciding
    ServingConfig whose token shape is within MAX_TOKEN_DISTANCE, with that distance: what `sizing predict` and
    the planner both ask before answering from a measurement. Where the configuration caches prefixes, the
    prefix every prompt shares is part of the shape (a measurement's levels state the one they sent; those
    recorded before it was stated sent none)."""
    from sizing.base.serving_config import serving_key

    if not data:
        return
    key = serving_key(serving)
    for conf in data.get("measured") or []:
        if (conf.get("model"), conf.get("accelerator"), conf.get("serving_key")) != (model, accelerator, key):
            continue
        dist = token_distance(input_tokens, output_tokens, conf["input_tokens"], conf["output_tokens"])
        if serving.get("enable_prefix_caching"):
            dist = max(dist, prefix_distance(shared_prefix_tokens, conf.get("shared_prefix_tokens") or 0))
        if dist <= MAX_TOKEN_DISTANCE:
            yield conf, dist


def describe(conf: dict[str, Any], dist: float, used: list[int]) -> dict[str, Any]:
    """The `measurement` block of an answer: which run, candidate and levels, the token shape and its distance."""
    return {
        "run_id": conf["run_id"],
        "candidate_id": conf["candidate_id"],
        "recorded_at": conf["recorded_at"],
        "engine_version": conf.get("engine_version"),
        "levels": used,
        "token_shape": {"input_tokens": conf["input_tokens"], "output_tokens": conf["output_tokens"]},
        "token_distance": round(dist, 4),
    }


def answer(
    data: dict[str, Any] | None,
    *,
    model: str,
    accelerator: str,
    serving: dict[str, Any],
    input_tokens: float,
    output_tokens: float,
    concurrency: float,
    shared_prefix_tokens: float = 0,
) -> dict[str, Any] | None:
    """The measured figures of this configuration at this load, or None (see the module docstring)."""
    for conf, dist in matches(
        data,
        model=model,
        accelerator=accelerator,
        serving=serving,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        shared_prefix_tokens=shared_prefix_tokens,
    ):
        got = interpolate(conf["levels"], concurrency)
        if got is None:
            continue
        figures, used = got
        return {"figures": figures, **describe(conf, dist, used)}
    return None


# --- the planner: a replica's SLO capacity from the measured levels --------------------------------------------
#: The percentile read when the measurement does not state the one an SLO names (p90: the measured levels keep
#: p50/p95/p99), the stricter one -- as the planner does with the simulator's figures (`plan.capacity`).
FALLBACK_PERCENTILE = "p95"
NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "e2e"}
#: The statistics a measured level keeps per latency metric (`levels.STATS`).
KEPT = ("mean", "p50", "p95", "p99")


def measured_value(figures: dict[str, Any], metric: str, pct: str) -> float | None:
    """A latency percentile of measured (or interpolated) figures; None where the measurement lacks it."""
    stats = figures.get(metric)
    if not isinstance(stats, dict):
        return None
    # a percentile the levels do not keep (p90) reads the stricter p95; one they keep but lack is missing
    v = stats.get(pct if pct in KEPT else FALLBACK_PERCENTILE)
    if not isinstance(v, int | float) or math.isnan(v):
        return None
    return float(v)


@dataclass(frozen=True)
class Edge:
    """Where the SLO's edge lies on a configuration's measured closed-loop levels.

    `status`: `inside` (between two measured levels: `concurrency`, `requests_per_s` and `figures` there, found
    in log concurrency as `interpolate` mixes the levels), `all_meet` (every level meets the SLO: the edge lies
    above the measured range), `none_meet` (even the lowest level misses it: below the range) or `incomplete`
    (the measurement lacks a percentile an SLO names). `reason` says it in words."""

    status: Literal["inside", "all_meet", "none_meet", "incomplete"]
    reason: str
    concurrency: float | None = None
    requests_per_s: float | None = None
    figures: dict[str, Any] | None = None
    #: the two levels around the edge (their concurrency)
    levels: tuple[int, ...] = ()
    #: the SLO target that meets its limit at the edge ("e2e_s.p95")
    binding: str | None = None


def _misses(
    figures: dict[str, Any], targets: list[tuple[str, str, float]]
) -> tuple[list[tuple[str, str, float, float]], list[str]]:
    missed, lacking = [], []
    for metric, pct, limit in targets:
        v = measured_value(figures, metric, pct)
        if v is None:
            lacking.append(f"{NAMES.get(metric, metric)} {pct}")
        elif v > limit:
            missed.append((metric, pct, v, limit))
    return missed, lacking


def slo_edge(levels: list[dict[str, Any]], targets: list[tuple[str, str, float]]) -> Edge:
    """The highest load of the measured levels at which every SLO target (metric, percentile, limit) is met by
    the measured percentiles: between the last level that meets them all and the first that misses one, where
    the first target to miss reaches its limit with every figure linear in log concurrency (`interpolate`).
    Levels are read from the lowest up and the first miss ends the search: a level above it that meets the SLO
    again is noise, not capacity."""
    pts = sorted(levels, key=lambda lv: lv["concurrency"])
    if not pts:
        return Edge("incomplete", "no measured level")
    for i, lv in enumerate(pts):
        missed, lacking = _misses(lv, targets)
        if lacking:
            return Edge("incomplete", f"the measurement states no {', '.join(lacking)}")
        if not missed:
            continue
        if i == 0:
            metric, pct, v, limit = missed[0]
            return Edge(
                "none_meet",
                f"even the lowest measured level ({lv['concurrency']} in flight) misses"
                f" {NAMES.get(metric, metric)} {pct} ({v:.4g} > {limit:.4g}): the SLO edge lies below the measured"
                " range",
            )
        lo = pts[i - 1]
        crossings = []
        for metric, pct, _v, limit in missed:
            a, b = measured_value(lo, metric, pct), measured_value(lv, metric, pct)
            assert a is not None and b is not None  # both levels state it (checked above)
            crossings.append(((limit - a) / (b - a), f"{metric}.{pct}"))
        w, binding = min(crossings)
        c = lo["concurrency"] * (lv["concurrency"] / lo["concurrency"]) ** w
        got = interpolate(pts, c)
        assert got is not None
        figures = got[0]
        rps = figures.get("requests_per_s")
        if not isinstance(rps, int | float) or rps <= 0:
            return Edge("incomplete", "the measurement states no requests per second")
        return Edge(
            "inside",
            f"SLO edge at {c:.1f} in flight, {rps:.3g} req/s closed-loop ({binding} at its limit), between"
            f" measured levels {lo['concurrency']} and {lv['concurrency']}",
            concurrency=c,
            requests_per_s=float(rps),
            figures=figures,
            levels=(int(lo["concurrency"]), int(lv["concurrency"])),
            binding=binding,
        )
    return Edge(
        "all_meet",
        f"every measured level (up to {pts[-1]['concurrency']} in flight) meets the SLO: the SLO edge lies above"
        " the measured range",
    )


def at_throughput(levels: list[dict[str, Any]], rps: float) -> tuple[dict[str, Any], float, list[int], bool]:
    """The measured figures where the closed loop served `rps` requests/s (the concurrency found in log
    concurrency between the two levels around it), that concurrency, the levels used, and whether `rps` lies
    below the lowest level -- then that level's figures, an upper bound (latency only grows with load), and the
    concurrency by Little's law on its mean e2e."""
    pts = sorted(levels, key=lambda lv: lv["concurrency"])
    first = pts[0]
    low = float(first.get("requests_per_s") or 0.0)
    if rps <= low:
        e2e = measured_value(first, "e2e_s", "mean") or 0.0
        figures = {k: first.get(k) for k in (*LATENCIES, *RATES)}
        return figures, rps * e2e, [first["concurrency"]], True
    for lo, hi in pairwise(pts):
        a, b = float(lo.get("requests_per_s") or 0.0), float(hi.get("requests_per_s") or 0.0)
        if a <= rps <= b and b > a:
            w = (rps - a) / (b - a)
            c = lo["concurrency"] * (hi["concurrency"] / lo["concurrency"]) ** w
            got = interpolate(pts, c)
            assert got is not None
            return got[0], c, got[1], False
    # above every level's throughput (not reached by the planner: its capacity is at most the measured edge)
    last = pts[-1]
    return (
        {k: last.get(k) for k in (*LATENCIES, *RATES)},
        float(last["concurrency"]),
        [last["concurrency"]],
        False,
    )


def conservative_rate(edge_rps: float, open_loop_rps: float | None) -> tuple[float, str]:
    """A replica's SLO capacity from a measured closed-loop edge: the lower of that edge and the open-loop edge of
    the estimator rescaled to the measurement (None: it found none), and which of the two decided.

    A closed-loop level at concurrency c serving X req/s carries the mean load of an open-loop rate X, but
    Poisson arrivals bunch: the queue, and so the tail latency, at rate X is worse than the closed loop's, most
    of all for TTFT. The measured edge alone would over-state the capacity wherever that matters; the
    rescaled model simulates Poisson arrivals on a replica timed like the measured one."""
    if open_loop_rps is None or open_loop_rps <= 0:
        return edge_rps, "measured edge"
    if open_loop_rps < edge_rps:
        return open_loop_rps, "open-loop edge of the rescaled model"
    return edge_rps, "measured edge"
