"""Turning a replica into an answer: an option's architectures on each deployment (pricing, fleet, headroom, placement,
measured figures), verified by a full simulation at their operating point."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any

from sizing.catalog import Catalog
from sizing.learn.matching import at_throughput, describe
from sizing.perf.amplification import STEP_SCALE
from sizing.perf.calibration import summary
from sizing.plan.candidates import HardwareOption
from sizing.plan.capacity import predict_at
from sizing.plan.cost import (
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    Pricing,
    project,
    spread_zones,
)
from sizing.plan.margin import Margin, margin, margin_at, stat, violations
from sizing.plan.state import Option, SearchState, capacity_type_of, peak_rps_per_replica
from sizing.results import (
    Architecture,
    ContextInfo,
    Cost,
    Headroom,
    Instances,
    Measurement,
    PerReplica,
    Placement,
    Predicted,
    Replicas,
)
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO


def pricing_of(cat: Catalog, wm: WorkloadModel, hw: HardwareOption, deployment: str) -> Pricing:
    """How `hw` is billed on `deployment` in the workload's Region (kept per catalog: the planner asks for each
    hardware option at every phase)."""
    region = wm.spec.constraints.region
    return cat.derive(
        ("pricing", hw.instance_type, region, deployment),
        lambda: _priced(cat, hw.instance_type, region, deployment),
    )


def _priced(cat: Catalog, instance_type: str, region: str, deployment: str) -> Pricing:
    inst = cat.instance(instance_type)
    neuron = cat.accelerator_of(inst).kind == "neuron"
    if deployment == "sagemaker":
        p = cat.sagemaker_price(inst, region)
        spot = None
        control = 0.0
    else:
        p = inst.price(region)
        spot = inst.spot_in(region).fraction
        control = EKS_CONTROL_PLANE_USD_PER_HOUR
    assert p.usd_per_hour is not None
    return Pricing(
        usd_per_hour=p.usd_per_hour,
        price_assumed=p.assumed,
        price_source=p.source,
        price_as_of=str(p.as_of),
        spot_discount=spot,
        spot_assumed=inst.spot_in(region).assumed,
        control_plane_usd_per_hour=control,
        lead_time_s=SCALE_UP_LEAD_S_NEURON if neuron else SCALE_UP_LEAD_S_GPU,
    )


def inst_price_region(cat: Catalog, hw: HardwareOption, region: str) -> bool:
    """Whether the instance's price is the Region's own (else the us-east-1 price stands in, marked assumed)."""
    p = cat.instance(hw.instance_type).prices.get(region)
    return bool(p and p.usd_per_hour)


def _stats(sim: Any, metric: str) -> dict[str, float]:
    s = getattr(sim, metric)
    digits = 3 if metric == "e2e_s" else 1
    return {k: round(float(getattr(s, k)), digits) for k in ("p50", "p95", "p99")}


def predicted_figures(sim: Any) -> dict[str, dict[str, float]]:
    return {m: _stats(sim, m) for m in ("ttft_ms", "tpot_ms", "e2e_s")}


def predicted_of(sim: Any) -> Predicted:
    """The predicted percentiles of a simulation (or of measured figures), as an architecture states them."""
    return Predicted.model_validate(predicted_figures(sim))


def headroom_at(sim: Any, slo: SLO, load_pct: float, allowance: Margin) -> Headroom:
    """Load headroom and each SLO target's latency margin at the operating point, and how the sizing allowed for
    the estimator's error (`sizing.plan.margin.margin`, resolved for the run at that point: `margin_at`)."""
    latency: dict[str, float] = {}
    for metric, pct, limit in slo.targets():
        latency[f"{metric}.{pct}"] = round(100 * (1 - stat(sim, metric, pct) / limit), 1)
    tightest = min(latency, key=lambda k: latency[k]) if latency else None
    return Headroom(
        load_pct=load_pct,
        latency=latency,
        tightest=tightest,
        tightest_pct=latency[tightest] if tightest else None,
        reasoning=allowance.reasoning,
        **({"allowance": read} if (read := allowance.allowance()) is not None else {}),
    )


def _placement_note(hw: HardwareOption, placement: Placement, nodes_min: int) -> str | None:
    per = hw.replicas_per_instance
    if per <= 1 and placement.spread is None:
        return None
    devices = hw.devices_per_instance
    text = (
        f"up to {per} replicas per {hw.instance_type} (TP{hw.tensor_parallel} of its {devices} devices)"
        if per > 1
        else f"one replica per {hw.instance_type}"
    )
    if placement.spread == "zone":
        text += (
            f"; replicas spread over {placement.zones} availability zones (topology spread), so at least"
            f" {nodes_min} nodes run and each zone's replicas pack onto its own nodes"
        )
    return text


class _Figures:
    """Measured (or interpolated) figures read as a simulation is (`stat`: `figures.ttft_ms.p95`)."""

    def __init__(self, figures: dict[str, Any]) -> None:
        for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
            stats = figures.get(metric) or {}
            values = {k: stats.get(k) for k in ("mean", "p50", "p95", "p99")}
            setattr(
                self, metric, SimpleNamespace(**{k: math.nan if v is None else v for k, v in values.items()})
            )


def _measured_at(plan: Any, capacity_rps: float, rate_rps: float, modelled: Any) -> dict[str, Any]:
    """What the measurement says of a replica at `rate_rps` (its operating point) under a capacity of
    `capacity_rps`: the figures there -- the measured ones where the closed loop served that rate; below the
    lowest measured level, the estimator's rescaled to the measurement (`modelled`), as the lowest level's are an
    upper bound far above a light load -- the requests in flight there and at the capacity, and the
    architecture's `measurement` block."""

    figures, in_flight, _used, below = at_throughput(plan.levels, rate_rps)
    _f, at_capacity, _u, _b = at_throughput(plan.levels, capacity_rps)
    edge = plan.edge
    block = {
        **describe(plan.conf, plan.distance, list(edge.levels)),
        "edge": {
            "concurrency": round(edge.concurrency, 2),
            "requests_per_s": round(edge.requests_per_s, 4),
            "binding": edge.binding,
        },
        "open_loop_rps": None if plan.open_loop_rps is None else round(plan.open_loop_rps, 4),
        "decided_by": plan.decided_by,
        "scales": plan.scales,
        "figures_from": "the measured levels",
    }
    shown: Any = _Figures(figures)
    if below:
        shown = modelled
        in_flight = rate_rps * float(modelled.e2e_s.mean)
        block["figures_from"] = (
            f"the estimator rescaled to the measurement: {rate_rps:.3g} req/s per replica is below the lowest"
            f" measured level ({plan.levels[0]['concurrency']} in flight)"
        )
    return {"figures": shown, "in_flight": in_flight, "capacity_in_flight": at_capacity, "block": block}


def _architecture(s: SearchState, opt: Option, deployment: str) -> Architecture:
    wm, cat, headroom, seed, ctx = s.wm, s.cat, s.headroom, s.seed, s.ctx
    assert opt.capacity is not None
    hw = opt.hw
    rep = opt.replica
    allowance = margin(rep.step, wm.slo, headroom, wm)
    usable = opt.capacity.rate_rps * allowance.usable
    pricing = pricing_of(cat, wm, hw, deployment)
    users = wm.spec.users.total if wm.spec.users else None
    cost = project(wm, usable, hw.replicas_per_instance, pricing, users)
    nodes = cost.pop("_nodes")
    sched = cost["schedule"]["replicas_by_hour"]
    peak_replicas = max(sched)
    per_replica_peak = peak_rps_per_replica(wm, peak_replicas)
    plan = opt.capacity.measured
    answered = plan is not None and plan.answered
    if answered:
        # Poisson arrivals on the replica rescaled to its measurement (the measured figures are reported)
        sim = predict_at(plan.step, wm, per_replica_peak, seed)
        faster = functools.partial(predict_at, plan.step, wm, per_replica_peak * STEP_SCALE, seed)
    else:
        sim = opt.predict(wm, per_replica_peak, seed)
        faster = functools.partial(opt.predict, wm, per_replica_peak * STEP_SCALE, seed)
    # the allowance for the estimator's error as this load amplifies it
    allowance = margin_at(allowance, sim, faster)
    # in flight at the SLO capacity, from the capacity search's own probe there (a simulation at it otherwise)
    e2e_at_capacity = opt.capacity.e2e_mean_s
    if e2e_at_capacity is None and not answered:
        e2e_at_capacity = float(opt.predict(wm, opt.capacity.rate_rps, seed).e2e_s.mean)
    cap_type = capacity_type_of(wm, deployment)
    inst = cat.instance(hw.instance_type)
    acc = cat.accelerator_of(inst)
    slo_ok = not violations(sim, wm.slo, allowance)
    measured = _measured_at(plan, opt.capacity.rate_rps, per_replica_peak, sim) if answered else None
    if measured is not None:
        # the measured figures where the closed loop served this rate must meet the SLO too
        slo_ok = slo_ok and not violations(measured["figures"], wm.slo)
    zones = spread_zones(wm)
    placement = Placement(
        replicas_per_instance=hw.replicas_per_instance,
        spread="zone" if zones > 1 else None,
        zones=zones,
    )
    notes: list[str] = []
    region = wm.spec.constraints.region
    if pricing.price_assumed:
        notes.append(f"price assumed: {pricing.price_source}")
    notes.append(
        f"price ${pricing.usd_per_hour:g}/h from {region if inst_price_region(cat, hw, region) else 'us-east-1'}"
        f" ({'SageMaker ml.' if deployment == 'sagemaker' else 'EC2 '}{hw.instance_type}, as of {pricing.price_as_of})"
    )
    placed = _placement_note(hw, placement, nodes["min"])
    if placed:
        notes.append(placed)
    if ctx.refused_share > 0:
        notes.append(
            f"max_model_len {ctx.max_model_len:,}: {100 * ctx.refused_share:.2f}% of requests are longer and are"
            f" refused by the server (the model's context is {ctx.model_context:,})"
        )
    if deployment == "sagemaker":
        notes.append("SageMaker real-time endpoint: same hardware model, SageMaker instance prices, no spot")
    if plan is not None:
        notes.extend(plan.notes() if answered else [plan.fallback_note()])
    load_pct = round(100 * (1 - per_replica_peak / opt.capacity.rate_rps), 1)
    shown = sim if measured is None else measured["figures"]
    return Architecture(
        id=Architecture.make_id(
            deployment, hw.instance_type, hw.tensor_parallel, hw.quantization, hw.engine, cap_type
        ),
        model=wm.spec.model,
        catalog_model=wm.model_id,
        deployment=deployment,
        instance_type=hw.instance_type,
        accelerator=acc.id,
        accelerators_per_replica=hw.tensor_parallel / acc.cores_per_chip
        if acc.cores_per_chip > 1
        else hw.tensor_parallel,
        tensor_parallel=hw.tensor_parallel,
        quantization=hw.quantization,
        engine=hw.engine,
        capacity_type=cap_type,
        # availability outside the price snapshot is unknown, never assumed; its price then is us-east-1's
        availability="unknown"
        if inst.available_in(region) is None and region != "us-east-1"
        else "sold here",
        price_region=None if inst_price_region(cat, hw, region) or region == "us-east-1" else "us-east-1",
        replicas=Replicas(peak=peak_replicas, min=min(sched), mean=round(sum(sched) / 24, 2)),
        replicas_per_instance=hw.replicas_per_instance,
        instances=Instances(peak=nodes["peak"], min=nodes["min"], mean=round(nodes["mean"], 2)),
        per_replica=PerReplica(
            max_concurrency=round(
                measured["capacity_in_flight"]
                if measured is not None
                else opt.capacity.rate_rps * (e2e_at_capacity or 0.0),
                1,
            ),
            in_flight=round(
                measured["in_flight"] if measured is not None else per_replica_peak * sim.e2e_s.mean, 1
            ),
            rps=round(usable, 4),
            rps_slo_limit=round(opt.capacity.rate_rps, 4),
            rps_at_peak=round(per_replica_peak, 4),
            kv_cache_tokens=int(rep.fit.kv_cache_tokens),
        ),
        predicted=predicted_of(shown),
        # how far the prediction may be off: the calibration it used and that calibration's cross-validated error
        calibration=summary(rep.step.profile),
        basis="measured" if measured is not None else None,
        measurement=None
        if measured is None
        else Measurement.model_validate({**measured["block"], "modelled": predicted_figures(sim)}),
        measured=None,
        meets_slo=slo_ok,
        headroom_pct=load_pct,
        headroom=headroom_at(shown, wm.slo, load_pct, allowance),
        cost=Cost.model_validate(cost),
        serving=rep.serving,
        context=ContextInfo.model_validate(ctx.describe()),
        placement=placement,
        weights_gb=round(cat.model(wm.model_id).weight_bytes(hw.quantization) / 1e9, 1),
        region=region,
        notes=notes,
    )


#: When the operating point's full simulation misses an SLO the capacity search's shorter probes passed (sampling
#: noise at the edge), the capacity is cut by this factor, below the rate that missed, and re-checked, up to
#: VERIFY_TRIES times.
VERIFY_BACKOFF = 0.85


VERIFY_TRIES = 4


def verified_architectures(s: SearchState, opt: Option) -> list[Architecture] | None:
    """Architectures for an option whose own prediction at the operating point meets every SLO target, one per
    deployment of the search."""
    wm = s.wm
    assert opt.capacity is not None
    usable = margin(opt.replica.step, wm.slo, s.headroom).usable
    for _ in range(VERIFY_TRIES):
        archs = [_architecture(s, opt, d) for d in s.deployments]
        if all(a.meets_slo for a in archs):
            return archs
        # below the per-replica rate that missed: a cut that leaves the replica count as it is (a fleet at its
        # minimum, or a capacity far above the rate each replica sees) would re-check the same operating point
        missed = min(
            peak_rps_per_replica(wm, a.replicas.peak) for a in archs if a.replicas and not a.meets_slo
        )
        opt.capacity.rate_rps = min(opt.capacity.rate_rps, missed / usable) * VERIFY_BACKOFF
        opt.capacity.e2e_mean_s = None  # no probe ran at the lowered capacity
    return None
