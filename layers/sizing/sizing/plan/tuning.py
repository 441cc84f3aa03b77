"""Runtime tuning: a coordinate search over a replica's serving parameters at the ranking's head, and the tuning block
each architecture carries (what the tuned configuration gained over the engine's defaults)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from sizing.base.serving_config import ServingConfig
from sizing.catalog.records import Accelerator
from sizing.plan.answer import pricing_of, verified_architectures
from sizing.plan.capacity import grid_point_above, max_rate_under_slo, probe
from sizing.plan.cost import is_batch_workload, monthly_usd
from sizing.plan.margin import UNITS, margin, stat
from sizing.plan.measured import measured_capacity
from sizing.plan.serving import changes as serving_changes
from sizing.plan.serving import tuning_variants
from sizing.plan.state import (
    Option,
    Replica,
    SearchState,
    build_replica,
    config_for,
    early_reject,
    peak_rps_per_replica,
)
from sizing.results import Architecture, Tuning, ranked_usd_per_month
from sizing.workload.derived import DAYS_PER_MONTH

#: A tuned configuration replaces the engine's defaults only when it raises the SLO capacity by more than this: the
#: capacity search's grid resolution is 1/2^5 (about 3%) of the saturated rate, so smaller gains are search noise.
TUNING_MIN_GAIN = 0.03


#: Rounds of the coordinate search: each round tries every single-setting change of the best configuration so far.
TUNING_ROUNDS = 3


#: Replicas tuned: the ranking's cheapest distinct ones (hardware x serving defaults), up to this many. Tuning a
#: replica costs a probe per variant and a capacity search per variant that beats it (3-7 simulations each); two
#: keep the full-catalog estimate near 1.5 s whole process (benchmarks/speed.py), and on the example workloads the
#: third tuned replica never changed the answer (benchmarks/tuning.py).
TUNED_REPLICAS = 2


def tune_heads(s: SearchState) -> None:
    """Tune the runtime parameters of the replicas at the ranking's head (their capacity, hence cost, can only
    improve)."""
    # cheapest first; replicas of equal cost in the order they were placed (a set's order varied per process)
    heads: dict[tuple[str, ServingConfig], float] = {}
    for o, archs in s.placed:
        cost = min(a.ranked_usd_per_month for a in archs)
        heads[o.perf_key] = min(heads.get(o.perf_key, math.inf), cost)

    # heads count by instance type and price: two layouts of one instance at one price (an 8-GPU node as one TP8
    # replica or two TP4 ones) are one choice the buyer sees twice; counted as two they left the next hardware,
    # which tuning may make the cheapest, untuned (the batch example at confidence 0.8 ranked p4d TP4 and TP8 at one
    # price above a g6e whose tuning nearly doubles its capacity)
    def head(k: tuple[str, ServingConfig]) -> tuple[str, float]:
        return s.by_performance[k].hw.instance_type, round(heads.get(k, math.inf), 2)

    for key, _cost in sorted(heads.items(), key=lambda t: t[1]):
        counted = {head(k) for k in s.tuned_keys}
        if len(counted) >= TUNED_REPLICAS and head(key) not in counted:
            break
        if key in s.tuned_keys:
            continue
        s.tuned_keys.append(key)
        lead = s.by_performance[key]
        acc = s.cat.accelerator_of(s.cat.instance(lead.hw.instance_type))
        _tune(s, lead, acc)
        s.searches += lead.capacity_searches


def _tune(s: SearchState, opt: Option, accelerator: Accelerator) -> None:
    """Coordinate search over the runtime parameters of `opt` on its `accelerator`: keep a change when it raises
    the SLO capacity by more than TUNING_MIN_GAIN over the best configuration so far."""
    wm, cat, seed = s.wm, s.cat, s.seed
    cfg_for = config_for(opt.hw.instance_type)
    best = opt.default
    tried: set[ServingConfig] = {best.serving}
    for _ in range(TUNING_ROUNDS):
        improved = False
        for variant in tuning_variants(best.serving, accelerator, batch=is_batch_workload(wm)):
            if variant in tried:
                continue
            tried.add(variant)
            rep = build_replica(cfg_for, variant, wm, cat, s.profiles)
            if isinstance(rep, str):
                continue
            # configurations compare on the estimator's scale (a measured one by its estimate)
            base = best.capacity.comparable_rps if best.capacity and best.capacity.feasible else 0.0
            if rep.bound_rps <= base * (1 + TUNING_MIN_GAIN) or early_reject(wm.slo, rep, wm):
                continue  # its roofline capacity cannot beat the best so far, or no load meets the SLO
            opt.searched += 1
            start: tuple[int, float] | None = None
            if base:
                # the variant must meet the SLOs above the best capacity so far: one probe there decides
                k = grid_point_above(base * (1 + TUNING_MIN_GAIN), rep.bound_rps)
                if k is None:
                    continue
                ok, y = probe(rep.step, wm, rep.bound_rps, k, seed)
                if not ok:
                    continue
                start = (k, y)
            rep.capacity = measured_capacity(
                rep, wm, cat, seed, max_rate_under_slo(rep.step, wm, rep.bound_rps, seed, start=start)
            )
            opt.capacity_searches += 1
            if rep.capacity.measured is not None and rep.capacity.measured.answered:
                opt.measured = rep
            if rep.capacity.feasible and rep.capacity.comparable_rps > base * (1 + TUNING_MIN_GAIN):
                best, improved = rep, True
        if not improved:
            break
    if best is not opt.default:
        opt.chosen = best


def adopt_tuning(s: SearchState, opt: Option, archs: list[Architecture]) -> list[Architecture]:
    """The option's architectures at its replica's tuned configuration when that still verifies, else as placed."""
    lead = s.by_performance[opt.perf_key]
    opt.searched = lead.searched
    opt.measured = lead.measured
    if lead.chosen is None:
        return archs
    assert lead.chosen.capacity is not None
    opt.chosen = dataclasses.replace(lead.chosen, capacity=dataclasses.replace(lead.chosen.capacity))
    tuned = verified_architectures(s, opt)
    if tuned is None:
        opt.chosen = None
        return archs
    return tuned


def with_tuning(s: SearchState, opt: Option, archs: list[Architecture]) -> list[Architecture]:
    """The option's architectures with their `tuning` block. A tuned configuration whose verified capacity fell
    below the defaults' gives way to them: tuning never makes an answer dearer (on the estimator's scale: a
    measured configuration compares by its estimate, `Capacity.comparable_rps`); nor does it replace measured
    defaults with an estimated variant that costs as much."""
    wm = s.wm
    d_cap = opt.default.capacity
    if opt.chosen is not None and d_cap is not None and d_cap.feasible:
        assert opt.capacity is not None
        if opt.capacity.comparable_rps <= d_cap.comparable_rps and (defaults := _at(s, opt, opt.default)):
            opt.chosen, archs = None, defaults
    measured = opt.measured
    if measured is None and d_cap is not None and d_cap.measured is not None and d_cap.measured.answered:
        measured = opt.default
    if opt.chosen is not None and measured is not None and measured is not opt.chosen:
        # a configuration the team measured gives way to an estimated variant only where that is cheaper: at the
        # same cost the measured one is the answer to rely on
        kept = _at(s, opt, measured)
        if kept and all(
            m.cost.usd_per_month <= t.cost.usd_per_month for m, t in zip(kept, archs, strict=True)
        ):
            opt.chosen, archs = (None if measured is opt.default else measured), kept
    out = []
    for d, a in zip(s.deployments, archs, strict=True):
        default_cost = None
        if opt.chosen is not None and d_cap is not None and d_cap.feasible:
            pricing = pricing_of(s.cat, wm, opt.hw, d)
            ((on_demand, spot),) = monthly_usd(
                wm,
                d_cap.rate_rps * margin(opt.default.step, wm.slo, s.headroom).usable,
                opt.hw.replicas_per_instance,
                [pricing],
            )
            default_cost = ranked_usd_per_month(on_demand, spot, a.capacity_type)
        out.append(a.model_copy(update={"tuning": _tuning(s, opt, a, default_cost)}))
    return out


def _at(s: SearchState, opt: Option, replica: Replica) -> list[Architecture] | None:
    """The option's architectures at `replica` (its defaults or a tuning variant) instead of its chosen one, when
    they verify."""
    chosen = None if replica is opt.default else replica
    return verified_architectures(
        s, Option(opt.hw, opt.default, opt.lb_cost, opt.fit_accelerator, chosen=chosen)
    )


def _tuning(s: SearchState, opt: Option, arch: Architecture, default_cost: float | None) -> Tuning:
    """What the tuned configuration gained over the engine's defaults, at the tuned operating point."""
    wm, seed = s.wm, s.seed
    if opt.chosen is None:
        return Tuning(
            searched=opt.searched,
            summary="engine defaults kept: no searched setting raised the SLO capacity"
            if opt.searched > 1
            else "engine defaults (not tuned: far from the ranking's top)",
            default_usd_per_month=arch.ranked_usd_per_month,
        )
    changed = serving_changes(opt.default.serving, opt.chosen.serving)
    words = _changes_text(changed)
    assert arch.per_replica is not None and arch.replicas is not None and opt.chosen.capacity is not None
    # the operating point `_architecture` simulated, not `rps_at_peak` (that rate rounded to 4 decimals): the tuned
    # figures are the architecture's own predicted ones, from the same simulation, and only the defaults' run at
    # that point is new
    rate = peak_rps_per_replica(wm, arch.replicas.peak)
    tuned = opt.chosen.predict(wm, rate, seed)
    before = opt.default.predict(wm, rate, seed)
    figures = []
    for metric, pct, _limit in wm.slo.targets():
        a, b = stat(before, metric, pct), stat(tuned, metric, pct)
        name, unit, _ = UNITS[metric]
        shown: Callable[[float], str] = (lambda x: f"{x:.2f}") if unit == "s" else (lambda x: f"{x:.0f}")
        figures.append(f"{name} {pct} {shown(a)} → {shown(b)} {unit}")
    d_cap = opt.default.capacity
    if d_cap is not None and d_cap.feasible and d_cap.rate_rps > 0:
        gain = 100 * (opt.chosen.capacity.comparable_rps / d_cap.comparable_rps - 1)
        cap_text = f"capacity +{gain:.0f}%"
    else:
        gain = 0.0
        cap_text = "meets the SLOs the engine defaults miss"
    return Tuning(
        searched=opt.searched,
        changed={k: list(v) for k, v in changed.items()},
        summary=f"{words}: " + ", ".join([*figures, cap_text]),
        default_usd_per_month=default_cost,
        capacity_gain_pct=round(gain, 1),
    )


def async_tuning(
    a: Architecture,
    job: dict[str, Any],
    job_at: Callable[[float], dict[str, Any]],
    default_drain: float | None,
    drain: float,
) -> Tuning | None:
    """The tuning block of an asynchronous job: the real-time endpoint's per-request figures do not describe a
    job, so it compares the job at the tuned replica's drain rate (`drain`, requests a second per replica) with
    the same job at the defaults' (`default_drain`)."""
    t = a.tuning
    if t is None:
        return None
    monthly = round(job["usd_per_job"] * DAYS_PER_MONTH, 2)
    if not t.changed:
        return t.model_copy(update={"default_usd_per_month": monthly})
    words = _changes_text(t.changed)
    if default_drain is None or default_drain <= 0:
        return t.model_copy(
            update={
                "summary": f"{words}: meets the SLOs the engine defaults miss",
                "default_usd_per_month": None,
            }
        )
    per_instance = a.replicas_per_instance or 1
    rps_before, rps_after = default_drain * per_instance, drain * per_instance
    before = job_at(rps_before)
    return t.model_copy(
        update={
            "summary": f"{words}: a job runs {before['instances']} → {job['instances']} instances,"
            f" {before['instance_hours']:.1f} → {job['instance_hours']:.1f} instance-hours"
            f" ({rps_before:.3g} → {rps_after:.3g} req/s an instance),"
            f" capacity +{t.capacity_gain_pct:.0f}%",
            "default_usd_per_month": round(before["usd_per_job"] * DAYS_PER_MONTH, 2),
        }
    )


def _changes_text(changed: dict[str, Any]) -> str:
    """The serving settings tuning changed, in words: "max_num_seqs 128 instead of 256; ..."."""
    return "; ".join(f"{k} {b} instead of {a}" for k, (a, b) in changed.items())
