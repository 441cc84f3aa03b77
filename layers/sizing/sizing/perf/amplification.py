"""How much a prediction amplifies an error in its step time.

A step-time model fitted on some batches errs by a few tens of percent at others (docs/engine.md, "Queueing on the
engine's own arrivals": a profile fitted at 1-4 streams read decode steps of 8-16 sequences 15-20% fast). At low load
a latency errs as its steps do. Under load the queue multiplies the error: a slower step holds more sequences, each
step then carries more of them, and every answer waits longer, so the same step error read TPOT 35-45% fast at half
to 0.8 of the engine's capacity. The amplification of a predicted latency is its elasticity to the step time: the
latency predicted with every fitted step factor `STEP_SCALE` times slower, over the latency predicted, in log units
per log unit of the scale -- 1 where a step error passes through as it is, more where the queue multiplies it.

The stated intervals read it (`sizing.perf.calibration.stated_interval`): the cross-validated errors of TTFT and
TPOT are divided (in log space) by the amplification each held-out prediction had, to the power `error_exponent`
says that kind's error grows with it, which puts the error of a prediction at low load and of one near saturation
on one scale, and a new prediction's interval is that band raised to its own amplification to the same power. Held
out by harness, the TPOTs of 39% of the CPU family's rows were amplified by more than 1.5x, and their median error
was twice that of the rest (0.19 against 0.09 in log units); the published GPU rows have no TPOT amplified that much
(docs/estimator.md, "Intervals that widen with the queue").
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence

from .profile import Profile

#: How much slower the step is made to read a prediction's elasticity: 10%, about the step models' own error on
#: the engine's steps (MdAPE 12-13% on a level's own steps, docs/engine.md), small enough that the queue's response
#: stays near its slope (a finite difference, not a second scenario).
STEP_SCALE = 1.1
#: The most a latency's error is taken to be amplified. Past it the level is at or beyond saturation, where a queue
#: grows for as long as the run lasts and a latency is the run's length, not the deployment's: the held-out rows
#: reach 13x there (a Poisson level at its capacity). A cap keeps an interval from stretching to nothing; at the cap
#: a 10% per-unit error already reads 2.1x either way.
MAX_AMPLIFICATION = 8.0
#: The metrics whose intervals read an amplification: the latencies. A throughput under Poisson arrivals is the
#: offered load (amplification 0) until the replica saturates, and a saturated throughput errs as the step does.
AMPLIFIED_METRICS = ("ttft", "tpot")
#: A held-out prediction counts as amplified above this: the rows that set how the error grows with amplification
#: are compared on either side of it.
AMPLIFIED_ABOVE = 1.5
#: Held-out predictions needed on each side of `AMPLIFIED_ABOVE` before a kind of accelerator states its own
#: `error_exponent` for a metric; with fewer, the median of the exponents the other kinds state for it (kinds differ
#: in their unamplified error by 4x, so their rows are not pooled); with none, 1. Six: the median of six rows rests
#: on its middle two, and the published GPU TTFTs have six amplified rows (the Neuron TTFTs eight).
MIN_EXPONENT_ROWS = 6


def slower_steps(profile: Profile, scale: float = STEP_SCALE) -> Profile:
    """`profile` with every fitted step factor `scale` times slower: compute and bandwidth efficiency divided by
    it, the per-step and per-sequence costs multiplied. The roofline's step time is linear in each of them, so every
    step of every shape takes `scale` times as long (the per-request cost, not a step, stays)."""
    return dataclasses.replace(
        profile,
        compute_eff=profile.compute_eff / scale,
        bandwidth_eff=profile.bandwidth_eff / scale,
        step_overhead_s=profile.step_overhead_s * scale,
        seq_overhead_s=profile.seq_overhead_s * scale,
    )


def amplification(predicted: float, with_slower_steps: float, scale: float = STEP_SCALE) -> float:
    """The amplification of a latency predicted as `predicted`, and as `with_slower_steps` with every step `scale`
    times slower: its elasticity to the step time, at least 1 (a latency never errs less than its steps: one that
    barely moves is mostly a fixed cost, whose error the band already holds) and at most `MAX_AMPLIFICATION`."""
    if not (predicted > 0 and with_slower_steps > 0) or not math.isfinite(with_slower_steps):
        return 1.0
    elasticity = math.log(with_slower_steps / predicted) / math.log(scale)
    return min(MAX_AMPLIFICATION, max(1.0, elasticity))


def error_exponent(rows: Sequence[tuple[float, float]]) -> float | None:
    """How a latency's held-out error grows with its amplification, from (amplification, predicted/measured) pairs:
    the exponent g with which the median absolute log error of the rows amplified above `AMPLIFIED_ABOVE` exceeds
    the rest's, against their median amplifications (error ~ amplification^g), between 0 (the error does not grow:
    it is not the step's) and 1 (all of it is the step's, multiplied). None with fewer than `MIN_EXPONENT_ROWS` rows
    on either side.

    Not all of an error is the step's: a TTFT's per-request cost, a lock-step loop's grouping or a source's own
    clock are not multiplied by the queue. Held out by harness, the CPU family's TPOT error grew as amplification^0.7
    and its TTFT's hardly at all (0.1); a band raised to the whole amplification stretched the CPU's loaded TTFTs
    to 6-12x wide, where they erred by 9%."""
    lo = [(a, abs(math.log(r))) for a, r in rows if a <= AMPLIFIED_ABOVE and r > 0]
    hi = [(a, abs(math.log(r))) for a, r in rows if a > AMPLIFIED_ABOVE and r > 0]
    if min(len(lo), len(hi)) < MIN_EXPONENT_ROWS:
        return None
    err_lo, err_hi = statistics.median(e for _a, e in lo), statistics.median(e for _a, e in hi)
    amp_lo, amp_hi = statistics.median(a for a, _e in lo), statistics.median(a for a, _e in hi)
    if err_lo <= 0 or err_hi <= 0 or amp_hi <= amp_lo:
        return None
    return min(1.0, max(0.0, math.log(err_hi / err_lo) / math.log(amp_hi / amp_lo)))


def amplifications(
    predicted: Mapping[str, float], with_slower_steps: Mapping[str, float]
) -> dict[str, float]:
    """`amplification` of each latency in both predictions (`AMPLIFIED_METRICS`), by metric name."""
    return {
        m: amplification(predicted[m], with_slower_steps[m])
        for m in AMPLIFIED_METRICS
        if m in predicted and m in with_slower_steps
    }


__all__ = [
    "AMPLIFIED_ABOVE",
    "AMPLIFIED_METRICS",
    "MAX_AMPLIFICATION",
    "MIN_EXPONENT_ROWS",
    "STEP_SCALE",
    "amplification",
    "amplifications",
    "error_exponent",
    "slower_steps",
]
