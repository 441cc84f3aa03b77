"""`slo.confidence` on TTFT by regime: the estimator's error a TTFT is scaled by is that of TTFTs of its regime
(`sizing.perf.calibration.TTFT_REGIMES`: the share of it that is the prompt's own prefill), read at the SLO's TTFT
limit, as the stated intervals read it (docs/estimator.md, "Sizing at a confidence")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sizing.perf.calibration import TTFT_REGIMES, conservative_ratio, prefill_share, ttft_regime
from sizing.perf.predict import roofline_prefill_ms
from sizing.perf.simulator import cached_share
from sizing.plan.memo import LRU
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO

#: Roofline prefills memoised per process, by deployment (configuration and memory fit: what the roofline reads) and
#: prompt: a workload's search asks once per hardware option it sizes (~200 of the catalog's), each probe again.
#: An entry is a float.
PREFILL_CACHE_SIZE = 1024
_prefills: LRU[float] = LRU(PREFILL_CACHE_SIZE)


@functools.cache
def _ttft_ratios(
    family: str, engine: str, confidence: float, moe: bool, per_unit: bool = False
) -> tuple[float | None, ...]:
    """`conservative_ratio` of TTFT per regime, in `TTFT_REGIMES`' order (`per_unit`: per unit of amplification)."""
    return tuple(
        conservative_ratio(family, engine, "ttft", confidence, moe=moe, regime=name, per_unit=per_unit)
        for name, _least in TTFT_REGIMES
    )


def _prefill_ms(step: Any, input_tokens: float, shared_prefix_tokens: int) -> float:
    """The roofline prefill of a workload's mean prompt on `step` (of the tokens its shared prefix leaves to
    prefill), as the TTFT regimes read it."""
    prompt = max(1, round(input_tokens))
    key = (step.cfg, step.fit, prompt, shared_prefix_tokens)
    known = _prefills.get(key)
    if known is None:
        known = roofline_prefill_ms(step, prompt - cached_share(step, shared_prefix_tokens, prompt))
        _prefills.put(key, known)
    return known


def ttft_factor_at(
    limit_ms: float, prefill_ms: float, compute_eff: float, factors: Sequence[float]
) -> tuple[float, str]:
    """The factor a TTFT checked against `limit_ms` is scaled by, and the regime it was read from: the regime of a
    TTFT at the limit (`prefill_share`; near the edge the check decides at, the TTFT is near its limit), whose
    factor (`factors`, in `TTFT_REGIMES`' order) scales it. A looser limit never leaves less room: past a regime's
    threshold, where the factor rises, it rises with the limit from the lighter regime's until it reaches its own,
    so limit / factor never falls as the limit grows (a stricter SLO never needs fewer replicas)."""
    regime = ttft_regime(prefill_share(limit_ms, prefill_ms, compute_eff)) or TTFT_REGIMES[-1][0]
    room = 0.0  # the most room (limit / factor) a looser-than-threshold limit of a lighter regime had
    for (name, least), factor in zip(TTFT_REGIMES, factors, strict=True):
        if name == regime:
            return (min(factor, limit_ms / room) if room else factor), name
        # the limit where this regime ends: its least share of prefill
        room = max(room, prefill_ms / (compute_eff * least) / factor) if least else room
    return factors[-1], regime


@dataclass(frozen=True)
class RegimeReading:
    """Where a TTFT checked against an SLO limit is read: the strictest TTFT limit, the workload's mean prompt's
    roofline prefill on the replica and the replica's compute efficiency (`ttft_factor_at`), with the factors per
    regime (`TTFT_REGIMES`' order) a TTFT is scaled by at one step error's size."""

    limit_ms: float
    prefill_ms: float
    compute_eff: float
    factors: tuple[float, ...]

    def factor(self, power: float = 1.0) -> tuple[float, str]:
        """TTFT's factor and its regime, every regime's factor raised to `power` first (a queue's amplification
        of the error, `sizing.plan.margin.Margin.at`): limit / factor still never falls as the limit grows."""
        return ttft_factor_at(
            self.limit_ms, self.prefill_ms, self.compute_eff, [f**power for f in self.factors]
        )


def ttft_reading(
    step: Any, slo: SLO, wm: WorkloadModel | None, per_unit: bool = False
) -> RegimeReading | None:
    """TTFT's factors by regime at the SLO's strictest TTFT limit for `wm`'s prompts on `step` (`RegimeReading`;
    `per_unit`: the factors per unit of amplification); None without a workload, a TTFT target or a band per
    regime."""
    limits = [limit for metric, _pct, limit in slo.targets() if metric == "ttft_ms"]
    if wm is None or slo.confidence is None or not limits:
        return None
    prof = step.profile
    ratios = _ttft_ratios(prof.family, prof.engine, float(slo.confidence), step.mixture_of_experts, per_unit)
    if not all(ratios) or not prof.compute_eff:
        return None
    factors = tuple(max(1.0, 1 / r) for r in ratios if r)
    prefill = _prefill_ms(step, float(wm.input_tokens.mean), wm.shared_prefix_tokens)
    return RegimeReading(min(limits), prefill, prof.compute_eff, factors)
