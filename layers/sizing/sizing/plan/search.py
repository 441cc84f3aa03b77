"""The product's answer: architectures ranked by monthly cost that meet the workload's SLOs.

Search is branch and bound. Every hardware option gets a cheap roofline upper bound on per-replica capacity, hence
a lower bound on the monthly cost it is ranked by (its spot cost where the workload allows only spot); options are
then simulated cheapest-bound first, and the search stops once the next option's *lower* bound exceeds the cost of
the `certify`-th cheapest feasible architecture found -- such options cannot enter the ranking and are reported as
dominated, with their bound."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sizing.catalog import BedrockOffer, Catalog, load_catalog
from sizing.perf.calibration import summary
from sizing.plan.candidates import HardwareOption, enumerate_candidates
from sizing.plan.capacity import (
    Capacity,
    describe_violation,
    max_rate_under_slo,
    predict_at,
    violations,
)
from sizing.plan.cost import (
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    SAVINGS_PLAN_1Y_DISCOUNT,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    Pricing,
    bedrock_bill,
    monthly_usd,
    project,
)
from sizing.workload import SLO, WorkloadModel, WorkloadSpec, resolve

#: Default share of a replica's SLO capacity kept free at peak (bursts within the hour, estimator error).
DEFAULT_HEADROOM = 0.20
#: Architectures certified by simulation even when the caller asks for fewer (the ranking's top stays exact).
DEFAULT_CERTIFY = 8

Progress = Callable[[int, int, str], None]


@dataclass
class Option:
    hw: HardwareOption
    cfg: Any
    fit: Any
    step: Any
    bound_rps: float
    lb_cost: float
    fit_accelerator: str
    capacity: Capacity | None = None
    #: predictions at an operating point, by rate: EKS and SageMaker share the hardware, hence the simulation
    predictions: dict[float, Any] = field(default_factory=dict)

    @property
    def perf_key(self) -> tuple[str, int, str, str]:
        """What decides a replica's performance; instance sizes of one family (g6e.xlarge ... g6e.16xlarge) and
        twins like p5e/p5en share it, so their capacity search runs once."""
        return (self.fit_accelerator, self.hw.tensor_parallel, self.hw.quantization, self.hw.engine)

    def predict(self, wm: WorkloadModel, rate: float, seed: int) -> Any:
        key = round(rate, 9)
        if key not in self.predictions:
            self.predictions[key] = predict_at(self.step, wm, rate, seed)
        return self.predictions[key]


def _pricing(cat: Catalog, wm: WorkloadModel, hw: HardwareOption, deployment: str) -> Pricing:
    inst = cat.instance(hw.instance_type)
    region = wm.spec.constraints.region
    neuron = cat.accelerator_of(inst).kind == "neuron"
    if deployment == "sagemaker":
        p = cat.sagemaker_price(inst, region)
        spot = None
        control = 0.0
    else:
        p = inst.price(region)
        spot = inst.spot_discount.fraction
        control = EKS_CONTROL_PLANE_USD_PER_HOUR
    assert p.usd_per_hour is not None
    return Pricing(
        usd_per_hour=p.usd_per_hour,
        price_assumed=p.assumed,
        price_source=p.source,
        price_as_of=str(p.as_of),
        spot_discount=spot,
        spot_assumed=inst.spot_discount.assumed,
        control_plane_usd_per_hour=control,
        lead_time_s=SCALE_UP_LEAD_S_NEURON if neuron else SCALE_UP_LEAD_S_GPU,
    )


def _deployments(wm: WorkloadModel) -> list[str]:
    return [d for d in ("eks", "sagemaker") if d in wm.spec.constraints.deployments]


def _capacity_type(wm: WorkloadModel, deployment: str) -> str:
    caps = wm.spec.constraints.capacity
    if deployment == "sagemaker" or "on-demand" in caps:
        return "on-demand"
    return "spot"


def _ranked_usd_per_month(on_demand: float, spot: float | None, capacity_type: str) -> float:
    """The monthly cost an architecture is ranked by: its spot cost where it runs on spot, else on-demand."""
    if capacity_type == "spot" and spot is not None:
        return float(spot)
    return float(on_demand)


def _rank_cost(arch: dict[str, Any]) -> float:
    cost = arch["cost"]
    return _ranked_usd_per_month(cost["usd_per_month"], cost.get("usd_per_month_spot"), arch["capacity_type"])


def _stats_dict(sim: Any, metric: str) -> dict[str, float]:
    s = getattr(sim, metric)
    digits = 3 if metric == "e2e_s" else 1
    return {k: round(float(getattr(s, k)), digits) for k in ("p50", "p95", "p99")}


def _architecture(
    wm: WorkloadModel, cat: Catalog, opt: Option, deployment: str, headroom: float, seed: int
) -> dict[str, Any]:
    assert opt.capacity is not None
    hw = opt.hw
    usable = opt.capacity.rate_rps * (1 - headroom)
    pricing = _pricing(cat, wm, hw, deployment)
    users = wm.spec.users.total if wm.spec.users else None
    cost = project(wm, usable, hw.replicas_per_instance, pricing, users)
    nodes = cost.pop("_nodes")
    sched = cost["schedule"]["replicas_by_hour"]
    peak_replicas = max(sched)
    per_replica_peak = wm.peak_rps / peak_replicas
    sim = opt.predict(wm, per_replica_peak, seed)
    cap_type = _capacity_type(wm, deployment)
    inst = cat.instance(hw.instance_type)
    acc = cat.accelerator_of(inst)
    defaults = opt.cfg.defaults(cat)
    slo_ok = not violations(sim, wm.slo)
    notes: list[str] = []
    if pricing.price_assumed:
        notes.append(f"price assumed: {pricing.price_source}")
    if hw.replicas_per_instance > 1:
        notes.append(
            f"{hw.replicas_per_instance} replicas share one {hw.instance_type} (TP{hw.tensor_parallel})"
        )
    if deployment == "sagemaker":
        notes.append("SageMaker real-time endpoint: same hardware model, SageMaker instance prices, no spot")
    return {
        "rank": None,
        "id": f"{deployment}:{hw.instance_type}:tp{hw.tensor_parallel}:{hw.quantization}:{hw.engine}:{cap_type}",
        "model": wm.model_id,
        "deployment": deployment,
        "instance_type": hw.instance_type,
        "accelerator": acc.id,
        "accelerators_per_replica": hw.tensor_parallel / acc.cores_per_chip
        if acc.cores_per_chip > 1
        else hw.tensor_parallel,
        "tensor_parallel": hw.tensor_parallel,
        "quantization": hw.quantization,
        "engine": hw.engine,
        "capacity_type": cap_type,
        "replicas": {"peak": peak_replicas, "min": min(sched), "mean": round(sum(sched) / 24, 2)},
        "replicas_per_instance": hw.replicas_per_instance,
        "instances": {"peak": nodes["peak"], "min": nodes["min"], "mean": round(nodes["mean"], 2)},
        "per_replica": {
            "max_concurrency": round(opt.capacity.rate_rps * sim.e2e_s.mean, 1),
            "rps": round(usable, 4),
            "rps_slo_limit": round(opt.capacity.rate_rps, 4),
            "rps_at_peak": round(per_replica_peak, 4),
            "kv_cache_tokens": int(opt.fit.kv_cache_tokens),
        },
        "predicted": {m: _stats_dict(sim, m) for m in ("ttft_ms", "tpot_ms", "e2e_s")},
        # how far the prediction may be off: the calibration it used and that calibration's cross-validated error
        "calibration": summary(opt.step.profile),
        "measured": None,
        "meets_slo": slo_ok,
        "headroom_pct": round(100 * (1 - per_replica_peak / opt.capacity.rate_rps), 1),
        "cost": cost,
        "serving": {
            "max_model_len": defaults.max_model_len if hasattr(defaults, "max_model_len") else None,
            "gpu_memory_utilization": getattr(defaults, "gpu_memory_utilization", None),
            "max_num_seqs": getattr(defaults, "max_num_seqs", None),
            "max_num_batched_tokens": getattr(defaults, "max_num_batched_tokens", None),
        },
        "weights_gb": round(cat.model(wm.model_id).weight_bytes(hw.quantization) / 1e9, 1),
        "notes": notes,
    }


#: When the operating point's full simulation misses an SLO the capacity search's shorter probes passed (sampling
#: noise at the edge), the capacity is cut by this factor and re-checked, up to VERIFY_TRIES times.
VERIFY_BACKOFF = 0.85
VERIFY_TRIES = 4


def _verified(
    wm: WorkloadModel, cat: Catalog, opt: Option, deployments: list[str], headroom: float, seed: int
) -> list[dict[str, Any]] | None:
    """Architectures for an option whose own prediction at the operating point meets every SLO target."""
    assert opt.capacity is not None
    for _ in range(VERIFY_TRIES):
        archs = [_architecture(wm, cat, opt, d, headroom, seed) for d in deployments]
        if all(a["meets_slo"] for a in archs):
            return archs
        opt.capacity.rate_rps *= VERIFY_BACKOFF
    return None


def _bedrock(wm: WorkloadModel, offer: BedrockOffer) -> tuple[dict[str, Any] | None, str | None]:
    """A Bedrock on-demand architecture, or the reason it is rejected."""
    rid = f"bedrock:{offer.bedrock_model_id}"
    q = offer.quota
    if q.tokens_per_minute:
        # TPM is reserved at request start as input + max tokens (the p99 output bounds max_tokens)
        tpm = wm.peak_rps * 60 * (wm.input_tokens.mean + wm.output_tokens.percentile("p99"))
        if tpm > q.tokens_per_minute:
            return None, (
                f"over the Bedrock quota: {tpm:,.0f} tokens/minute at peak > {q.tokens_per_minute:,} default"
                " (request an increase, or use provisioned throughput)"
            )
    if q.requests_per_minute and wm.peak_rps * 60 > q.requests_per_minute:
        return (
            None,
            f"over the Bedrock quota: {wm.peak_rps * 60:,.0f} requests/minute > {q.requests_per_minute:,}",
        )
    lat = offer.latency
    if lat is None:
        return None, f"no latency profile for {offer.name} on Bedrock (not measured, none assumed)"
    tpot_ms = 1000 / lat.output_tokens_per_s
    out = wm.output_tokens
    ttft = {"p50": lat.ttft_ms_p50, "p95": lat.ttft_ms_p95, "p99": lat.ttft_ms_p95 * 1.3}
    tpot = {"p50": tpot_ms, "p95": tpot_ms * 1.2, "p99": tpot_ms * 1.4}
    e2e = {
        k: round((ttft[k] + tpot[k] * max(out.percentile(k if k != "p50" else "p50") - 1, 0)) / 1000, 3)
        for k in ("p50", "p95", "p99")
    }
    predicted = {
        "ttft_ms": {k: round(v, 1) for k, v in ttft.items()},
        "tpot_ms": {k: round(v, 1) for k, v in tpot.items()},
        "e2e_s": e2e,
    }
    bad = [
        describe_violation(m, p, predicted[m][p if p in predicted[m] else "p95"], limit)
        for m, p, limit in wm.slo.targets()
        if predicted[m][p if p in predicted[m] else "p95"] > limit
    ]
    users = wm.spec.users.total if wm.spec.users else None
    cost = bedrock_bill(wm, offer.input_usd_per_1m_tokens, offer.output_usd_per_1m_tokens, users)
    arch = {
        "rank": None,
        "id": rid,
        "model": wm.model_id,
        "deployment": "bedrock",
        "instance_type": None,
        "accelerator": None,
        "accelerators_per_replica": None,
        "tensor_parallel": None,
        "quantization": None,
        "engine": "bedrock",
        "capacity_type": "on-demand",
        "replicas": None,
        "per_replica": None,
        "predicted": predicted,
        "measured": None,
        "meets_slo": not bad,
        "headroom_pct": None,
        "cost": cost,
        "bedrock": {
            "model_id": offer.bedrock_model_id,
            "quota": q.model_dump(mode="json"),
            "latency_assumed": lat.assumed,
            "latency_source": lat.source,
        },
        "notes": [
            "latency profile assumed until measured: " + lat.source,
            f"prices as of {offer.as_of}: {offer.source}",
        ],
    }
    if bad:
        return arch, "; ".join(bad) + " (assumed Bedrock latency profile)"
    return arch, None


def _kind_of(reason: str | None) -> str:
    if reason and reason.startswith("over the Bedrock quota"):
        return "quota"
    if reason and reason.startswith("no latency profile"):
        return "unsupported"
    return "slo"


def _pareto(archs: list[dict[str, Any]]) -> None:
    """Mark the architectures no other beats on both monthly cost and p95 e2e latency."""
    pts = sorted(archs, key=lambda a: (_rank_cost(a), a["predicted"]["e2e_s"]["p95"]))
    best = math.inf
    for a in pts:
        lat = a["predicted"]["e2e_s"]["p95"]
        a["pareto"] = lat < best
        best = min(best, lat)


def _diagnose(wm: WorkloadModel, near: list[tuple[Any, dict[str, float]]]) -> dict[str, Any]:
    """When nothing is feasible: which SLO binds, and what the closest candidate achieves."""
    if not near:
        return {"binding": None, "message": "no candidate fits the constraints (see rejected)"}
    counts: dict[str, int] = {}
    best: dict[str, tuple[float, str]] = {}
    for cand, closest in near:
        hw = cand.hw if isinstance(cand, Option) else cand
        label = f"{hw.instance_type} TP{hw.tensor_parallel} {hw.quantization}"
        for key, value in closest.items():
            counts[key] = counts.get(key, 0) + 1
            if key not in best or value < best[key][0]:
                best[key] = (value, label)
    binding = max(counts, key=lambda k: counts[k])
    value, where = best[binding]
    metric, pct = binding.split(".")
    name, unit, _ = {"ttft_ms": ("TTFT", "ms", 1), "tpot_ms": ("TPOT", "ms", 1), "e2e_s": ("e2e", "s", 1)}[
        metric
    ]
    shown = f"{value:.2f} s" if unit == "s" else f"{value:.0f} ms"
    msg = f"best {name} {pct} is {shown} on {where}; relax {name} {pct} to {shown}"
    if metric in ("e2e_s",) and wm.output_tokens.mean > 1:
        limit = dict((p, v) for m, p, v in wm.slo.targets() if m == metric)[pct]
        ratio = limit / value
        cap = int(wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95") * ratio)
        msg += f" or cap output at about {max(cap, 1)} tokens"
    return {"binding": binding, "closest": {"value": value, "on": where}, "message": msg}


def estimate(
    spec: WorkloadSpec,
    top: int | None = None,
    *,
    catalog: Catalog | None = None,
    headroom: float = DEFAULT_HEADROOM,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Estimate every candidate architecture for a workload; the JSON contract of DESIGN.md."""
    from sizing.perf.config import HardwareConfig
    from sizing.perf.memory import memory_fit
    from sizing.perf.simulator import bounds
    from sizing.perf.step import StepModel

    t0 = time.perf_counter()
    cat = catalog or load_catalog()
    wm = resolve(spec, cat)
    enum = enumerate_candidates(wm, cat)
    rejected: list[dict[str, str]] = list(enum.rejected)
    deployments = _deployments(wm)
    c = wm.spec.constraints
    options: list[Option] = []
    near: list[tuple[Any, dict[str, float]]] = []
    # 1. memory fit and roofline bounds for every hardware option (cheap)
    for hw in enum.hardware:
        cfg = HardwareConfig(wm.model_id, hw.instance_type, hw.tensor_parallel, hw.quantization, hw.engine)
        fit = memory_fit(cfg, catalog=cat)
        if not fit.fits:
            rejected.append({"id": hw.key, "kind": "memory", "reason": f"does not fit: {fit.reason}"})
            continue
        step = StepModel.for_config(cfg, catalog=cat)
        b = bounds(step, wm.input_tokens.mean, wm.output_tokens.mean)
        early = _early_reject(wm.slo, b, wm)
        if early:
            rejected.append({"id": hw.key, "kind": "slo", "reason": early[0]})
            near.append((hw, early[1]))
            continue
        # the cost the ranking reads (spot where the workload allows only spot), at the roofline's capacity: no
        # replica serves more, and fewer requests per replica never cost less
        pricings = [_pricing(cat, wm, hw, d) for d in deployments]
        monthly = monthly_usd(wm, b.max_requests_per_s, hw.replicas_per_instance, pricings)
        lb = min(
            (
                _ranked_usd_per_month(on_demand, spot, _capacity_type(wm, d))
                for d, (on_demand, spot) in zip(deployments, monthly, strict=True)
            ),
            default=math.inf,  # Bedrock alone: no instance to bound
        )
        options.append(
            Option(hw, cfg, fit, step, b.max_requests_per_s, lb, cat.instance(hw.instance_type).accelerator)
        )
    options.sort(key=lambda o: o.lb_cost)
    # 2. simulate cheapest-bound first; stop when no remaining option can enter the certified ranking
    certify = max(top or 0, DEFAULT_CERTIFY)
    by_performance: dict[tuple[str, int, str, str], Option] = {}
    feasible: list[dict[str, Any]] = []
    for i, opt in enumerate(options):
        costs = sorted(_rank_cost(a) for a in feasible)
        if len(costs) >= certify and opt.lb_cost > costs[certify - 1]:
            for rest in options[i:]:
                rejected.append(
                    {
                        "id": rest.hw.key,
                        "kind": "dominated",
                        "reason": f"dominated: costs at least ${rest.lb_cost:,.0f}/month (roofline bound), more than"
                        f" the {certify} cheapest feasible architectures",
                    }
                )
            break
        if progress:
            progress(i + 1, len(options), opt.hw.key)
        known = by_performance.get(opt.perf_key)
        if known is not None and known.capacity is not None:
            # same accelerators, TP, quantization and engine as an option already searched: same replica
            capacity = dataclasses.replace(known.capacity)
            opt.predictions = known.predictions
        else:
            capacity = max_rate_under_slo(opt.step, wm, opt.bound_rps, seed)
            by_performance[opt.perf_key] = opt
        opt.capacity = capacity
        if not capacity.feasible:
            rejected.append({"id": opt.hw.key, "kind": "slo", "reason": capacity.reason})
            if capacity.closest:
                near.append((opt, capacity.closest))
            continue
        archs = _verified(wm, cat, opt, deployments, headroom, seed)
        if archs is None:
            rejected.append(
                {
                    "id": opt.hw.key,
                    "kind": "slo",
                    "reason": "SLO holds only at the edge: the full simulation at the operating point misses it",
                }
            )
            continue
        for arch in archs:
            if c.max_monthly_usd and _rank_cost(arch) > c.max_monthly_usd:
                rejected.append(
                    {
                        "id": arch["id"],
                        "kind": "budget",
                        "reason": f"over budget: ${_rank_cost(arch):,.0f}/month > max_monthly_usd"
                        f" ${c.max_monthly_usd:,.0f}",
                    }
                )
                continue
            feasible.append(arch)
    # 3. Bedrock
    for offer in enum.bedrock:
        bedrock_arch, reason = _bedrock(wm, offer)
        if reason is None and bedrock_arch is not None:
            if c.max_monthly_usd and _rank_cost(bedrock_arch) > c.max_monthly_usd:
                rejected.append(
                    {
                        "id": bedrock_arch["id"],
                        "kind": "budget",
                        "reason": f"over budget: ${_rank_cost(bedrock_arch):,.0f}/month",
                    }
                )
            else:
                feasible.append(bedrock_arch)
        else:
            rejected.append(
                {
                    "id": f"bedrock:{offer.bedrock_model_id}",
                    "kind": _kind_of(reason),
                    "reason": reason or "rejected",
                }
            )
    # 4. rank
    feasible.sort(
        key=lambda a: (_rank_cost(a), -(a["headroom_pct"] or 0), (a.get("instances") or {}).get("peak", 0))
    )
    for rank, a in enumerate(feasible, start=1):
        a["rank"] = rank
    _pareto(feasible)
    shown = feasible[:top] if top else feasible
    elapsed = time.perf_counter() - t0
    result: dict[str, Any] = {
        "workload": wm.derived(),
        "architectures": shown,
        "rejected": rejected,
        "assumptions": _assumptions(cat, headroom),
        "search": {
            "hardware_options": len(enum.hardware),
            "simulated": sum(1 for o in options if o.capacity is not None),
            "capacity_searches": len(by_performance),
            "feasible": len(feasible),
            "seconds": round(elapsed, 3),
        },
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if not feasible:
        result["infeasible"] = _diagnose(wm, near)
    return result


def _early_reject(slo: SLO, b: Any, wm: WorkloadModel) -> tuple[str, dict[str, float]] | None:
    """Roofline lower bounds already above an SLO: no simulation can do better."""
    floor = {
        "ttft_ms": b.min_ttft_s * 1000,
        "tpot_ms": b.min_tpot_s * 1000,
        "e2e_s": b.min_ttft_s + b.min_tpot_s * max(wm.output_tokens.mean - 1, 0),
    }
    bad: list[tuple[str, str, float, float]] = []
    for metric, pct, limit in slo.targets():
        if metric == "e2e_s" and pct == "p50":
            value = b.min_ttft_s + b.min_tpot_s * max(wm.output_tokens.percentile("p50") - 1, 0)
        elif metric == "e2e_s":
            value = b.min_ttft_s + b.min_tpot_s * max(
                wm.output_tokens.percentile("p95" if pct == "p90" else pct) - 1, 0
            )
        else:
            value = floor[metric]
        if value > limit:
            bad.append((metric, pct, value, limit))
    if not bad:
        return None
    reason = "; ".join(describe_violation(*v) for v in bad) + " even unloaded (roofline bound)"
    return reason, {f"{m}.{p}": v for m, p, v, _ in bad}


def _assumptions(cat: Catalog, headroom: float) -> dict[str, Any]:
    from sizing.perf.calibration import load_profiles

    prof = load_profiles()
    return {
        "headroom": headroom,
        "calibration": {k: prof.get(k) for k in ("version", "date") if k in prof},
        "prices": "on-demand EC2/SageMaker prices per catalog entry (source and as-of in each architecture's cost.price)",
        "spot": "spot discounts per family, most assumed (see cost.price.spot_discount_assumed); the min_replicas base stays on-demand",
        "savings_plan_1y_discount": SAVINGS_PLAN_1Y_DISCOUNT,
        "scale_up_lead_s": {"gpu": SCALE_UP_LEAD_S_GPU, "neuron": SCALE_UP_LEAD_S_NEURON},
        "bedrock_latency": "assumed until measured (catalog latency profiles)",
        "arrivals": "Poisson within each hour; hourly rates from the traffic profile",
    }
