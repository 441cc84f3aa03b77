"""Capacity under SLO: the highest per-replica request rate at which every SLO percentile holds.

Found by search over the continuous-batching simulator (Poisson arrivals, the workload's token distributions):
a check at one user first (an SLO that fails with no queueing fails at any load), then bisection between zero
and the roofline's saturated rate, which no replica can exceed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sizing.workload import SLO, WorkloadModel

#: Requests simulated per probe. p99 of 800 samples rests on 8 requests beyond it: enough to rank and size,
#: and the bisection's own resolution (1/2^BISECTION_STEPS of the saturated rate) is coarser than that noise.
PROBE_REQUESTS = 500
#: Bisection steps between 0 and the saturated rate: 2^-5 = 3% of the saturated rate, finer than the
#: estimator's own error (see benchmarks/accuracy.py) and than the 20% default headroom.
BISECTION_STEPS = 5
#: Requests simulated for the reported prediction at the operating point: p99 rests on 10 requests.
REPORT_REQUESTS = 1000
#: Percentile used when the simulator does not report the one an SLO names (p90 -> p95, the stricter one).
FALLBACK_PERCENTILE = "p95"

UNITS = {"ttft_ms": ("TTFT", "ms", 1.0), "tpot_ms": ("TPOT", "ms", 1.0), "e2e_s": ("e2e", "s", 1.0)}


def stat(sim: Any, metric: str, pct: str) -> float:
    stats = getattr(sim, metric)
    value = getattr(stats, pct, None)
    if value is None:
        value = getattr(stats, FALLBACK_PERCENTILE)
    return float(value)


def violations(sim: Any, slo: SLO) -> list[tuple[str, str, float, float]]:
    """(metric, percentile, achieved, limit) for every SLO target the simulation misses."""
    out = []
    for metric, pct, limit in slo.targets():
        v = stat(sim, metric, pct)
        if v > limit:
            out.append((metric, pct, v, limit))
    return out


def describe_violation(metric: str, pct: str, value: float, limit: float) -> str:
    name, unit, _ = UNITS[metric]
    fmt = (
        (lambda x: f"{x:.2f} s")
        if unit == "s"
        else (lambda x: f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.0f} ms")
    )
    return f"{name} {pct} {fmt(value)} > {fmt(limit)}"


@dataclass
class Capacity:
    rate_rps: float  # highest rate per replica meeting every SLO target (before headroom)
    feasible: bool
    reason: str = ""
    probes: int = 0
    closest: dict[str, float] | None = None  # best achieved figure per violated target (for diagnosis)


def max_rate_under_slo(step: Any, wm: WorkloadModel, saturated_rps: float, seed: int = 0) -> Capacity:
    """Bisection on the Poisson rate per replica; the simulator is deterministic for a seed."""
    from sizing.perf.simulator import ClosedLoop, OpenLoop, simulate

    slo = wm.slo
    single = simulate(
        step, ClosedLoop(1), wm.input_tokens, wm.output_tokens, n_requests=PROBE_REQUESTS, seed=seed
    )
    bad = violations(single, slo)
    if bad:
        reasons = "; ".join(describe_violation(*v) for v in bad)
        closest = {f"{m}.{p}": v for m, p, v, _ in bad}
        return Capacity(0.0, False, f"{reasons} even at 1 user", 1, closest)
    lo, hi = 0.0, max(saturated_rps, 1e-6)
    probes = 1
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        sim = simulate(
            step, OpenLoop(mid), wm.input_tokens, wm.output_tokens, n_requests=PROBE_REQUESTS, seed=seed
        )
        probes += 1
        if violations(sim, slo):
            hi = mid
        else:
            lo = mid
    if lo <= 0:
        # passes at one user, fails at every probed rate: capacity is below the first probe; one user's worth
        lo = 1.0 / max(single.e2e_s.mean, 1e-3) * 0.5
    return Capacity(lo, True, "", probes)


def predict_at(step: Any, wm: WorkloadModel, rate_rps: float, seed: int = 0) -> Any:
    from sizing.perf.simulator import OpenLoop, simulate

    return simulate(
        step, OpenLoop(rate_rps), wm.input_tokens, wm.output_tokens, n_requests=REPORT_REQUESTS, seed=seed
    )
