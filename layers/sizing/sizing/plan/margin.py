"""The SLO check and its allowance for the estimator's own error: the figures a simulated run is checked at
(`stat`, `violations`), and the `Margin` a replica's latencies are scaled by and its capacity cut to at a requested
confidence (`margin`), resolved for each run at the amplification its queue gives a step error (`margin_at`;
docs/estimator.md, "Sizing at a confidence")."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sizing.perf.amplification import AMPLIFIED_METRICS, STEP_SCALE, amplifications
from sizing.perf.calibration import amplification_exponent, conservative_ratio, error_rows
from sizing.plan.regime import RegimeReading, ttft_reading
from sizing.results import Allowance, factors_read
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO

#: Percentile used when the simulator does not report the one an SLO names (p90 -> p95, the stricter one).
FALLBACK_PERCENTILE = "p95"

UNITS = {"ttft_ms": ("TTFT", "ms", 1.0), "tpot_ms": ("TPOT", "ms", 1.0), "e2e_s": ("e2e", "s", 1.0)}


def stat(sim: Any, metric: str, pct: str) -> float:
    stats = getattr(sim, metric)
    value = getattr(stats, pct, None)
    if value is None:
        value = getattr(stats, FALLBACK_PERCENTILE)
    return float(value)


#: SLO metric -> the cross-validated metrics whose error scales it (`Margin`). e2e has no held-out rows of its own:
#: it is TTFT plus TPOT per further token, so its error lies between theirs (`Margin.at` weighs them by the run's
#: TTFT share of e2e; before a run is read, the larger factor bounds it).
MARGIN_METRICS = {"ttft_ms": ("ttft",), "tpot_ms": ("tpot",), "e2e_s": ("ttft", "tpot")}
#: The SLO metrics' names as the reasoning writes them.
MARGIN_NAMES = {metric: name for metric, (name, _unit, _scale) in UNITS.items()}


@dataclass(frozen=True)
class PerUnit:
    """One latency's allowance for the estimator's error per unit of the queue's amplification of a step error
    (`sizing.perf.amplification`): measured/predicted at the requested quantile of the held-out ratios per unit
    (`conservative_ratio(per_unit=True)`), which a prediction amplified a times reads to the power a^`exponent`,
    as its stated interval does (`sizing.perf.calibration.stated_interval`). TTFT's is read by regime where a
    `RegimeReading` is given."""

    metric: str
    factor: float
    exponent: float
    regime: RegimeReading | None = None

    def at(self, amplification: float) -> tuple[float, str | None]:
        """The factor at `amplification` (at least 1), and the TTFT regime it was read from."""
        power = max(1.0, amplification) ** self.exponent
        if self.regime is not None:
            return self.regime.factor(power)
        return max(1.0, self.factor) ** power, None


@dataclass(frozen=True)
class Margin:
    """How the planner allows for the estimator's own error on one replica: the factors predicted latencies are
    multiplied by before the SLO check (`violations`), the share of the SLO capacity used at peak, and why.

    Without `slo.confidence`, latencies are checked as predicted and a fixed share of the capacity is kept free
    (`headroom`). With it, each latency is scaled up by measured/predicted at the requested quantile of the
    estimator's leave-one-harness-out error for the replica's kind and model class (the rows its stated intervals
    rest on: `sizing.perf.calibration.band_for`), per unit of the queue's amplification (`per_unit`) and raised to
    the amplification each run reads (`at`), and the capacity down by predicted/measured saturated throughput at
    that quantile (`sizing.perf.calibration.conservative_ratio`). No factor goes the optimistic way: where the
    estimator is pessimistic at that quantile the prediction stands as it is. `latency`: the factors by SLO metric,
    as a run read them once resolved (`at`), at amplification 1 (e2e the larger of TTFT's and TPOT's) before."""

    latency: tuple[tuple[str, float], ...] = ()
    usable: float = 1.0
    reasoning: str = ""
    per_unit: tuple[PerUnit, ...] = ()
    #: the quantile asked (`slo.confidence`; None: the fixed load headroom)
    confidence: float | None = None
    #: the amplification by latency a run resolved it at (`at`; empty before)
    amplification: tuple[tuple[str, float], ...] = ()

    def factor(self, metric: str) -> float:
        return dict(self.latency).get(metric, 1.0)

    @property
    def key(self) -> tuple[Any, ...]:
        """What a memoised check under this margin depends on."""
        return (self.latency, self.per_unit)

    def at(self, sim: Any, amplification: dict[str, float] | None = None) -> Margin:
        """This margin resolved for one run `sim`: each latency's per-unit factor raised to the amplification the
        run reads (`queue_amplification`; 1 where none is given: one user, no queue), and e2e's factor its TTFT
        and TPOT factors weighed by the run's mean TTFT share of its mean e2e (their errors taken as moving
        together, the pessimistic reading of a sum at a quantile). The reasoning gains the factors read."""
        if not self.per_unit:
            return self
        amp = amplification or {}
        base = {u.metric: u.at(amp.get(u.metric, 1.0))[0] for u in self.per_unit}
        latency = dict(_by_slo_metric(base))
        share = _ttft_share(sim)
        if share is not None and "ttft" in base and "tpot" in base:
            latency["e2e_s"] = round(share * base["ttft"] + (1 - share) * base["tpot"], 4)
        resolved = tuple(latency.items())
        amplified = tuple((u.metric, round(max(1.0, amp.get(u.metric, 1.0)), 3)) for u in self.per_unit)
        return dataclasses.replace(
            self,
            latency=resolved,
            amplification=amplified,
            reasoning=f"{self.reasoning}; at this load {factors_read(latency, dict(amplified))}",
        )

    def allowance(self) -> Allowance | None:
        """The typed record of what a sizing at a confidence read, once resolved for a run (`at`); None with the
        fixed headroom or before a run was read."""
        if self.confidence is None or not self.amplification:
            return None
        return Allowance(
            confidence=self.confidence,
            latency=dict(self.latency),
            amplification=dict(self.amplification),
            capacity=self.usable,
        )


def _by_slo_metric(base: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """Factors by SLO metric from factors by cross-validated metric, e2e the larger of its parts'."""
    return tuple(
        (metric, round(max([1.0, *(base.get(m, 1.0) for m in of)]), 4))
        for metric, of in MARGIN_METRICS.items()
    )


def _ttft_share(sim: Any) -> float | None:
    """A run's mean TTFT as a share of its mean e2e (None where either is missing)."""
    try:
        ttft_s, e2e_s = float(sim.ttft_ms.mean) / 1000.0, float(sim.e2e_s.mean)
    except (AttributeError, TypeError, ValueError):
        return None
    if not (math.isfinite(ttft_s) and math.isfinite(e2e_s)) or e2e_s <= 0:
        return None
    return min(1.0, max(0.0, ttft_s / e2e_s))


def queue_amplification(sim: Any, faster: Any) -> dict[str, float]:
    """The amplification of a run's mean TTFT and TPOT (`sizing.perf.amplification`) from the run `sim` at a rate
    and the same requests at `STEP_SCALE` times that rate, `faster`: an open loop whose every step and per-request
    cost is k times slower is the same run k times slower at k times the rate, so the second run is the first with
    slower steps, time-scaled (the simulator draws the same arrivals and lengths, scaled, for a seed)."""
    return amplifications(
        {"ttft": float(sim.ttft_ms.mean), "tpot": float(sim.tpot_ms.mean)},
        {"ttft": STEP_SCALE * float(faster.ttft_ms.mean), "tpot": STEP_SCALE * float(faster.tpot_ms.mean)},
    )


@functools.cache
def _error_ratios(
    family: str, engine: str, confidence: float, moe: bool, per_unit: bool = False
) -> dict[str, float | None]:
    return {
        m: conservative_ratio(family, engine, m, confidence, moe=moe, per_unit=per_unit and m != "throughput")
        for m in ("ttft", "tpot", "throughput")
    }


@functools.cache
def _error_basis(family: str, engine: str, moe: bool) -> str:
    return error_rows(family, engine, "tpot", moe=moe)


def margin(step: Any, slo: SLO, headroom: float, wm: WorkloadModel | None = None) -> Margin:
    """The allowance for estimator error on a replica of `step` (see `Margin`); with the workload `wm`, TTFT's is
    its regime's at the SLO's TTFT limit (`ttft_factor_at`), as the stated intervals read the error."""
    if slo.confidence is None:
        return Margin(usable=1 - headroom, reasoning=f"fixed {headroom:.0%} load headroom")
    prof = step.profile
    moe = step.mixture_of_experts
    whose = f"{prof.family} x {prof.engine}" + (" on MoE models" if moe else "")
    confidence = float(slo.confidence)
    unit = _error_ratios(prof.family, prof.engine, confidence, moe, per_unit=True)
    rows = _error_basis(prof.family, prof.engine, moe)
    if rows:
        whose += f" ({rows})"
    reading = ttft_reading(step, slo, wm, per_unit=True)
    per_unit = tuple(
        PerUnit(
            m,
            round(max(1.0, 1 / r), 4),
            round(amplification_exponent(prof.family, m), 4),
            reading if m == "ttft" else None,
        )
        for m in AMPLIFIED_METRICS
        if (r := unit.get(m))
    )
    base = {u.metric: u.at(1.0)[0] for u in per_unit}
    latency = _by_slo_metric(base)
    thr = _error_ratios(prof.family, prof.engine, confidence, moe).get("throughput") or 1.0
    usable = round(min(1.0, 1 / thr), 4)
    pct = f"{100 * confidence:g}"
    factors = ", ".join(f"{MARGIN_NAMES[u.metric + '_ms']} x{base[u.metric]:.2f}" for u in per_unit)
    powers = ", ".join(f"{MARGIN_NAMES[u.metric + '_ms']} {u.exponent:.2f}" for u in per_unit)
    if reading is not None and "ttft" in base:
        factors += f" (TTFT's from {per_unit[0].at(1.0)[1]} TTFTs' error, the regime of a TTFT at its limit)"
    return Margin(
        latency=latency,
        usable=usable,
        per_unit=per_unit,
        confidence=confidence,
        reasoning=f"confidence {confidence:g}: SLO holds at the {pct}th percentile of the estimator's"
        f" held-out error (leave one harness out) for {whose}, instead of a fixed load headroom: predicted"
        f" latencies {factors} where a step error passes through as it is, raised to the power amplification^g"
        f" where the queue multiplies it (g: {powers}); e2e by its TTFT and TPOT shares; capacity x{usable:.2f}"
        f" for saturated throughput over-predicted",
    )


def margin_at(scale: Margin, sim: Any, faster: Callable[[], Any]) -> Margin:
    """`scale` resolved for the open-loop run `sim` (`Margin.at`), the queue's amplification read against
    `faster()`, the same requests at `STEP_SCALE` times the rate (`queue_amplification`), run only where the
    margin reads an amplification (`slo.confidence`). Every run the capacity search reads is resolved so, the runs
    its SLO check would settle without it too: the score that guides the search then moves smoothly with the
    confidence, and a higher confidence does not send the search down another path (settled at the amplification's
    bounds instead, the 8B chat example's capacity at 0.55 came out above its capacity at 0.5)."""
    if not scale.per_unit:
        return scale
    return scale.at(sim, queue_amplification(sim, faster()))


def violations(sim: Any, slo: SLO, scale: Margin | None = None) -> list[tuple[str, str, float, float]]:
    """(metric, percentile, achieved, limit) for every SLO target the simulation misses, the achieved figure
    multiplied by `scale`'s factor for its metric (`margin`)."""
    out = []
    for metric, pct, limit in slo.targets():
        v = stat(sim, metric, pct) * (scale.factor(metric) if scale else 1.0)
        if v > limit:
            out.append((metric, pct, v, limit))
    return out


def describe_violation(metric: str, pct: str, value: float, limit: float) -> str:
    name, unit, _ = UNITS[metric]
    fmt: Callable[[float], str] = (
        (lambda x: f"{x:.2f} s")
        if unit == "s"
        else (lambda x: f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.0f} ms")
    )
    return f"{name} {pct} {fmt(value)} > {fmt(limit)}"
