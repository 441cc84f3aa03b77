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

from sizing.catalog import Catalog, load_catalog
from sizing.catalog.modes import load_modes
from sizing.plan.answer import pricing_of, verified_architectures
from sizing.plan.as_sold import hosted_as_sold
from sizing.plan.bedrock import bedrock_architectures
from sizing.plan.candidates import HardwareOption, enumerate_candidates
from sizing.plan.capacity import max_rate_under_slo
from sizing.plan.cost import is_batch_workload, monthly_usd
from sizing.plan.explain import assumptions, infeasible, region_block, why_not_cheaper
from sizing.plan.measured import measured_capacity
from sizing.plan.ranking import binding, ranked, row_costs
from sizing.plan.serving import context_for, default_serving
from sizing.plan.slo_cost import binding_sentence, slo_costs
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
    Rejected,
    RejectedKind,
    SloCost,
    ranked_usd_per_month,
)
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.spec import WorkloadSpec

#: Default share of a replica's SLO capacity kept free at peak (bursts within the hour, estimator error).
DEFAULT_HEADROOM = 0.20
#: Rows of the ranking certified by simulation even when the caller asks for fewer (the ranking's top stays
#: exact). A row is one replica configuration: same-performance instance sizes fold into it ("also fits on"), so
#: five rows show as many distinct choices as the eight sizes-apart architectures this certified before folding.
DEFAULT_CERTIFY = 5


def estimate(
    spec: WorkloadSpec,
    top: int | None = None,
    *,
    catalog: Catalog | None = None,
    headroom: float = DEFAULT_HEADROOM,
    seed: int = 0,
    progress: Progress | None = None,
    tune: bool = True,
    slo_cost: bool = False,
    certify: int = DEFAULT_CERTIFY,
) -> EstimateResult:
    """Estimate every candidate architecture for a workload, typed. `tune=False` keeps every option at its
    engine's defaults (the benchmark's baseline); `slo_cost=True` adds what each SLO target costs (`slo_costs`, one
    more estimate per stated target: what the CLI, the API and Slack answer with). `certify`: rows of the ranking
    simulated exactly even when `top` asks for fewer; the SLO costs' reruns read only their cheapest row, so they
    certify that one (on the four examples their answers are the same as with DEFAULT_CERTIFY, and an estimate with
    its SLO costs simulates a third fewer requests)."""
    t0 = time.perf_counter()
    s = _start(spec, catalog, headroom, seed)
    # 1. memory fit and roofline bounds for every hardware option (cheap)
    for hw in s.enum.hardware:
        _bound_option(s, hw)
    s.options.sort(key=lambda o: o.lb_cost)
    # 2. simulate cheapest-bound first, down to the certified rows of the ranking
    _simulate(s, max(top or 0, certify), progress)
    # 3. tune the replicas at the ranking's head, then give every architecture its tuning block
    if tune:
        tune_heads(s)
    feasible = _hosted(s)
    # 4. as sold, and Bedrock in every mode it is sold
    batch = is_batch_workload(s.wm) and s.wm.spec.constraints.batch_inference
    modes_cfg = load_modes()
    feasible = hosted_as_sold(s, feasible, batch, modes_cfg)
    bedrock, managed = bedrock_architectures(s, batch, modes_cfg)
    # 5. rank what meets every SLO as stated (a job is judged by its deadline and the per-request targets stated)
    feasible, missed = binding([*feasible, *bedrock], s.wm)
    s.rejected.extend(missed)
    feasible = ranked(feasible)
    why, summary_text = why_not_cheaper(feasible, s.excluded, s.wm)
    # 6. what each stated target costs: relaxed one step alone, re-estimated
    costs: list[SloCost] = []
    if slo_cost:
        answer = feasible[0] if feasible else None
        costs = slo_costs(
            spec,
            answer,
            lambda loose: estimate(
                loose, 1, catalog=s.cat, headroom=headroom, seed=seed, tune=tune, slo_cost=False, certify=1
            ),
        )
        binds = binding_sentence(s, answer, costs)
        summary_text = " ".join(t for t in (binds, summary_text) if t) or None
    elapsed = time.perf_counter() - t0
    return EstimateResult(
        workload=s.wm.derived(),
        architectures=feasible[:top] if top else feasible,
        rejected=s.rejected,
        assumptions=assumptions(headroom, s.wm.slo),
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
        infeasible=infeasible(s, feasible),
        region=region_block(s),
        why_not_cheaper=why,
        summary=summary_text,
        managed_options=sorted(managed, key=Architecture.rank_key),
        slo_costs=costs,
    )


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


def _deployments(wm: WorkloadModel) -> list[str]:
    return [d for d in ("eks", "sagemaker") if d in wm.spec.constraints.deployments]


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
    verified = verified_architectures(s, opt)
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


def _hosted(s: SearchState) -> list[Architecture]:
    """Every placed architecture with its tuning block, within the budget (those over it are rejected)."""
    budget = s.wm.spec.constraints.max_monthly_usd
    feasible: list[Architecture] = []
    for opt, placed in s.placed:
        archs = adopt_tuning(s, opt, placed)
        for arch in with_tuning(s, opt, archs):
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
