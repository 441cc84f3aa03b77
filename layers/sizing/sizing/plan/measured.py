"""A replica's SLO capacity from the team's measurement of its configuration (`basis: measured`).

When the adopted calibration profile holds a measurement of the replica's model, accelerator and
performance-deciding ServingConfig at the workload's token shape (`sizing.learn.matching.matches`), the capacity
comes from the measured closed-loop levels instead of the estimator:

1. the SLO's edge on the levels (`slo_edge`): the highest load, interpolated in log concurrency between the last
   level meeting every SLO percentile the workload states and the first missing one, and the closed-loop
   throughput X there;
2. the estimator rescaled to the measurement: the two time scales (prefill from TTFT, decode from TPOT) that make
   its closed-loop predictions at the measured levels match the measured means, then its usual open-loop search
   (Poisson arrivals) on the rescaled replica;
3. the capacity is the lower of the two (`conservative_rate`). A closed-loop level serving X req/s has the mean
   load of an open-loop rate X, but Poisson arrivals queue more, so the open-loop tail is worse than the
   measured one; the rescaled model states how much worse for a replica timed like the measured one.

The figures reported at the operating point are the measured ones where the closed loop served that rate, the
rescaled model's own under `measurement.modelled`. Where the edge lies outside the measured range (every level
meets the SLO, or none does) the replica keeps its estimated (calibrated or modelled) capacity, and says why.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from sizing.base.distributions import TokenDistribution
from sizing.learn.matching import LEVEL_REQUESTS, LEVEL_ROUNDS, Edge, conservative_rate, matches, slo_edge
from sizing.perf.simulator import ClosedLoop, bounds, simulate
from sizing.perf.step import StepModel
from sizing.plan.capacity import Capacity, max_rate_under_slo
from sizing.workload.derived import WorkloadModel


@dataclass
class MeasuredPlan:
    """A replica's measured configuration, the SLO edge on its levels and, where that edge is inside the measured
    range, the rescaled model and the capacity it allows."""

    conf: dict[str, Any]
    distance: float
    edge: Edge
    #: the rescaled replica's step model, its open-loop SLO edge (req/s; None: none found), which bound decided
    step: Any = None
    open_loop_rps: float | None = None
    decided_by: str | None = None
    scales: dict[str, float] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        """The capacity comes from the measurement (the SLO edge lies inside the measured range)."""
        return self.edge.status == "inside"

    @property
    def levels(self) -> list[dict[str, Any]]:
        return list(self.conf["levels"])

    def fallback_note(self) -> str:
        """Why a matched measurement does not decide the capacity."""
        return (
            f"measured in run {self.conf['run_id']} (levels {_levels(self.conf)}): {self.edge.reason}; the capacity"
            " is the estimator's"
        )

    def notes(self) -> list[str]:
        assert self.edge.requests_per_s is not None
        rescaled = (
            f"{self.open_loop_rps:.3g} req/s"
            if self.open_loop_rps is not None
            else "none found (misses at 1 user)"
        )
        return [
            f"capacity from run {self.conf['run_id']}'s measurement (levels {_levels(self.conf)}, token shape"
            f" {self.conf['input_tokens']:.0f}/{self.conf['output_tokens']:.0f}): {self.edge.reason}",
            "closed-loop levels understate an open-loop tail: a level serving X req/s has the mean load of Poisson"
            " arrivals at X req/s, but those queue more; the capacity is the lower of the measured edge"
            f" ({self.edge.requests_per_s:.3g} req/s) and the open-loop edge of the estimator rescaled to this"
            f" measurement (prefill x{self.scales.get('prefill', 1.0):.2f}, decode"
            f" x{self.scales.get('decode', 1.0):.2f}: {rescaled}): the {self.decided_by}",
        ]


def _levels(conf: dict[str, Any]) -> str:
    return "/".join(str(lv["concurrency"]) for lv in conf["levels"])


def _shaped(dist: TokenDistribution, mean: float) -> TokenDistribution:
    """The workload's token distribution moved to the measured mean (its spread kept)."""
    if dist.kind == "lognormal":
        return TokenDistribution.lognormal(mean, dist.sigma)
    if dist.kind == "empirical" and dist.mean > 0:
        return TokenDistribution.empirical([max(1, round(s * mean / dist.mean)) for s in dist.samples])
    return TokenDistribution.fixed(max(1, round(mean)))


def _scales(step: Any, wm: WorkloadModel, conf: dict[str, Any], seed: int) -> dict[str, float]:
    """The prefill and decode time scales that make `step`'s closed-loop predictions at the measured levels (the
    measured token shape) match the measured mean TTFT and TPOT: the geometric mean of measured / predicted over
    the levels, clamped as the team correction is (`correction.MAX_SCALE`)."""
    # deferred: the team correction's module loads the learning loop (a planner that finds no measurement needs
    # none of it)
    from sizing.learn.correction import MAX_SCALE

    inp = _shaped(wm.input_tokens, float(conf["input_tokens"]))
    out = _shaped(wm.output_tokens, float(conf["output_tokens"]))
    logs: dict[str, list[float]] = {"prefill": [], "decode": []}
    for lv in conf["levels"]:
        c = max(1, int(lv["concurrency"]))
        sim = simulate(
            step,
            ClosedLoop(c),
            inp,
            out,
            n_requests=max(LEVEL_REQUESTS, LEVEL_ROUNDS * c),
            seed=seed,
            itl=False,
            prefix_tokens=int(conf.get("shared_prefix_tokens") or 0),  # the level as it was measured
        )
        for scale, metric in (("prefill", "ttft_ms"), ("decode", "tpot_ms")):
            m = (lv.get(metric) or {}).get("mean")
            p = float(getattr(sim, metric).mean)
            if isinstance(m, int | float) and m > 0 and p > 0 and math.isfinite(p):
                logs[scale].append(math.log(m / p))
    bound = math.log(MAX_SCALE)
    return {
        k: round(math.exp(max(-bound, min(bound, sum(v) / len(v)))) if v else 1.0, 4) for k, v in logs.items()
    }


def _rescaled(step: Any, scales: dict[str, float], cat: Any) -> Any:
    """`step` with its prefill and decode times stretched by `scales` (as a team correction stretches them:
    `sizing.perf.calibration.with_team_correction`)."""
    return StepModel(step.cfg, step.fit, step.profile.stretched(scales["prefill"], scales["decode"]), cat)


def lookup(rep: Any, wm: WorkloadModel, cat: Any) -> tuple[dict[str, Any], float] | None:
    """The newest measured configuration of the adopted profile matching this replica, and its token distance."""
    from sizing.learn.profiles import active

    data = active()
    if not data:
        return None
    serving = {**rep.serving.model_dump(mode="json"), "model": wm.model_id}
    return next(
        matches(
            data,
            model=wm.model_id,
            accelerator=rep.cfg.parts(cat).accelerator.id,
            serving=serving,
            input_tokens=wm.input_tokens.mean,
            output_tokens=wm.output_tokens.mean,
            shared_prefix_tokens=wm.shared_prefix_tokens,
        ),
        None,
    )


def measured_capacity(rep: Any, wm: WorkloadModel, cat: Any, seed: int, cap: Capacity) -> Capacity:
    """`cap` (the estimator's capacity of `rep`) answered from the team's measurement of its configuration where
    one matches and its SLO edge lies inside the measured range; else `cap`, carrying why (`MeasuredPlan`)."""
    if not cap.feasible:
        return cap
    hit = lookup(rep, wm, cat)
    if hit is None:
        return cap
    conf, dist = hit
    edge = slo_edge(conf["levels"], wm.slo.targets())
    if edge.status != "inside":
        return dataclasses.replace(cap, measured=MeasuredPlan(conf, dist, edge))
    assert edge.requests_per_s is not None
    scales = _scales(rep.step, wm, conf, seed)
    step = _rescaled(rep.step, scales, cat)
    top = bounds(step, wm.input_tokens.mean, wm.output_tokens.mean, prefix_tokens=wm.shared_prefix_tokens)
    open_loop = max_rate_under_slo(step, wm, top.max_requests_per_s, seed)
    open_rps = open_loop.rate_rps if open_loop.feasible else None
    rate, decided_by = conservative_rate(edge.requests_per_s, open_rps)
    plan = MeasuredPlan(conf, dist, edge, step, open_rps, decided_by, scales)
    return Capacity(
        rate, True, "", cap.probes + open_loop.probes, None, None, measured=plan, estimated_rps=cap.rate_rps
    )
