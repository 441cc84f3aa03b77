"""A calibration profile's efficiency factors: the parameters the step model runs with (`sizing.perf.step`), fitted
per (accelerator family, engine) by `sizing.perf.fit` and looked up by `sizing.perf.calibration`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Profile:
    """Calibrated efficiency factors of one (accelerator family, engine)."""

    compute_eff: float = 0.5
    bandwidth_eff: float = 0.7
    step_overhead_s: float = 0.004
    seq_overhead_s: float = 0.0
    family: str = "default"
    engine: str = "vllm"
    basis: str = "uncalibrated defaults (no calibration profile loaded)"
    version: str = "none"
    #: cross-validated median absolute percentage error per metric, when known
    expected_error: dict[str, Any] = field(default_factory=dict)
    #: time from a request's arrival to the scheduler seeing it, plus first-chunk streaming: API server,
    #: tokenisation, detokenisation (10-60 ms in the small-prompt TTFTs of the reference rows on H100)
    request_overhead_s: float = 0.02
    #: efficiency of a mixture-of-experts model relative to a dense one on the same engine and chip (routing,
    #: expert GEMMs on few tokens each, padding); multiplies both efficiencies for MoE models only. Neuron stacks
    #: of 2025 run MoE models ~2x slower than their dense-equivalent (M060 vs M066 on trn2)
    moe_eff: float = 1.0
    #: how much slower than its roofline the linear layers' phase runs where its compute and weight-streaming times
    #: are equal (the ridge): 0 is the roofline's hard max(compute, memory), a GEMM overlapping its weight reads with
    #: its math perfectly; 1 is their sum, no overlap at all. Between, the phase takes (c^p + m^p)^(1/p) with
    #: 2^(1/p) = 1 + ridge_slowdown (`ridge_exponent`, `sizing.perf.steptime.ridge`). Not fitted: the measured rows
    #: do not identify it (`benchmarks/ridge.py`; docs/estimator.md, "The linear phase near the ridge"), so the
    #: shipped profiles state none (0); a calibration entry that states one is used
    ridge_slowdown: float = 0.0

    @property
    def ridge_exponent(self) -> float:
        """The exponent p of the linear phase's composition of compute and memory (0 for the hard max)."""
        if self.ridge_slowdown <= 0.0:
            return 0.0
        return math.log(2.0) / math.log1p(min(self.ridge_slowdown, 1.0))

    def params(self) -> dict[str, float]:
        return {
            "compute_eff": self.compute_eff,
            "bandwidth_eff": self.bandwidth_eff,
            "step_overhead_s": self.step_overhead_s,
            "seq_overhead_s": self.seq_overhead_s,
            "request_overhead_s": self.request_overhead_s,
            "moe_eff": self.moe_eff,
            "ridge_slowdown": self.ridge_slowdown,
        }

    def stretched(self, prefill: float, decode: float) -> Profile:
        """This profile with prefill times `prefill` times and decode times `decode` times as long: the compute
        efficiency and the per-request cost for prefill, the bandwidth efficiency and the per-step and per-sequence
        costs for decode (the two time scales of a team correction, `sizing.learn.correction`)."""
        return replace(
            self,
            compute_eff=self.compute_eff / prefill,
            request_overhead_s=self.request_overhead_s * prefill,
            bandwidth_eff=self.bandwidth_eff / decode,
            step_overhead_s=self.step_overhead_s * decode,
            seq_overhead_s=self.seq_overhead_s * decode,
        )

    def with_step_factors(self, factors: Mapping[str, Any]) -> Profile:
        """This profile with a step correction's factors (`STEP_CORRECTION_FACTORS` that `factors` names) in place
        of its own."""
        vals: dict[str, Any] = {f: float(factors[f]) for f in STEP_CORRECTION_FACTORS if f in factors}
        return replace(self, **vals)


#: The step time's factors an engine's own steps are fitted for (`sizing.perf.stepfit`): compute and bandwidth
#: efficiency, the cost of a step and of each running sequence in it.
STEP_FACTORS = ("compute_eff", "bandwidth_eff", "step_overhead_s", "seq_overhead_s")
#: The factors a team's step correction replaces (`Profile.with_step_factors`, `sizing.learn.stepcorrection`): the
#: step time's and the per-request cost, read from first tokens at an idle engine.
STEP_CORRECTION_FACTORS = (*STEP_FACTORS, "request_overhead_s")


#: A plain roofline: peak FLOP/s and bandwidth, no overheads (the baseline the calibration is compared with).
ROOFLINE = Profile(
    1.0,
    1.0,
    0.0,
    0.0,
    "any",
    "any",
    "plain roofline (peak datasheet figures)",
    "roofline",
    request_overhead_s=0.0,
)


__all__ = ["ROOFLINE", "STEP_CORRECTION_FACTORS", "STEP_FACTORS", "Profile"]
