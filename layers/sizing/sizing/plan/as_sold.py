"""As sold: what a buyer sees of a hosted architecture -- spot terms and the on-demand base, SageMaker inference
components, a batch workload's day as one job -- and a batch workload's day on a SageMaker asynchronous endpoint."""

from __future__ import annotations

import functools
from typing import Any

from sizing.catalog import Catalog
from sizing.catalog.modes import Modes
from sizing.perf.amplification import STEP_SCALE
from sizing.plan.answer import headroom_at, predicted_figures
from sizing.plan.cost import (
    ASYNC_SCALE_IN_S,
    BATCH_JOB_WINDOW_H,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    async_job,
    batch_deadline_h,
    expected_spot_interruptions,
    nodes_for,
    spread_zones,
)
from sizing.plan.margin import margin, margin_at
from sizing.plan.state import Option, Replica, SearchState
from sizing.plan.tuning import async_tuning
from sizing.results import (
    Architecture,
    BatchJob,
    Cost,
    InferenceComponentsInfo,
    Instances,
    Percentiles,
    Predicted,
    Replicas,
    SpotInfo,
)
from sizing.workload.derived import DAYS_PER_MONTH, WorkloadModel


def hosted_as_sold(
    s: SearchState, feasible: list[Architecture], batch: bool, modes_cfg: Modes
) -> list[Architecture]:
    """As sold: spot interruptions and the on-demand base, SageMaker inference components, the day's job of a
    batch workload; SageMaker asynchronous inference for a batch workload (dropped when over budget)."""
    hosted = [_as_sold(s.wm, s.cat, a, modes_cfg, batch) for a in feasible]
    return hosted + [
        job
        for a in hosted
        if batch and a.deployment == "sagemaker"
        for job in [_sagemaker_async(s, a, modes_cfg, s.option_of[a.id])]
        if job is not None and not s.over_budget(job.ranked_usd_per_month)
    ]


def _as_sold(wm: WorkloadModel, cat: Catalog, a: Architecture, modes: Modes, batch: bool) -> Architecture:
    """A hosted architecture with what a buyer sees of it: spot terms, SageMaker packing, the day's job."""
    update: dict[str, Any] = {}
    spot = _spot_info(wm, cat, a, modes)
    if spot is not None:
        update["spot"] = spot
        if a.capacity_type == "spot":
            update["notes"] = [*a.notes, spot.message]
    comp = _components(a, modes)
    if comp is not None:
        update["inference_components"] = comp
        update["notes"] = [*update.get("notes", a.notes), comp.message]
    if batch:
        update["batch"] = _day_job(wm, a)
    return a.model_copy(update=update) if update else a


def _spot_info(wm: WorkloadModel, cat: Catalog, a: Architecture, modes: Modes) -> SpotInfo | None:
    """Spot as a buyer sees it for an EKS architecture with a spot cost: the price, the family's interruption band
    in the Region, the interruptions to expect a month and the on-demand nodes that keep min_replicas up."""
    if a.deployment != "eks" or a.cost.usd_per_month_spot is None or a.instance_type is None:
        return None
    inst = cat.instance(a.instance_type)
    region = a.region or wm.spec.constraints.region
    spot = inst.spot_in(region)
    price = float(a.cost.component("instance_usd_per_hour") or inst.price(region).usd_per_hour or 0.0)
    rpi = a.replicas_per_instance or 1
    base = nodes_for(wm.spec.constraints.min_replicas, rpi, spread_zones(wm))
    nodes = list(a.cost.schedule.nodes_by_hour if a.cost.schedule else [])
    si = modes.spot_interruption
    band, assumed = si.band(inst.family, region)
    expected = round(expected_spot_interruptions(nodes, base, band.max), 1)
    base_usd = round(base * 24 * price * DAYS_PER_MONTH, 2)
    where = " (assumed: no Spot Instance Advisor snapshot)" if assumed else ""
    above = (
        f"about {expected:g} interruptions a month"
        if max(nodes, default=0) > base
        else "no spot nodes above the base at this traffic"
    )
    message = (
        f"spot {inst.family} in {region}: ${price * (1 - spot.fraction):.4g}/h ({100 * spot.fraction:.0f}% off"
        f" ${price:g}); interruption band {band.label}{where}: {above}; {base} on-demand node(s)"
        f" (${base_usd:,.0f}/month) keep min_replicas {wm.spec.constraints.min_replicas} up"
    )
    return SpotInfo(
        region=region,
        usd_per_hour=round(price * (1 - spot.fraction), 5),
        discount=spot.fraction,
        discount_source=spot.source,
        discount_assumed=spot.assumed,
        interruption_band=band.label,
        interruption_band_assumed=assumed,
        interruption_source=si.source,
        expected_interruptions_per_month=expected,
        on_demand_base_nodes=base,
        on_demand_base_usd_per_month=base_usd,
        message=message,
    )


def _components(a: Architecture, modes: Modes) -> InferenceComponentsInfo | None:
    """A SageMaker endpoint's model copies as inference components, each with its own accelerators."""
    if a.deployment != "sagemaker" or a.instances is None or a.replicas is None:
        return None
    copies = a.replicas_per_instance or 1
    acc = a.accelerators_per_replica or 1
    src = modes.sagemaker_inference_components.source
    return InferenceComponentsInfo(
        copies_per_instance=copies,
        accelerators_per_copy=acc,
        instances_peak=a.instances.peak,
        copies_peak=a.replicas.peak,
        source=src,
        message=f"inference components: up to {copies} model cop{'ies' if copies > 1 else 'y'} per"
        f" ml.{a.instance_type} ({acc:g} accelerator(s) each, NumberOfAcceleratorDevicesRequired), {a.replicas.peak}"
        f" copies on {a.instances.peak} instance(s) at peak; SageMaker bills the instances per instance-hour and"
        " the copies share them",
    )


def _day_job(wm: WorkloadModel, a: Architecture) -> BatchJob:
    """A batch workload's day of requests on a real-time architecture: its monthly cost over the month's days."""
    requests = wm.avg_rps * 86400
    per_job = a.ranked_usd_per_month / DAYS_PER_MONTH
    tokens = requests * (wm.input_tokens.mean + wm.output_tokens.mean)
    return BatchJob(
        requests=round(requests),
        input_tokens=round(requests * wm.input_tokens.mean),
        output_tokens=round(requests * wm.output_tokens.mean),
        usd_per_job=round(per_job, 2),
        usd_per_million_tokens=round(per_job / (tokens / 1e6), 4) if tokens else 0.0,
        wall_time_h=BATCH_JOB_WINDOW_H,
        wall_time_bound_h=batch_deadline_h(wm),
        wall_time_assumed=False,
        note="the day's requests served as they arrive by the real-time replicas (scaled by the hour)",
    )


def _sagemaker_async(s: SearchState, a: Architecture, modes: Modes, opt: Option) -> Architecture | None:
    """A batch workload's day as one job on a SageMaker asynchronous endpoint: instances start from zero, drain the
    queue at the replicas' usable capacity (the SLO capacity less the allowance for the estimator's error that
    sizes the real-time answers: `sizing.plan.margin.margin`) and scale back to zero, billed per instance-hour. `opt`: the
    hardware option `a` was placed from (its replica is simulated at the drain rate for the job's per-request
    figures and headroom)."""
    wm, cat = s.wm, s.cat
    if a.per_replica is None or a.instance_type is None or a.serving is None:
        return None
    cfg = modes.sagemaker_async
    if (a.predicted.e2e_s.p99 or 0.0) > cfg.max_processing_s:
        return None  # a request would run past the hour asynchronous inference allows it
    price = float(a.cost.component("instance_usd_per_hour") or 0.0)
    neuron = cat.accelerator_of(cat.instance(a.instance_type)).kind == "neuron"
    lead = SCALE_UP_LEAD_S_NEURON if neuron else SCALE_UP_LEAD_S_GPU
    per_instance = a.replicas_per_instance or 1
    drain = _drain_rate(s, opt.replica)
    assert drain is not None  # a placed option's replica met the SLOs
    rps_instance = drain * per_instance
    deadline = batch_deadline_h(wm)

    def job_at(rps: float) -> dict[str, Any]:
        return async_job(
            wm.avg_rps * 86400, wm.input_tokens.mean, wm.output_tokens.mean, rps, price, deadline, lead
        )

    job = job_at(rps_instance)
    job["note"] = (
        f"SageMaker asynchronous inference: {job['instances']} ml.{a.instance_type} start from zero"
        f" ({lead / 60:g} min to serve), drain the day's queue at {rps_instance:.3g} req/s each (the SLO"
        f" capacity less the sizing allowance) and scale back to zero: {job['instance_hours']:g} instance-hours"
        " a job"
    )
    monthly = job["usd_per_job"] * DAYS_PER_MONTH
    users = wm.spec.users.total if wm.spec.users else None
    out_month = wm.requests_per_month * wm.output_tokens.mean
    cost = {
        "usd_per_hour_peak": round(job["instances"] * price, 2),
        "usd_per_month": round(monthly, 2),
        "usd_per_million_output_tokens": round(monthly / (out_month / 1e6), 4) if out_month else None,
        "usd_per_user_month": round(monthly / users, 4) if users else None,
        "breakdown": {
            "mode": "async",
            "instance_usd_per_hour": price,
            "instances_per_job": job["instances"],
            "instance_hours_per_job": job["instance_hours"],
            "jobs_per_month": round(DAYS_PER_MONTH, 2),
            "scale_in_s": ASYNC_SCALE_IN_S,
        },
        "price": a.cost.price,
    }
    wall = job["wall_time_h"] * 3600
    update = _at_drain_rate(s, opt, a, drain)
    tuned = opt.chosen is not None and a.tuning is not None and bool(a.tuning.changed)
    default_drain = _drain_rate(s, opt.default) if tuned else None
    predicted = update.pop("predicted", a.predicted)
    return a.model_copy(
        update={
            "id": f"{a.id}:async",
            "invocation": "async",
            "cost": Cost.model_validate(cost),
            "replicas": Replicas(
                peak=job["instances"] * per_instance,
                min=0,
                mean=round(job["instance_hours"] * per_instance / 24, 2),
            ),
            "instances": Instances(peak=job["instances"], min=0, mean=round(job["instance_hours"] / 24, 2)),
            "predicted": predicted.model_copy(
                update={"e2e_s": Percentiles(p50=round(wall, 1), p95=round(wall, 1), p99=round(wall, 1))}
            ),
            "batch": BatchJob.model_validate(job),
            "tuning": async_tuning(a, job, job_at, default_drain, drain),
            "also_fits_on": [],
            "notes": [job["note"], f"source: {cfg.source}", *a.notes[:1]],
            **update,
        }
    )


def _drain_rate(s: SearchState, rep: Replica) -> float | None:
    """The rate a replica drains an asynchronous job's queue at: its SLO capacity less the sizing allowance (the
    real-time answers' usable capacity); None without a feasible capacity."""
    if rep.capacity is None or not rep.capacity.feasible or rep.capacity.rate_rps <= 0:
        return None
    return rep.capacity.rate_rps * margin(rep.step, s.wm.slo, s.headroom).usable


def _at_drain_rate(s: SearchState, opt: Option, a: Architecture, rate: float) -> dict[str, Any]:
    """An asynchronous job's per-request figures: its replica simulated at the drain rate, its headroom there and
    the requests each replica then holds in flight. A replica sized from a measurement keeps the real-time row's
    (measured) figures."""
    rep = opt.replica
    if rep.capacity is None or rep.capacity.measured is not None or a.per_replica is None:
        return {}
    sim = opt.predict(s.wm, rate, s.seed)
    allowance = margin_at(
        margin(rep.step, s.wm.slo, s.headroom, s.wm),
        sim,
        functools.partial(opt.predict, s.wm, rate * STEP_SCALE, s.seed),
    )
    load_pct = round(100 * (1 - rate / rep.capacity.rate_rps), 1)
    return {
        "predicted": Predicted.model_validate(predicted_figures(sim)),
        "headroom": headroom_at(sim, s.wm.slo, load_pct, allowance),
        "per_replica": a.per_replica.model_copy(
            update={"rps_at_peak": round(rate, 4), "in_flight": round(rate * sim.e2e_s.mean, 1)}
        ),
    }
