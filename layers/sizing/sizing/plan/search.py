"""The product's answer: architectures ranked by monthly cost that meet the workload's SLOs.

Search is branch and bound. Every hardware option gets a cheap roofline upper bound on per-replica capacity, hence
a lower bound on the monthly cost it is ranked by (its spot cost where the workload allows only spot); options are
then simulated cheapest-bound first, and the search stops once the next option's *lower* bound exceeds the cost of
the `certify`-th cheapest feasible architecture found -- such options cannot enter the ranking and are reported as
dominated, with their bound.

Each simulated option is a `ServingConfig`: the engine's defaults with a context covering the workload, then a
coordinate search over its runtime parameters (`max_num_batched_tokens`, `max_num_seqs`, an fp8 KV cache) keeps the
configuration with the highest capacity under the SLOs, hence the lowest cost; the architecture says what the
tuning gained over the defaults."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sizing.catalog import Catalog, load_catalog
from sizing.catalog.models import BedrockChoice
from sizing.catalog.modes import Modes, ServiceTiers, load_modes
from sizing.catalog.regions import region_name
from sizing.learn.measured import at_throughput, describe
from sizing.perf.calibration import load_profiles, profile_for, summary
from sizing.perf.config import HardwareConfig
from sizing.perf.managed import REFERENCE_PROMPT_TOKENS, PromptPrefill, assumed_prefill, bedrock_ttft_ms
from sizing.perf.memory import memory_fit
from sizing.perf.simulator import Bounds, bounds
from sizing.perf.step import StepModel
from sizing.plan.candidates import Enumeration, HardwareOption, enumerate_candidates
from sizing.plan.capacity import (
    UNITS,
    Capacity,
    describe_violation,
    grid_point_above,
    margin,
    max_rate_under_slo,
    predict_at,
    probe,
    stat,
    violations,
)
from sizing.plan.cost import (
    ASYNC_SCALE_IN_S,
    BATCH_E2E_S,
    BATCH_JOB_WINDOW_H,
    BEDROCK_BATCH_WINDOW_H,
    COMMITTED_TPM_HEADROOM,
    DAYS_PER_MONTH,
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    HOURS_PER_MONTH,
    SAVINGS_PLAN_1Y_DISCOUNT,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    Pricing,
    async_job,
    batch_deadline_h,
    bedrock_batch_bill,
    bedrock_bill,
    expected_spot_interruptions,
    is_batch_workload,
    monthly_usd,
    nodes_for,
    peak_tokens_per_minute,
    project,
    provisioned_throughput_bill,
    provisioned_units,
    reserved_tier_bill,
    spread_zones,
)
from sizing.plan.measured import measured_capacity
from sizing.plan.serving import (
    CONTEXT_PERCENTILE,
    Context,
    context_for,
    default_serving,
    tuning_variants,
    with_effective_batch,
)
from sizing.plan.serving import changes as serving_changes
from sizing.results import (
    AlsoFits,
    Architecture,
    BatchJob,
    ContextInfo,
    Cost,
    EstimateResult,
    Headroom,
    InferenceComponentsInfo,
    Instances,
    NotCheaper,
    Percentiles,
    Placement,
    Predicted,
    QuotaFlag,
    Rejected,
    RejectedKind,
    Replicas,
    SpotInfo,
    Tuning,
    ranked_usd_per_month,
)
from sizing.serving import ServingConfig
from sizing.workload import SLO, WorkloadModel, WorkloadSpec, resolve

#: Default share of a replica's SLO capacity kept free at peak (bursts within the hour, estimator error).
DEFAULT_HEADROOM = 0.20
#: Rows of the ranking certified by simulation even when the caller asks for fewer (the ranking's top stays
#: exact). A row is one replica configuration: same-performance instance sizes fold into it ("also fits on"), so
#: five rows show as many distinct choices as the eight sizes-apart architectures this certified before folding.
DEFAULT_CERTIFY = 5
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
#: The summary names the SLO that excluded cheaper hardware when the answer costs at least this many times the
#: cheapest hardware option's cost bound.
MUCH_DEARER = 2.0
#: Cheaper excluded options listed in `why_not_cheaper`.
WHY_NOT_CHEAPER_SHOWN = 3

Progress = Callable[[int, int, str], None]


@dataclass
class Replica:
    """One serving configuration of a hardware option, with its memory fit and step model."""

    serving: ServingConfig
    cfg: Any
    fit: Any
    step: Any
    #: the roofline's optimistic limits of the replica (its capacity bound, and the early SLO check's floors)
    bounds: Bounds
    capacity: Capacity | None = None
    #: predictions at an operating point, by rate: shared by every option holding this replica (EKS and SageMaker,
    #: instance sizes of one accelerator), which the simulation does not tell apart
    predictions: dict[float, Any] = field(default_factory=dict)

    @property
    def bound_rps(self) -> float:
        """No replica serves more requests a second than its roofline bound."""
        return self.bounds.max_requests_per_s

    def predict(self, wm: WorkloadModel, rate: float, seed: int) -> Any:
        key = round(rate, 9)
        if key not in self.predictions:
            self.predictions[key] = predict_at(self.step, wm, rate, seed)
        return self.predictions[key]


@dataclass
class Option:
    hw: HardwareOption
    default: Replica
    lb_cost: float
    fit_accelerator: str
    #: the configuration ranked (the default until tuning finds better)
    chosen: Replica | None = None
    #: serving configurations simulated for this replica (the defaults and each tuning variant probed)
    searched: int = 1
    #: of those, the ones given a whole capacity search
    capacity_searches: int = 0

    @property
    def replica(self) -> Replica:
        return self.chosen or self.default

    @property
    def capacity(self) -> Capacity | None:
        return self.replica.capacity

    @property
    def perf_key(self) -> tuple[str, ServingConfig]:
        """What decides a replica's performance; instance sizes of one family (g6e.xlarge ... g6e.16xlarge) and
        twins like p5e/p5en share it, so their capacity search and tuning run once."""
        return (self.fit_accelerator, self.default.serving)

    def predict(self, wm: WorkloadModel, rate: float, seed: int) -> Any:
        return self.replica.predict(wm, rate, seed)


def _pricing(cat: Catalog, wm: WorkloadModel, hw: HardwareOption, deployment: str) -> Pricing:
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


def _deployments(wm: WorkloadModel) -> list[str]:
    return [d for d in ("eks", "sagemaker") if d in wm.spec.constraints.deployments]


def _capacity_type(wm: WorkloadModel, deployment: str) -> str:
    caps = wm.spec.constraints.capacity
    if deployment == "sagemaker" or "on-demand" in caps:
        return "on-demand"
    return "spot"


def _stats(sim: Any, metric: str) -> dict[str, float]:
    s = getattr(sim, metric)
    digits = 3 if metric == "e2e_s" else 1
    return {k: round(float(getattr(s, k)), digits) for k in ("p50", "p95", "p99")}


def _predicted(sim: Any) -> dict[str, dict[str, float]]:
    return {m: _stats(sim, m) for m in ("ttft_ms", "tpot_ms", "e2e_s")}


def _headroom(sim: Any, slo: SLO, load_pct: float, reasoning: str) -> Headroom:
    """Load headroom and each SLO target's latency margin at the operating point, and how the sizing allowed for
    the estimator's error (`capacity.margin`)."""
    latency: dict[str, float] = {}
    for metric, pct, limit in slo.targets():
        latency[f"{metric}.{pct}"] = round(100 * (1 - stat(sim, metric, pct) / limit), 1)
    tightest = min(latency, key=lambda k: latency[k]) if latency else None
    return Headroom(
        load_pct=load_pct,
        latency=latency,
        tightest=tightest,
        tightest_pct=latency[tightest] if tightest else None,
        reasoning=reasoning,
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


def _architecture(
    wm: WorkloadModel, cat: Catalog, opt: Option, deployment: str, headroom: float, seed: int, ctx: Context
) -> Architecture:
    assert opt.capacity is not None
    hw = opt.hw
    rep = opt.replica
    allowance = margin(rep.step, wm.slo, headroom)
    usable = opt.capacity.rate_rps * allowance.usable
    pricing = _pricing(cat, wm, hw, deployment)
    users = wm.spec.users.total if wm.spec.users else None
    cost = project(wm, usable, hw.replicas_per_instance, pricing, users)
    nodes = cost.pop("_nodes")
    sched = cost["schedule"]["replicas_by_hour"]
    peak_replicas = max(sched)
    per_replica_peak = _per_replica_peak(wm, peak_replicas)
    plan = opt.capacity.measured
    answered = plan is not None and plan.answered
    if answered:
        # Poisson arrivals on the replica rescaled to its measurement (the measured figures are reported)
        sim = predict_at(plan.step, wm, per_replica_peak, seed)
    else:
        sim = opt.predict(wm, per_replica_peak, seed)
    # in flight at the SLO capacity, from the capacity search's own probe there (a simulation at it otherwise)
    e2e_at_capacity = opt.capacity.e2e_mean_s
    if e2e_at_capacity is None and not answered:
        e2e_at_capacity = float(opt.predict(wm, opt.capacity.rate_rps, seed).e2e_s.mean)
    cap_type = _capacity_type(wm, deployment)
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
    return Architecture.model_validate(
        {
            "id": Architecture.make_id(
                deployment, hw.instance_type, hw.tensor_parallel, hw.quantization, hw.engine, cap_type
            ),
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
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
                "max_concurrency": round(
                    measured["capacity_in_flight"]
                    if measured is not None
                    else opt.capacity.rate_rps * (e2e_at_capacity or 0.0),
                    1,
                ),
                "in_flight": round(
                    measured["in_flight"] if measured is not None else per_replica_peak * sim.e2e_s.mean, 1
                ),
                "rps": round(usable, 4),
                "rps_slo_limit": round(opt.capacity.rate_rps, 4),
                "rps_at_peak": round(per_replica_peak, 4),
                "kv_cache_tokens": int(rep.fit.kv_cache_tokens),
            },
            "predicted": _predicted(shown),
            # how far the prediction may be off: the calibration it used and that calibration's cross-validated error
            "calibration": summary(rep.step.profile),
            **(
                {"basis": "measured", "measurement": {**measured["block"], "modelled": _predicted(sim)}}
                if measured is not None
                else {}
            ),
            "measured": None,
            "meets_slo": slo_ok,
            "headroom_pct": load_pct,
            "headroom": _headroom(shown, wm.slo, load_pct, allowance.reasoning),
            "cost": cost,
            "serving": rep.serving,
            "context": ContextInfo.model_validate(ctx.describe()),
            "placement": placement,
            "weights_gb": round(cat.model(wm.model_id).weight_bytes(hw.quantization) / 1e9, 1),
            "region": region,
            "notes": notes,
        }
    )


#: When the operating point's full simulation misses an SLO the capacity search's shorter probes passed (sampling
#: noise at the edge), the capacity is cut by this factor, below the rate that missed, and re-checked, up to
#: VERIFY_TRIES times.
VERIFY_BACKOFF = 0.85
VERIFY_TRIES = 4


def _verified(
    wm: WorkloadModel,
    cat: Catalog,
    opt: Option,
    deployments: list[str],
    headroom: float,
    seed: int,
    ctx: Context,
) -> list[Architecture] | None:
    """Architectures for an option whose own prediction at the operating point meets every SLO target."""
    assert opt.capacity is not None
    usable = margin(opt.replica.step, wm.slo, headroom).usable
    for _ in range(VERIFY_TRIES):
        archs = [_architecture(wm, cat, opt, d, headroom, seed, ctx) for d in deployments]
        if all(a.meets_slo for a in archs):
            return archs
        # below the per-replica rate that missed: a cut that leaves the replica count as it is (a fleet at its
        # minimum, or a capacity far above the rate each replica sees) would re-check the same operating point
        missed = min(_per_replica_peak(wm, a.replicas.peak) for a in archs if not a.meets_slo)
        opt.capacity.rate_rps = min(opt.capacity.rate_rps, missed / usable) * VERIFY_BACKOFF
        opt.capacity.e2e_mean_s = None  # no probe ran at the lowered capacity
    return None


#: The output budget a Bedrock request reserves (`max_tokens`): the p99 of the workload's output lengths, so 99% of
#: answers finish within it. Bedrock reserves input + max_tokens against the tokens-per-minute quota at request start.
BEDROCK_MAX_TOKENS_PERCENTILE = "p99"
#: A quota increase is asked for with room above the peak need, rounded up to this many tokens (or requests) per
#: minute: the need is an hourly mean, and a minute within the hour runs above it.
QUOTA_REQUEST_HEADROOM = 1.2
QUOTA_ROUND_TOKENS = 100_000
QUOTA_ROUND_REQUESTS = 100


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def _bedrock_quota(wm: WorkloadModel, choice: BedrockChoice) -> tuple[QuotaFlag | None, str | None]:
    """The quota caveat of a Bedrock offer at the workload's peak, or the hard limit that rejects it."""
    q = choice.offer.quota
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    tpm = wm.peak_rps * 60 * (wm.input_tokens.mean + max_tokens)
    rpm = wm.peak_rps * 60
    over_t = bool(q.tokens_per_minute) and tpm > (q.tokens_per_minute or 0)
    over_r = bool(q.requests_per_minute) and rpm > (q.requests_per_minute or 0)
    if (over_t or over_r) and not q.adjustable:
        return None, (
            f"over a hard Bedrock limit: {tpm:,.0f} tokens/minute and {rpm:,.0f} requests/minute at peak exceed"
            f" {q.tokens_per_minute or '-'} / {q.requests_per_minute or '-'}, which AWS does not raise"
        )
    if not q.tokens_per_minute and not q.requests_per_minute:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                requests_per_minute_needed=round(rpm),
                message=f"needs {tpm:,.0f} tokens/min at peak; default quota not published (check Service Quotas)",
                source=q.source,
            ),
            None,
        )
    parts: list[str] = []
    need_t = _round_up(tpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_TOKENS) if over_t else None
    need_r = _round_up(rpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_REQUESTS) if over_r else None
    if need_t:
        parts.append(f"{need_t:,} tokens/min (default {q.tokens_per_minute:,})")
    if need_r:
        parts.append(f"{need_r:,} requests/min (default {q.requests_per_minute:,})")
    name = q.quota_name or f"tokens per minute for {choice.offer.name}"
    if not parts:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                tokens_per_minute_default=q.tokens_per_minute,
                requests_per_minute_needed=round(rpm),
                requests_per_minute_default=q.requests_per_minute,
                message=f"within the default quota: {tpm:,.0f} of {q.tokens_per_minute or 0:,} tokens/min at peak",
                source=q.source,
            ),
            None,
        )
    return (
        QuotaFlag(
            needs_increase=True,
            tokens_per_minute_needed=need_t or round(tpm),
            tokens_per_minute_default=q.tokens_per_minute,
            requests_per_minute_needed=need_r or round(rpm),
            requests_per_minute_default=q.requests_per_minute,
            message="needs a quota increase to " + " and ".join(parts),
            request=f"Service Quotas > Amazon Bedrock > '{name}' in {choice.region}: request"
            f" {need_t or need_r:,} (peak need {tpm:,.0f} tokens/min = {rpm:,.0f} requests/min x"
            f" ({wm.input_tokens.mean:,.0f} input + {max_tokens:,.0f} max_tokens))",
            source=q.source,
        ),
        None,
    )


def _bedrock_predicted(
    wm: WorkloadModel, lat: Any, prefill: PromptPrefill | None = None
) -> dict[str, dict[str, float]]:
    """Bedrock latencies from the offer's stated profile; TTFT grows with the prompt at each percentile by the
    prompt's prefill beyond the short chat the profile stands for (`sizing.perf.managed`)."""
    tpot_ms = 1000 / lat.output_tokens_per_s
    out = wm.output_tokens
    prompt = wm.input_tokens
    ttft = {
        "p50": bedrock_ttft_ms(lat.ttft_ms_p50, prompt.percentile("p50"), prefill),
        "p95": bedrock_ttft_ms(lat.ttft_ms_p95, prompt.percentile("p95"), prefill),
        "p99": bedrock_ttft_ms(lat.ttft_ms_p95 * 1.3, prompt.percentile("p99"), prefill),
    }
    tpot = {"p50": tpot_ms, "p95": tpot_ms * 1.2, "p99": tpot_ms * 1.4}
    e2e = {
        k: round((ttft[k] + tpot[k] * max(out.percentile(k) - 1, 0)) / 1000, 3) for k in ("p50", "p95", "p99")
    }
    return {
        "ttft_ms": {k: round(v, 1) for k, v in ttft.items()},
        "tpot_ms": {k: round(v, 1) for k, v in tpot.items()},
        "e2e_s": e2e,
    }


def _price_note(choice: BedrockChoice) -> str:
    p = choice.prices
    where = (
        choice.region
        if not p.assumed
        else f"us-east-1 (assumed for {choice.region}: no {choice.region} price found)"
    )
    return (
        f"prices from {where}: ${p.input_usd_per_1m_tokens:g} in / ${p.output_usd_per_1m_tokens:g} out per 1M"
        f" tokens, as of {p.as_of}: {p.source}"
    )


def _scope_note(choice: BedrockChoice) -> str:
    if choice.scope == "in-region":
        return f"in-Region: requests are served in {choice.region}"
    if choice.scope == "geography":
        return (
            f"cross-Region inference profile {choice.invoke_id}: requests from {choice.region} may be served in"
            " another Region of its geography, at the source Region's price"
        )
    return f"global inference profile {choice.invoke_id}: requests may be served in any Region"


#: Bedrock service tiers sold per request (`service_tier`): Priority and Flex are priced as multiples of Standard.
TIERS = ("standard", "priority", "flex")


def _tier_multiple(tiers: ServiceTiers, tier: str) -> float:
    return {"standard": 1.0, "priority": tiers.priority_multiple, "flex": tiers.flex_multiple}[tier]


def _bedrock(
    wm: WorkloadModel,
    choice: BedrockChoice,
    tier: str = "standard",
    modes: Modes | None = None,
    batch: bool = False,
) -> tuple[Architecture | None, str | None]:
    """A Bedrock on-demand architecture in a service tier (Standard, Priority or Flex), or the reason it is
    rejected. A default quota below the peak is a caveat (`quota`), not a rejection: AWS raises it on request; the
    three tiers share the on-demand quota. Hard limits (a non-adjustable quota, the context window) and SLO misses
    reject. Priority's latency is Standard's with AWS's "up to 25%" faster output (assumed); Flex has no published
    latency bound, so it is ranked only for batch workloads."""
    offer = choice.offer
    tiers = (modes or load_modes()).bedrock_service_tiers
    rid = f"bedrock:{choice.invoke_id}" + ("" if tier == "standard" else f":{tier}")
    flag, hard = _bedrock_quota(wm, choice)
    if hard:
        return None, hard
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    if offer.context_tokens and wm.input_tokens.percentile("p95") + max_tokens > offer.context_tokens:
        return None, (
            f"over a hard Bedrock limit: p95 input {wm.input_tokens.percentile('p95'):,.0f} + max_tokens"
            f" {max_tokens:,.0f} exceeds {offer.name}'s {offer.context_tokens:,}-token context window"
        )
    lat = offer.latency
    if lat is None:
        return None, f"no latency profile for {offer.name} on Bedrock (not measured, none assumed)"
    if tier == "priority":
        lat = lat.model_copy(
            update={
                "output_tokens_per_s": lat.output_tokens_per_s * tiers.priority_output_speedup,
                "source": f"{lat.source}; Priority: {tiers.priority_latency_source}",
            }
        )
    spec = load_catalog().models.get(wm.model_id)
    prefill = assumed_prefill(spec, load_catalog()) if spec is not None else None
    predicted = _bedrock_predicted(wm, lat, prefill)
    bad = [
        describe_violation(m, p, predicted[m][p if p in predicted[m] else "p95"], limit)
        for m, p, limit in wm.slo.targets()
        if predicted[m][p if p in predicted[m] else "p95"] > limit
    ]
    users = wm.spec.users.total if wm.spec.users else None
    prices = choice.prices
    multiple = _tier_multiple(tiers, tier)
    usd_in = round(prices.input_usd_per_1m_tokens * multiple, 6)
    usd_out = round(prices.output_usd_per_1m_tokens * multiple, 6)
    cost = bedrock_bill(wm, usd_in, usd_out, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
        "tier": tier,
        "tier_multiple": multiple,
        **({"tier_source": tiers.source, "tier_as_of": str(tiers.as_of)} if tier != "standard" else {}),
    }
    notes = [
        "latency profile assumed until measured: " + lat.source,
        (
            f"TTFT grows with the prompt: the stated short-chat TTFT plus the prompt's prefill beyond"
            f" {REFERENCE_PROMPT_TOKENS} tokens ({prefill.basis})"
            if prefill is not None
            else "TTFT is the stated short-chat figure at any prompt length (the model's architecture is not in"
            " the catalog): a long prompt's prefill comes on top of it"
        ),
        _price_note(choice),
        _scope_note(choice),
    ]
    if tier != "standard":
        notes.insert(
            1,
            f"{tier.capitalize()} tier: {multiple:g} x the Standard price = ${usd_in:g} in / ${usd_out:g} out per 1M"
            f" tokens in {choice.region} (as of {tiers.as_of}: {tiers.source})",
        )
    if tier == "flex":
        notes.insert(1, "Flex tier: " + tiers.flex_latency_source)
    if flag is not None and flag.needs_increase:
        notes.insert(0, f"{flag.message}: {flag.request}")
    arch = Architecture.model_validate(
        {
            "id": rid,
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            "predicted": predicted,
            "measured": None,
            "meets_slo": not bad and (tier != "flex" or batch),
            "cost": cost,
            "bedrock": {
                "model_id": choice.invoke_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "on-demand",
                "tier": tier,
                "scope": choice.scope,
                "region": choice.region,
                "quota": offer.quota.model_dump(mode="json"),
                "max_tokens": round(max_tokens),
                "latency_assumed": lat.assumed,
                "latency_source": lat.source,
            },
            "quota": flag,
            "service_tier": tier,
            "region": choice.region,
            "notes": notes,
        }
    )
    if bad:
        return arch, "; ".join(bad) + " (assumed Bedrock latency profile)"
    if tier == "flex" and not batch:
        return arch, (
            "Flex tier: lower priority than Standard under high demand and no published latency bound; ranked only"
            f" for batch workloads (preset batch or an e2e SLO of {BATCH_E2E_S / 3600:g} h or more)"
        )
    return arch, None


def _committed_quota(units: int, what: str, region: str, name: str) -> QuotaFlag:
    return QuotaFlag(
        needs_increase=True,
        message=f"needs {units} {what} (the default quota for a commitment is 0)",
        request=f"AWS Support case: Amazon Bedrock {what} for {name} in {region}",
        source="docs.aws.amazon.com/bedrock/latest/userguide/prov-throughput.html",
    )


def _bedrock_provisioned(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> tuple[Architecture | None, str | None]:
    """Bedrock Provisioned Throughput for the offer when a model-unit price and throughput are known: units sized
    from the busiest hour's tokens per minute, billed every hour of the month. Ranked only when cheaper than the
    on-demand Standard tier for the workload (the question a buyer asks of a commitment)."""
    offer = choice.offer
    pt = modes.bedrock_provisioned.offers.get(offer.bedrock_model_id)
    if pt is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    units = provisioned_units(in_tpm, out_tpm, pt.input_tpm_per_unit, pt.output_tpm_per_unit)
    monthly = provisioned_throughput_bill(pt.usd_per_hour_per_model_unit, units)
    users = wm.spec.users.total if wm.spec.users else None
    out_month = wm.avg_rps * 86400 * DAYS_PER_MONTH * wm.output_tokens.mean
    cost = {
        "usd_per_hour_peak": round(units * pt.usd_per_hour_per_model_unit, 2),
        "usd_per_month": round(monthly, 2),
        "usd_per_million_output_tokens": round(monthly / (out_month / 1e6), 4) if out_month else None,
        "usd_per_user_month": round(monthly / users, 4) if users else None,
        "breakdown": {
            "model_units": units,
            "usd_per_hour_per_model_unit": pt.usd_per_hour_per_model_unit,
            "hours_per_month": HOURS_PER_MONTH,
            "term": pt.term,
            "peak_input_tokens_per_minute": round(in_tpm),
            "peak_output_tokens_per_minute": round(out_tpm),
            "input_tokens_per_minute_per_unit": pt.input_tpm_per_unit,
            "output_tokens_per_minute_per_unit": pt.output_tpm_per_unit,
            "sizing_headroom": COMMITTED_TPM_HEADROOM,
        },
        "price": {
            "source": pt.source,
            "as_of": str(pt.as_of),
            "assumed": pt.assumed,
            "region": choice.region,
            "tier": "provisioned",
        },
    }
    base = on_demand.predicted.model_dump(mode="json") if on_demand is not None else None
    meets = on_demand is not None and on_demand.meets_slo
    arch = Architecture.model_validate(
        {
            "id": f"bedrock:{offer.bedrock_model_id}:provisioned",
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            "predicted": base or {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": {}},
            "measured": None,
            "meets_slo": meets,
            "cost": cost,
            "bedrock": {
                "model_id": offer.bedrock_model_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "provisioned",
                "tier": "provisioned",
                "scope": "in-region",
                "region": choice.region,
                "model_units": units,
                "term": pt.term,
                "latency_assumed": True,
            },
            "quota": _committed_quota(units, "Provisioned Throughput model units", choice.region, offer.name),
            "service_tier": "provisioned",
            "region": choice.region,
            "notes": [
                f"Provisioned Throughput: {units} model unit(s) x ${pt.usd_per_hour_per_model_unit:g}/h x"
                f" {HOURS_PER_MONTH:g} h = ${monthly:,.0f}/month ({pt.term} commitment), sized for the busiest"
                f" hour's {in_tpm:,.0f} input / {out_tpm:,.0f} output tokens/min x {COMMITTED_TPM_HEADROOM:g}"
                f" against {pt.input_tpm_per_unit:,} / {pt.output_tpm_per_unit:,} per unit ({pt.source})",
                "billed every hour provisioned, used or not; served in-Region (cross-Region profiles do not use"
                " Provisioned Throughput); latency taken as the Standard tier's (assumed)",
            ],
        }
    )
    if not meets:
        return (
            arch,
            "misses an SLO with the Standard tier's latency profile (assumed for Provisioned Throughput)",
        )
    if on_demand is not None and monthly >= on_demand.cost.usd_per_month:
        return arch, (
            f"Provisioned Throughput ${monthly:,.0f}/month is not cheaper than on-demand"
            f" ${on_demand.cost.usd_per_month:,.0f}/month for this workload"
        )
    return arch, None


def _bedrock_reserved(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> tuple[Architecture | None, str | None]:
    """The Reserved tier when a price per 1K tokens-per-minute is known (AWS quotes it; none is published)."""
    res = modes.bedrock_service_tiers.reserved
    if res.usd_per_1k_tpm_month is None or on_demand is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    monthly, r_in, r_out = reserved_tier_bill(
        in_tpm, out_tpm, res.usd_per_1k_tpm_month, res.min_input_tpm, res.min_output_tpm
    )
    cost = on_demand.cost.model_dump(mode="json")
    cost.update(
        usd_per_month=round(monthly, 2),
        usd_per_hour_peak=round(monthly / HOURS_PER_MONTH, 2),
        breakdown={
            "reserved_input_tokens_per_minute": r_in,
            "reserved_output_tokens_per_minute": r_out,
            "usd_per_1k_tpm_month": res.usd_per_1k_tpm_month,
            "terms_months": res.terms_months,
        },
        price={"source": res.source, "as_of": str(res.as_of), "region": choice.region, "tier": "reserved"},
    )
    users = wm.spec.users.total if wm.spec.users else None
    cost["usd_per_user_month"] = round(monthly / users, 4) if users else None
    out_month = wm.avg_rps * 86400 * DAYS_PER_MONTH * wm.output_tokens.mean
    cost["usd_per_million_output_tokens"] = round(monthly / (out_month / 1e6), 4) if out_month else None
    arch = on_demand.model_copy(
        update={
            "id": f"bedrock:{choice.invoke_id}:reserved",
            "cost": Cost.model_validate(cost),
            "service_tier": "reserved",
            "bedrock": {**(on_demand.bedrock or {}), "tier": "reserved", "mode": "reserved"},
            "quota": None,
            "notes": [
                f"Reserved tier: ({r_in:,} input + {r_out:,} output tokens/min) / 1,000 x"
                f" ${res.usd_per_1k_tpm_month:g} = ${monthly:,.0f}/month, {' or '.join(map(str, res.terms_months))}"
                f"-month term; traffic above the reservation is served at Standard ({res.source})",
                *on_demand.notes[1:],
            ],
        }
    )
    if monthly >= on_demand.cost.usd_per_month:
        return arch, f"Reserved tier ${monthly:,.0f}/month is not cheaper than on-demand for this workload"
    return arch, None


def _unpriced_note(choice: BedrockChoice, modes: Modes) -> str:
    """What a buyer cannot be quoted here: Provisioned Throughput and (for tiered models) the Reserved tier."""
    pt = modes.bedrock_provisioned
    text = (
        f"Provisioned Throughput not priced: AWS shows model-unit prices and throughput only in the Bedrock console"
        f" ({' or '.join(pt.terms)} commitment for a base model; {pt.source}); a quote in"
        " $SIZING_CATALOG_DIR/modes.yaml ranks it"
    )
    tiers = modes.bedrock_service_tiers
    if tiers.offers_tiers(choice.offer.bedrock_model_id) and tiers.reserved.usd_per_1k_tpm_month is None:
        text += (
            "; Reserved tier not priced: a fixed price per 1K tokens-per-minute quoted by the AWS account team"
            f" (min {tiers.reserved.min_input_tpm:,} input / {tiers.reserved.min_output_tpm:,} output TPM)"
        )
    return text


def _bedrock_options(
    wm: WorkloadModel, choice: BedrockChoice, batch: bool, modes: Modes
) -> list[tuple[str, Architecture | None, str | None]]:
    """Every way the offer is sold for the workload: the Standard tier, Priority and Flex where the model has them,
    Provisioned Throughput and Reserved when priced, and batch inference for a batch workload."""
    out: list[tuple[str, Architecture | None, str | None]] = []
    rid = f"bedrock:{choice.invoke_id}"
    standard, reason = _bedrock(wm, choice, "standard", modes, batch)
    if standard is not None and modes.bedrock_provisioned.offers.get(choice.offer.bedrock_model_id) is None:
        standard = standard.model_copy(update={"notes": [*standard.notes, _unpriced_note(choice, modes)]})
    out.append((rid, standard, reason))
    if modes.bedrock_service_tiers.offers_tiers(choice.offer.bedrock_model_id):
        for tier in TIERS[1:]:
            a, r = _bedrock(wm, choice, tier, modes, batch)
            out.append((f"{rid}:{tier}", a, r))
        a, r = _bedrock_reserved(wm, choice, modes, standard)
        if a is not None:
            out.append((f"{rid}:reserved", a, r))
    a, r = _bedrock_provisioned(wm, choice, modes, standard)
    if a is not None:
        out.append((a.id, a, r))
    if batch:
        a, r = _bedrock_batch(wm, choice)
        out.append((f"{rid}:batch", a, r))
    return out


def _bedrock_batch(wm: WorkloadModel, choice: BedrockChoice) -> tuple[Architecture | None, str | None]:
    """Bedrock batch inference for a batch workload: a day's requests as one job at batch prices."""
    offer = choice.offer
    rid = f"bedrock:{choice.invoke_id}:batch"
    prices = choice.batch_prices
    if prices is None:
        return None, f"{offer.name} has no batch inference on Bedrock"
    deadline = batch_deadline_h(wm)
    if deadline < BEDROCK_BATCH_WINDOW_H:
        return None, (
            f"Bedrock batch jobs complete within {BEDROCK_BATCH_WINDOW_H:g} h, not guaranteed within the e2e SLO"
            f" of {deadline:g} h"
        )
    users = wm.spec.users.total if wm.spec.users else None
    cost, job = bedrock_batch_bill(wm, prices.input_usd_per_1m_tokens, prices.output_usd_per_1m_tokens, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
    }
    window = {
        "p50": BEDROCK_BATCH_WINDOW_H * 3600,
        "p95": BEDROCK_BATCH_WINDOW_H * 3600,
        "p99": BEDROCK_BATCH_WINDOW_H * 3600,
    }
    arch = Architecture.model_validate(
        {
            "id": rid,
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            # a batch request's latency is its job's: the completion window bounds every percentile
            "predicted": {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": window},
            "measured": None,
            "meets_slo": True,
            "cost": cost,
            "bedrock": {
                "model_id": choice.invoke_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "batch",
                "scope": choice.scope,
                "region": choice.region,
                "quota": offer.quota.model_dump(mode="json"),
            },
            "batch": job,
            "region": choice.region,
            "notes": [
                f"Bedrock batch inference: {job['requests']:,} requests a day as one job, ${job['usd_per_job']:,.2f}"
                f" per job (${job['usd_per_million_tokens']:.4f} per 1M tokens), done within"
                f" {BEDROCK_BATCH_WINDOW_H:g} h (AWS's completion window; deadline {deadline:g} h)",
                f"batch prices from {choice.region}: ${prices.input_usd_per_1m_tokens:g} in /"
                f" ${prices.output_usd_per_1m_tokens:g} out per 1M tokens, as of {prices.as_of}"
                + (" (assumed)" if prices.assumed else "")
                + f": {prices.source}",
                _scope_note(choice),
                "batch jobs have their own quotas (records per job, jobs in progress), not the on-demand"
                " tokens-per-minute quota",
            ],
        }
    )
    return arch, None


def _spot_info(wm: WorkloadModel, cat: Catalog, a: Architecture, modes: Modes) -> SpotInfo | None:
    """Spot as a buyer sees it for an EKS architecture with a spot cost: the price, the family's interruption band
    in the Region, the interruptions to expect a month and the on-demand nodes that keep min_replicas up."""
    if a.deployment != "eks" or a.cost.usd_per_month_spot is None or a.instance_type is None:
        return None
    inst = cat.instance(a.instance_type)
    region = a.region or wm.spec.constraints.region
    spot = inst.spot_in(region)
    price = float(a.cost.breakdown.get("instance_usd_per_hour") or inst.price(region).usd_per_hour or 0.0)
    rpi = a.replicas_per_instance or 1
    base = nodes_for(wm.spec.constraints.min_replicas, rpi, spread_zones(wm))
    nodes = list((a.cost.schedule or {}).get("nodes_by_hour") or [])
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


def _sagemaker_async(s: _Search, a: Architecture, modes: Modes, opt: Option) -> Architecture | None:
    """A batch workload's day as one job on a SageMaker asynchronous endpoint: instances start from zero, drain the
    queue at the replicas' usable capacity (the SLO capacity less the allowance for the estimator's error that
    sizes the real-time answers: `capacity.margin`) and scale back to zero, billed per instance-hour. `opt`: the
    hardware option `a` was placed from (its replica is simulated at the drain rate for the job's per-request
    figures and headroom)."""
    wm, cat = s.wm, s.cat
    if a.per_replica is None or a.instance_type is None or a.serving is None:
        return None
    cfg = modes.sagemaker_async
    if (a.predicted.e2e_s.p99 or 0.0) > cfg.max_processing_s:
        return None  # a request would run past the hour asynchronous inference allows it
    price = float(a.cost.breakdown.get("instance_usd_per_hour") or 0.0)
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
    out_month = wm.avg_rps * 86400 * DAYS_PER_MONTH * wm.output_tokens.mean
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
            "tuning": _async_tuning(a, job, job_at, default_drain, drain),
            "also_fits_on": [],
            "notes": [job["note"], f"source: {cfg.source}", *a.notes[:1]],
            **update,
        }
    )


def _drain_rate(s: _Search, rep: Replica) -> float | None:
    """The rate a replica drains an asynchronous job's queue at: its SLO capacity less the sizing allowance (the
    real-time answers' usable capacity); None without a feasible capacity."""
    if rep.capacity is None or not rep.capacity.feasible or rep.capacity.rate_rps <= 0:
        return None
    return rep.capacity.rate_rps * margin(rep.step, s.wm.slo, s.headroom).usable


def _at_drain_rate(s: _Search, opt: Option, a: Architecture, rate: float) -> dict[str, Any]:
    """An asynchronous job's per-request figures: its replica simulated at the drain rate, its headroom there and
    the requests each replica then holds in flight. A replica sized from a measurement keeps the real-time row's
    (measured) figures."""
    rep = opt.replica
    if rep.capacity is None or rep.capacity.measured is not None or a.per_replica is None:
        return {}
    sim = opt.predict(s.wm, rate, s.seed)
    allowance = margin(rep.step, s.wm.slo, s.headroom)
    load_pct = round(100 * (1 - rate / rep.capacity.rate_rps), 1)
    return {
        "predicted": Predicted.model_validate(_predicted(sim)),
        "headroom": _headroom(sim, s.wm.slo, load_pct, allowance.reasoning),
        "per_replica": a.per_replica.model_copy(
            update={"rps_at_peak": round(rate, 4), "in_flight": round(rate * sim.e2e_s.mean, 1)}
        ),
    }


def _kind_of(reason: str | None) -> RejectedKind:
    if reason and reason.startswith("over a hard Bedrock limit"):
        return RejectedKind.quota
    if reason and (reason.startswith("no latency profile") or "no batch inference" in reason):
        return RejectedKind.unsupported
    return RejectedKind.slo


def _pareto(archs: list[Architecture]) -> list[Architecture]:
    """Mark the architectures no other beats on both monthly cost and p95 e2e latency."""
    order = sorted(
        range(len(archs)), key=lambda i: (archs[i].ranked_usd_per_month, archs[i].predicted.e2e_s.p95 or 0.0)
    )
    flags = [False] * len(archs)
    best = math.inf
    for i in order:
        lat = archs[i].predicted.e2e_s.p95 or 0.0
        flags[i] = lat < best
        best = min(best, lat)
    return [a.model_copy(update={"pareto": f}) for a, f in zip(archs, flags, strict=True)]


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
    metric, pct = binding.split(".", 1)
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


def _replica(
    cfg_for: Callable[[ServingConfig], Any],
    serving: ServingConfig,
    wm: WorkloadModel,
    cat: Catalog,
    profiles: dict[tuple[str, str, str], Any] | None = None,
) -> Replica | str:
    """The replica of `serving`, or why it does not fit in memory. `profiles`: calibration profiles already looked
    up in this estimate, by (accelerator, engine, model)."""

    cfg = cfg_for(serving)
    fit = memory_fit(cfg, catalog=cat)
    if not fit.fits:
        return str(fit.reason)
    if fit.max_num_seqs != serving.max_num_seqs:
        # the batch the engine really runs (a Neuron replica compiles for the sequences its KV cache holds)
        serving = with_effective_batch(serving, fit.max_num_seqs)
        cfg = cfg_for(serving)
        fit = memory_fit(cfg, catalog=cat)
    # the fit just computed serves the step model too (StepModel.for_config would compute it again)
    key = (cfg.parts(cat).accelerator.id, cfg.engine, cfg.model_id)
    profile = profiles.get(key) if profiles is not None else None
    if profile is None:
        profile = profile_for(key[0], key[1], model=key[2])
        if profiles is not None:
            profiles[key] = profile
    step = StepModel(cfg, fit, profile, cat)
    b = bounds(step, wm.input_tokens.mean, wm.output_tokens.mean, prefix_tokens=wm.shared_prefix_tokens)
    return Replica(serving, cfg, fit, step, b)


def _tune(
    opt: Option,
    wm: WorkloadModel,
    cat: Catalog,
    seed: int,
    cfg_for: Callable[[ServingConfig], Any],
    accelerator: Any,
    profiles: dict[tuple[str, str, str], Any] | None = None,
) -> None:
    """Coordinate search over the runtime parameters: keep a change when it raises the SLO capacity by more than
    TUNING_MIN_GAIN over the best configuration so far. `profiles`: as `_replica`'s."""
    best = opt.default
    tried: set[ServingConfig] = {best.serving}
    for _ in range(TUNING_ROUNDS):
        improved = False
        for variant in tuning_variants(best.serving, accelerator, batch=is_batch_workload(wm)):
            if variant in tried:
                continue
            tried.add(variant)
            rep = _replica(cfg_for, variant, wm, cat, profiles)
            if isinstance(rep, str):
                continue
            # configurations compare on the estimator's scale (a measured one by its estimate)
            base = best.capacity.comparable_rps if best.capacity and best.capacity.feasible else 0.0
            if rep.bound_rps <= base * (1 + TUNING_MIN_GAIN) or _early_reject(wm.slo, rep, wm):
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
            if rep.capacity.feasible and rep.capacity.comparable_rps > base * (1 + TUNING_MIN_GAIN):
                best, improved = rep, True
        if not improved:
            break
    if best is not opt.default:
        opt.chosen = best


def _per_replica_peak(wm: WorkloadModel, peak_replicas: int) -> float:
    """The requests per second each replica serves at the workload's peak: an architecture's operating point."""
    return wm.peak_rps / peak_replicas


def _tuning(
    wm: WorkloadModel, opt: Option, arch: Architecture, default_cost: float | None, seed: int
) -> Tuning:
    """What the tuned configuration gained over the engine's defaults, at the tuned operating point."""
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
    assert arch.per_replica is not None and opt.chosen.capacity is not None
    # the operating point `_architecture` simulated, not `rps_at_peak` (that rate rounded to 4 decimals): the tuned
    # figures are the architecture's own predicted ones, from the same simulation, and only the defaults' run at
    # that point is new
    rate = _per_replica_peak(wm, arch.replicas.peak)
    tuned = opt.chosen.predict(wm, rate, seed)
    before = opt.default.predict(wm, rate, seed)
    figures = []
    for metric, pct, _limit in wm.slo.targets():
        a, b = stat(before, metric, pct), stat(tuned, metric, pct)
        name, unit, _ = UNITS[metric]
        shown = (lambda x: f"{x:.2f}") if unit == "s" else (lambda x: f"{x:.0f}")
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


def _async_tuning(
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


def _fold_key(a: Architecture) -> tuple[Any, ...]:
    """What makes two architectures one row: deployment, capacity, accelerator, serving configuration, packing."""
    if a.deployment == "bedrock" or a.serving is None:
        return (a.id,)
    # an asynchronous-inference job is its own row, beside the real-time endpoint of the same hardware
    mode = "async" if a.id.endswith(":async") else "real-time"
    return (a.deployment, a.capacity_type, a.accelerator, a.serving, a.replicas_per_instance, mode)


def _fold(archs: list[Architecture]) -> list[Architecture]:
    """Instance sizes with identical performance (one replica of the same accelerators and serving configuration,
    packed alike) fold into the cheapest: one row with "also fits on"."""
    kept: dict[tuple[Any, ...], int] = {}
    out: list[Architecture] = []
    extra: dict[int, list[AlsoFits]] = {}
    for a in archs:
        if a.deployment == "bedrock" or a.serving is None:
            out.append(a)
            continue
        key = _fold_key(a)
        if key in kept:
            extra.setdefault(kept[key], []).append(
                AlsoFits(instance_type=a.instance_type or "", usd_per_month=round(a.ranked_usd_per_month, 2))
            )
            continue
        kept[key] = len(out)
        out.append(a)
    return [
        a.model_copy(update={"also_fits_on": [*a.also_fits_on, *extra[i]]}) if i in extra else a
        for i, a in enumerate(out)
    ]


@dataclass
class _Search:
    """One estimate's working state: the workload, its candidates, and what each phase of the search has found.
    Phases append to `rejected`, `near` and `excluded` in the order the result reports them."""

    wm: WorkloadModel
    cat: Catalog
    enum: Enumeration
    ctx: Context
    deployments: list[str]
    headroom: float
    seed: int
    rejected: list[Rejected]
    #: options an SLO excluded, with the figures that came closest (the infeasible diagnosis reads them)
    near: list[tuple[Any, dict[str, float]]] = field(default_factory=list)
    #: (cost bound, option, reason) of options an SLO excluded
    excluded: list[tuple[float, str, str]] = field(default_factory=list)
    #: options that fit in memory and no roofline bound excludes, cheapest cost bound first once bounded
    options: list[Option] = field(default_factory=list)
    #: the option whose capacity search stands for every option of the same performance key
    by_performance: dict[tuple[str, ServingConfig], Option] = field(default_factory=dict)
    #: options that met the SLOs, with their architectures verified at the operating point
    placed: list[tuple[Option, list[Architecture]]] = field(default_factory=list)
    tuned_keys: list[tuple[str, ServingConfig]] = field(default_factory=list)
    #: calibration profiles looked up so far, by (accelerator, engine, model): one estimate reads one adopted
    #: profile throughout, and looks each up once
    profiles: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    #: the option each hosted architecture was placed from, by architecture id (its asynchronous job is simulated
    #: on the option's replica)
    option_of: dict[str, Option] = field(default_factory=dict)
    searches: int = 0

    def over_budget(self, usd_per_month: float) -> bool:
        budget = self.wm.spec.constraints.max_monthly_usd
        return bool(budget) and usd_per_month > budget


def _start(spec: WorkloadSpec, catalog: Catalog | None, headroom: float, seed: int) -> _Search:
    """The workload resolved against the catalog, and its candidates enumerated."""
    cat = catalog or load_catalog()
    wm = resolve(spec, cat)
    ctx = context_for(wm, cat.model(wm.model_id).max_position_embeddings)
    enum = enumerate_candidates(wm, cat)
    return _Search(
        wm=wm,
        cat=cat,
        enum=enum,
        ctx=ctx,
        deployments=_deployments(wm),
        headroom=headroom,
        seed=seed,
        rejected=[Rejected.model_validate(r) for r in enum.rejected],
    )


def _config_for(instance_type: str) -> Callable[[ServingConfig], Any]:
    """The hardware configuration of a serving configuration on `instance_type`."""

    def cfg_for(s: ServingConfig) -> HardwareConfig:
        return HardwareConfig.from_serving(s, instance_type)

    return cfg_for


def _cost_bound(s: _Search, hw: HardwareOption, rep: Replica) -> float:
    """The cost the ranking reads (spot where the workload allows only spot), at the roofline's capacity: no
    replica serves more, and fewer requests per replica never cost less."""
    pricings = [_pricing(s.cat, s.wm, hw, d) for d in s.deployments]
    monthly = monthly_usd(s.wm, rep.bound_rps, hw.replicas_per_instance, pricings)
    return min(
        (
            ranked_usd_per_month(on_demand, spot, _capacity_type(s.wm, d))
            for d, (on_demand, spot) in zip(s.deployments, monthly, strict=True)
        ),
        default=math.inf,  # Bedrock alone: no instance to bound
    )


def _bound_option(s: _Search, hw: HardwareOption) -> None:
    """Memory fit and roofline bounds of one hardware option (cheap): an option to simulate, or a rejection."""
    wm, cat = s.wm, s.cat
    acc = cat.accelerator_of(cat.instance(hw.instance_type))
    serving = default_serving(
        wm.spec.model,
        hw.engine,
        hw.tensor_parallel,
        hw.quantization,
        acc,
        s.ctx.max_model_len,
        prefix_caching=wm.shared_prefix_tokens > 0,
    )
    rep = _replica(_config_for(hw.instance_type), serving, wm, cat, s.profiles)
    if isinstance(rep, str):
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.memory, reason=f"does not fit: {rep}"))
        return
    lb = _cost_bound(s, hw, rep)
    early = _early_reject(wm.slo, rep, wm)
    if early:
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.slo, reason=early[0]))
        s.near.append((hw, early[1]))
        s.excluded.append((lb, _label(hw), early[0]))
        return
    s.options.append(Option(hw, rep, lb, cat.instance(hw.instance_type).accelerator))


def _row_costs(placed: list[tuple[Option, list[Architecture]]]) -> list[float]:
    """The costs of the ranking's rows found so far, cheapest first (same-performance instance sizes fold into one
    row)."""
    rows: dict[tuple[Any, ...], float] = {}
    for _, archs in placed:
        for a in archs:
            rows[_fold_key(a)] = min(rows.get(_fold_key(a), math.inf), a.ranked_usd_per_month)
    return sorted(rows.values())


def _reject_dominated(s: _Search, rest: list[Option], certify: int) -> None:
    for opt in rest:
        s.rejected.append(
            Rejected(
                id=opt.hw.key,
                kind=RejectedKind.dominated,
                reason=f"dominated: costs at least ${opt.lb_cost:,.0f}/month (roofline bound), more than"
                f" the {certify} cheapest feasible architectures",
            )
        )


def _search_capacity(s: _Search, opt: Option) -> None:
    """The option's SLO capacity: searched, or shared from an option of the same performance already searched."""
    known = s.by_performance.get(opt.perf_key)
    if known is not None and known.default.capacity is not None:
        # same accelerators and serving configuration as an option already searched: same replica
        opt.default.capacity = dataclasses.replace(known.default.capacity)
        opt.default.predictions = known.default.predictions
        return
    opt.default.capacity = measured_capacity(
        opt.default,
        s.wm,
        s.cat,
        s.seed,
        max_rate_under_slo(opt.default.step, s.wm, opt.default.bound_rps, s.seed),
    )
    s.searches += 1
    s.by_performance[opt.perf_key] = opt


def _place(s: _Search, opt: Option) -> None:
    """A searched option enters the ranking when it meets the SLOs, verified at its operating point."""
    capacity = opt.capacity
    assert capacity is not None
    if not capacity.feasible:
        s.rejected.append(Rejected(id=opt.hw.key, kind=RejectedKind.slo, reason=capacity.reason))
        s.excluded.append((opt.lb_cost, _label(opt.hw), capacity.reason))
        if capacity.closest:
            s.near.append((opt, capacity.closest))
        return
    verified = _verified(s.wm, s.cat, opt, s.deployments, s.headroom, s.seed, s.ctx)
    if verified is None:
        s.rejected.append(
            Rejected(
                id=opt.hw.key,
                kind=RejectedKind.slo,
                reason="SLO holds only at the edge: the full simulation at the operating point misses it",
            )
        )
        return
    s.placed.append((opt, verified))


def _simulate(s: _Search, certify: int, progress: Progress | None) -> None:
    """Simulate cheapest-bound first; stop when no remaining option can enter the certified ranking."""
    for i, opt in enumerate(s.options):
        costs = _row_costs(s.placed)
        if len(costs) >= certify and opt.lb_cost > costs[certify - 1]:
            _reject_dominated(s, s.options[i:], certify)
            break
        if progress:
            progress(i + 1, len(s.options), opt.hw.key)
        _search_capacity(s, opt)
        _place(s, opt)


def _tune_heads(s: _Search) -> None:
    """Tune the runtime parameters of the replicas at the ranking's head (their capacity, hence cost, can only
    improve)."""
    # cheapest first; replicas of equal cost in the order they were placed (a set's order varied per process)
    heads: dict[tuple[str, ServingConfig], float] = {}
    for o, archs in s.placed:
        cost = min(a.ranked_usd_per_month for a in archs)
        heads[o.perf_key] = min(heads.get(o.perf_key, math.inf), cost)
    for key, _cost in sorted(heads.items(), key=lambda t: t[1]):
        if len(s.tuned_keys) >= TUNED_REPLICAS:
            break
        if key in s.tuned_keys:
            continue
        s.tuned_keys.append(key)
        lead = s.by_performance[key]
        acc = s.cat.accelerator_of(s.cat.instance(lead.hw.instance_type))
        _tune(lead, s.wm, s.cat, s.seed, _config_for(lead.hw.instance_type), acc, s.profiles)
        s.searches += lead.capacity_searches


def _adopt_tuning(s: _Search, opt: Option, archs: list[Architecture]) -> list[Architecture]:
    """The option's architectures at its replica's tuned configuration when that still verifies, else as placed."""
    lead = s.by_performance[opt.perf_key]
    opt.searched = lead.searched
    if lead.chosen is None:
        return archs
    assert lead.chosen.capacity is not None
    opt.chosen = dataclasses.replace(lead.chosen, capacity=dataclasses.replace(lead.chosen.capacity))
    tuned = _verified(s.wm, s.cat, opt, s.deployments, s.headroom, s.seed, s.ctx)
    if tuned is None:
        opt.chosen = None
        return archs
    return tuned


def _hosted(s: _Search) -> list[Architecture]:
    """Every placed architecture with its tuning block, within the budget (those over it are rejected)."""
    budget = s.wm.spec.constraints.max_monthly_usd
    feasible: list[Architecture] = []
    for opt, placed in s.placed:
        archs = _adopt_tuning(s, opt, placed)
        for arch in _with_tuning(s.wm, s.cat, opt, archs, s.deployments, s.headroom, s.seed, s.ctx):
            s.option_of[arch.id] = opt
            if s.over_budget(arch.ranked_usd_per_month):
                s.rejected.append(
                    Rejected(
                        id=arch.id,
                        kind=RejectedKind.budget,
                        reason=f"over budget: ${arch.ranked_usd_per_month:,.0f}/month > max_monthly_usd"
                        f" ${budget:,.0f}",
                    )
                )
                continue
            feasible.append(arch)
    return feasible


def _sold(s: _Search, feasible: list[Architecture], batch: bool, modes_cfg: Modes) -> list[Architecture]:
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


def _bedrock_all(s: _Search, batch: bool, modes_cfg: Modes) -> tuple[list[Architecture], list[Architecture]]:
    """Bedrock in every mode it is sold: (the feasible ones within budget, every one priced -- managed options)."""
    feasible: list[Architecture] = []
    managed: list[Architecture] = []
    for choice in s.enum.bedrock:
        for rid, bedrock_arch, reason in _bedrock_options(s.wm, choice, batch, modes_cfg):
            if bedrock_arch is not None:
                managed.append(bedrock_arch)
            if reason is not None or bedrock_arch is None:
                s.rejected.append(Rejected(id=rid, kind=_kind_of(reason), reason=reason or "rejected"))
            elif s.over_budget(bedrock_arch.ranked_usd_per_month):
                s.rejected.append(
                    Rejected(
                        id=bedrock_arch.id,
                        kind=RejectedKind.budget,
                        reason=f"over budget: ${bedrock_arch.ranked_usd_per_month:,.0f}/month",
                    )
                )
            else:
                feasible.append(bedrock_arch)
    return feasible, managed


def _ranked(feasible: list[Architecture]) -> list[Architecture]:
    """Cheapest first, same-performance sizes folded into one row, numbered, and marked on the Pareto front."""
    feasible = _fold(sorted(feasible, key=Architecture.rank_key))
    return _pareto([a.model_copy(update={"rank": r}) for r, a in enumerate(feasible, start=1)])


def _infeasible(s: _Search, feasible: list[Architecture]) -> dict[str, Any] | None:
    """Why nothing is feasible: no hardware in the Region, or the SLO that binds nearest."""
    if feasible:
        return None
    if s.enum.region_gap and not s.enum.hardware:
        return {
            "binding": None,
            "region": s.wm.spec.constraints.region,
            "nearest_region": s.enum.nearest_region,
            "message": s.enum.region_gap,
        }
    return _diagnose(s.wm, s.near)


def _region_block(s: _Search) -> dict[str, Any]:
    c = s.wm.spec.constraints
    return {
        "code": c.region,
        "name": region_name(c.region),
        "data_residency": c.data_residency,
        "prices": "EC2 prices per Region from the price snapshot (catalog data/regions.yaml) where it covers the"
        " family, else the us-east-1 price marked assumed; SageMaker ml.* prices outside us-east-1 are derived"
        " from EC2 (assumed); Bedrock prices per offer (cost.price.region)",
        "unavailable_here": sorted(
            {r["id"].split("@")[0] for r in s.enum.rejected if r["id"].endswith(f"@{c.region}")}
        ),
        "nearest_region_with_hardware": s.enum.nearest_region,
    }


def estimate_result(
    spec: WorkloadSpec,
    top: int | None = None,
    *,
    catalog: Catalog | None = None,
    headroom: float = DEFAULT_HEADROOM,
    seed: int = 0,
    progress: Progress | None = None,
    tune: bool = True,
) -> EstimateResult:
    """Estimate every candidate architecture for a workload, typed. `tune=False` keeps every option at its
    engine's defaults (the benchmark's baseline)."""
    t0 = time.perf_counter()
    s = _start(spec, catalog, headroom, seed)
    # 1. memory fit and roofline bounds for every hardware option (cheap)
    for hw in s.enum.hardware:
        _bound_option(s, hw)
    s.options.sort(key=lambda o: o.lb_cost)
    # 2. simulate cheapest-bound first, down to the certified rows of the ranking
    _simulate(s, max(top or 0, DEFAULT_CERTIFY), progress)
    # 3. tune the replicas at the ranking's head, then give every architecture its tuning block
    if tune:
        _tune_heads(s)
    feasible = _hosted(s)
    # 4. as sold, and Bedrock in every mode it is sold
    batch = is_batch_workload(s.wm) and s.wm.spec.constraints.batch_inference
    modes_cfg = load_modes()
    feasible = _sold(s, feasible, batch, modes_cfg)
    bedrock, managed = _bedrock_all(s, batch, modes_cfg)
    # 5. rank
    feasible = _ranked([*feasible, *bedrock])
    why, summary_text = _why_not_cheaper(feasible, s.excluded, s.wm)
    elapsed = time.perf_counter() - t0
    return EstimateResult(
        workload=s.wm.derived(),
        architectures=feasible[:top] if top else feasible,
        rejected=s.rejected,
        assumptions=_assumptions(s.cat, headroom, s.wm.slo),
        search={
            "hardware_options": len(s.enum.hardware),
            "simulated": sum(1 for o in s.options if o.capacity is not None),
            "capacity_searches": s.searches,
            "tuned_replicas": len(s.tuned_keys),
            "seed": seed,
            "feasible": len(feasible),
            "seconds": round(elapsed, 3),
        },
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        infeasible=_infeasible(s, feasible),
        region=_region_block(s),
        why_not_cheaper=why,
        summary=summary_text,
        managed_options=sorted(managed, key=Architecture.rank_key),
    )


def estimate(spec: WorkloadSpec, top: int | None = None, **options: Any) -> dict[str, Any]:
    """Estimate every candidate architecture for a workload: the estimate result's JSON (`estimate_result`'s
    keyword options: catalog, headroom, seed, progress, tune)."""
    result = estimate_result(spec, top, **options)
    out = result.as_json()
    if out.get("infeasible") is None:
        out.pop("infeasible", None)
    return out


def _label(hw: HardwareOption) -> str:
    return f"{hw.instance_type} TP{hw.tensor_parallel} {hw.quantization} {hw.engine}"


def _with_tuning(
    wm: WorkloadModel,
    cat: Catalog,
    opt: Option,
    archs: list[Architecture],
    deployments: list[str],
    headroom: float,
    seed: int,
    ctx: Context,
) -> list[Architecture]:
    """The option's architectures with their `tuning` block. A tuned configuration whose verified capacity fell
    below the defaults' gives way to them: tuning never makes an answer dearer (on the estimator's scale: a
    measured configuration compares by its estimate, `Capacity.comparable_rps`)."""
    d_cap = opt.default.capacity
    if opt.chosen is not None and d_cap is not None and d_cap.feasible:
        assert opt.capacity is not None
        if opt.capacity.comparable_rps <= d_cap.comparable_rps:
            alt = Option(opt.hw, opt.default, opt.lb_cost, opt.fit_accelerator)
            defaults = _verified(wm, cat, alt, deployments, headroom, seed, ctx)
            if defaults is not None:
                opt.chosen = None
                archs = defaults
    out = []
    for d, a in zip(deployments, archs, strict=True):
        default_cost = None
        if opt.chosen is not None and d_cap is not None and d_cap.feasible:
            pricing = _pricing(cat, wm, opt.hw, d)
            ((on_demand, spot),) = monthly_usd(
                wm,
                d_cap.rate_rps * margin(opt.default.step, wm.slo, headroom).usable,
                opt.hw.replicas_per_instance,
                [pricing],
            )
            default_cost = ranked_usd_per_month(on_demand, spot, a.capacity_type)
        out.append(a.model_copy(update={"tuning": _tuning(wm, opt, a, default_cost, seed)}))
    return out


def _why_not_cheaper(
    feasible: list[Architecture], excluded: list[tuple[float, str, str]], wm: WorkloadModel
) -> tuple[list[NotCheaper], str | None]:
    """The cheaper hardware an SLO excluded, and a sentence when the answer is much dearer than it."""
    hosted = [a for a in feasible if a.deployment != "bedrock"]
    if not hosted or not excluded:
        return [], None
    best = hosted[0]
    cheaper = sorted(e for e in excluded if e[0] < best.ranked_usd_per_month)
    shown = [
        NotCheaper(option=o, usd_per_month=round(b, 2), reason=r)
        for b, o, r in cheaper[:WHY_NOT_CHEAPER_SHOWN]
    ]
    if not cheaper or best.ranked_usd_per_month < MUCH_DEARER * cheaper[0][0]:
        return shown, None
    bound, option, reason = cheaper[0]
    text = (
        f"The answer costs {best.ranked_usd_per_month / bound:.1f}x the cheapest hardware that fits in memory:"
        f" {option} (at least ${bound:,.0f}/month) misses {reason.split(' (')[0].split(' even')[0]}"
    )
    e2e = [(p, v) for m, p, v in wm.slo.targets() if m == "e2e_s"]
    if e2e and "e2e" in reason:
        pct, limit = e2e[0]
        out_tokens = wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95")
        ttft_s = (best.predicted.ttft_ms.p50 or 0.0) / 1000
        if out_tokens > 1:
            need = max(limit - ttft_s, 0.0) / (out_tokens - 1) * 1000
            text += f"; TPOT ≤ {need:.0f} ms is needed for {out_tokens:,.0f} output tokens within {limit:g} s"
    return shown, text + "."


def _early_reject(slo: SLO, rep: Replica, wm: WorkloadModel) -> tuple[str, dict[str, float]] | None:
    """Roofline lower bounds already above an SLO: no simulation can do better."""

    b = rep.bounds
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
    reason = (
        "; ".join(describe_violation(*v) for v in bad)
        + " even unloaded (a lone request's step times on this deployment, no queueing: the calibrated step model"
        " with its overheads and the engine's compiled shapes, not a plain roofline)"
    )
    return reason, {f"{m}.{p}": v for m, p, v, _ in bad}


def _assumptions(cat: Catalog, headroom: float, slo: SLO) -> dict[str, Any]:

    prof = load_profiles()
    return {
        "headroom": headroom if slo.confidence is None else None,
        "confidence": slo.confidence,
        "headroom_reasoning": f"fixed {headroom:.0%} load headroom"
        if slo.confidence is None
        else f"confidence {slo.confidence:g}: every SLO target holds at the {100 * slo.confidence:g}th percentile of"
        " the estimator's own cross-validated error for each architecture's family and engine (predicted"
        " latencies scaled up, capacity down; each architecture's headroom.reasoning states its factors) instead"
        " of a fixed load headroom",
        "calibration": {k: prof.get(k) for k in ("version", "date") if k in prof},
        "prices": "on-demand EC2/SageMaker prices per catalog entry (source and as-of in each architecture's cost.price)",
        "spot": "spot discounts per family, most assumed (see cost.price.spot_discount_assumed); the min_replicas base stays on-demand",
        "savings_plan_1y_discount": SAVINGS_PLAN_1Y_DISCOUNT,
        "scale_up_lead_s": {"gpu": SCALE_UP_LEAD_S_GPU, "neuron": SCALE_UP_LEAD_S_NEURON},
        "bedrock_latency": "assumed until measured (catalog latency profiles)",
        "arrivals": "Poisson within each hour; hourly rates from the traffic profile",
        "serving": f"each architecture's serving block is the deployment as estimated; max_model_len covers the"
        f" {CONTEXT_PERCENTILE} of input + output; runtime parameters searched per hardware option (tuning)",
    }
