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
from datetime import UTC, datetime
from typing import Any

from sizing.catalog import Catalog, load_catalog
from sizing.catalog.modes import load_modes
from sizing.catalog.regions import region_name
from sizing.perf.calibration import load_profiles
from sizing.plan.answer import pricing_of, verified_architectures
from sizing.plan.as_sold import hosted_as_sold
from sizing.plan.bedrock import bedrock_architectures
from sizing.plan.candidates import HardwareOption, enumerate_candidates
from sizing.plan.capacity import max_rate_under_slo
from sizing.plan.cost import (
    SAVINGS_PLAN_1Y_DISCOUNT,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    is_batch_workload,
    monthly_usd,
)
from sizing.plan.measured import measured_capacity
from sizing.plan.ranking import ranked, row_costs
from sizing.plan.serving import CONTEXT_PERCENTILE, context_for, default_serving
from sizing.plan.state import (
    Option,
    Progress,
    Replica,
    SearchState,
    build_replica,
    capacity_type_of,
    config_for,
    early_reject,
    option_label,
)
from sizing.plan.tuning import adopt_tuning, tune_heads, with_tuning
from sizing.results import (
    Architecture,
    EstimateResult,
    NotCheaper,
    Rejected,
    RejectedKind,
    ranked_usd_per_month,
)
from sizing.workload import SLO, WorkloadModel, WorkloadSpec, resolve

#: Default share of a replica's SLO capacity kept free at peak (bursts within the hour, estimator error).
DEFAULT_HEADROOM = 0.20
#: Rows of the ranking certified by simulation even when the caller asks for fewer (the ranking's top stays
#: exact). A row is one replica configuration: same-performance instance sizes fold into it ("also fits on"), so
#: five rows show as many distinct choices as the eight sizes-apart architectures this certified before folding.
DEFAULT_CERTIFY = 5
#: The summary names the SLO that excluded cheaper hardware when the answer costs at least this many times the
#: cheapest hardware option's cost bound.
MUCH_DEARER = 2.0
#: Cheaper excluded options listed in `why_not_cheaper`.
WHY_NOT_CHEAPER_SHOWN = 3


def _deployments(wm: WorkloadModel) -> list[str]:
    return [d for d in ("eks", "sagemaker") if d in wm.spec.constraints.deployments]


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


def _start(spec: WorkloadSpec, catalog: Catalog | None, headroom: float, seed: int) -> SearchState:
    """The workload resolved against the catalog, and its candidates enumerated."""
    cat = catalog or load_catalog()
    wm = resolve(spec, cat)
    ctx = context_for(wm, cat.model(wm.model_id).max_position_embeddings)
    enum = enumerate_candidates(wm, cat)
    return SearchState(
        wm=wm,
        cat=cat,
        enum=enum,
        ctx=ctx,
        deployments=_deployments(wm),
        headroom=headroom,
        seed=seed,
        rejected=[Rejected.model_validate(r) for r in enum.rejected],
    )


def _cost_bound(s: SearchState, hw: HardwareOption, rep: Replica) -> float:
    """The cost the ranking reads (spot where the workload allows only spot), at the roofline's capacity: no
    replica serves more, and fewer requests per replica never cost less."""
    pricings = [pricing_of(s.cat, s.wm, hw, d) for d in s.deployments]
    monthly = monthly_usd(s.wm, rep.bound_rps, hw.replicas_per_instance, pricings)
    return min(
        (
            ranked_usd_per_month(on_demand, spot, capacity_type_of(s.wm, d))
            for d, (on_demand, spot) in zip(s.deployments, monthly, strict=True)
        ),
        default=math.inf,  # Bedrock alone: no instance to bound
    )


def _bound_option(s: SearchState, hw: HardwareOption) -> None:
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
    rep = build_replica(config_for(hw.instance_type), serving, wm, cat, s.profiles)
    if isinstance(rep, str):
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.memory, reason=f"does not fit: {rep}"))
        return
    lb = _cost_bound(s, hw, rep)
    early = early_reject(wm.slo, rep, wm)
    if early:
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.slo, reason=early[0]))
        s.near.append((hw, early[1]))
        s.excluded.append((lb, option_label(hw), early[0]))
        return
    s.options.append(Option(hw, rep, lb, cat.instance(hw.instance_type).accelerator))


def _reject_dominated(s: SearchState, rest: list[Option], certify: int) -> None:
    for opt in rest:
        s.rejected.append(
            Rejected(
                id=opt.hw.key,
                kind=RejectedKind.dominated,
                reason=f"dominated: costs at least ${opt.lb_cost:,.0f}/month (roofline bound), more than"
                f" the {certify} cheapest feasible architectures",
            )
        )


def _search_capacity(s: SearchState, opt: Option) -> None:
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


def _place(s: SearchState, opt: Option) -> None:
    """A searched option enters the ranking when it meets the SLOs, verified at its operating point."""
    capacity = opt.capacity
    assert capacity is not None
    if not capacity.feasible:
        s.rejected.append(Rejected(id=opt.hw.key, kind=RejectedKind.slo, reason=capacity.reason))
        s.excluded.append((opt.lb_cost, option_label(opt.hw), capacity.reason))
        if capacity.closest:
            s.near.append((opt, capacity.closest))
        return
    verified = verified_architectures(s.wm, s.cat, opt, s.deployments, s.headroom, s.seed, s.ctx)
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


def _simulate(s: SearchState, certify: int, progress: Progress | None) -> None:
    """Simulate cheapest-bound first; stop when no remaining option can enter the certified ranking."""
    for i, opt in enumerate(s.options):
        costs = row_costs(s.placed)
        if len(costs) >= certify and opt.lb_cost > costs[certify - 1]:
            _reject_dominated(s, s.options[i:], certify)
            break
        if progress:
            progress(i + 1, len(s.options), opt.hw.key)
        _search_capacity(s, opt)
        _place(s, opt)


def _hosted(s: SearchState) -> list[Architecture]:
    """Every placed architecture with its tuning block, within the budget (those over it are rejected)."""
    budget = s.wm.spec.constraints.max_monthly_usd
    feasible: list[Architecture] = []
    for opt, placed in s.placed:
        archs = adopt_tuning(s, opt, placed)
        for arch in with_tuning(s.wm, s.cat, opt, archs, s.deployments, s.headroom, s.seed, s.ctx):
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


def _infeasible(s: SearchState, feasible: list[Architecture]) -> dict[str, Any] | None:
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


def _region_block(s: SearchState) -> dict[str, Any]:
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
        tune_heads(s)
    feasible = _hosted(s)
    # 4. as sold, and Bedrock in every mode it is sold
    batch = is_batch_workload(s.wm) and s.wm.spec.constraints.batch_inference
    modes_cfg = load_modes()
    feasible = hosted_as_sold(s, feasible, batch, modes_cfg)
    bedrock, managed = bedrock_architectures(s, batch, modes_cfg)
    # 5. rank
    feasible = ranked([*feasible, *bedrock])
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
