"""The planner's working data: a replica (one serving configuration of a hardware option, with its memory fit, step
model and roofline bounds), an option (a hardware option and the replica ranked for it), and the search state one
estimate's phases share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sizing.base.serving_config import ServingConfig
from sizing.catalog import Catalog
from sizing.perf.calibration import profile_for
from sizing.perf.config import HardwareConfig
from sizing.perf.memory import MemoryFit, memory_fit
from sizing.perf.profile import Profile
from sizing.perf.simulator import Bounds, SimResult, bounds
from sizing.perf.step import StepModel
from sizing.plan.candidates import Enumeration, HardwareOption
from sizing.plan.capacity import Capacity, predict_at
from sizing.plan.margin import describe_violation
from sizing.plan.serving import Context, with_effective_batch
from sizing.results import Architecture, Rejected
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO

Progress = Callable[[int, int, str], None]


@dataclass
class Replica:
    """One serving configuration of a hardware option, with its memory fit and step model."""

    serving: ServingConfig
    cfg: HardwareConfig
    fit: MemoryFit
    step: StepModel
    #: the roofline's optimistic limits of the replica (its capacity bound, and the early SLO check's floors)
    bounds: Bounds
    capacity: Capacity | None = None
    #: predictions at an operating point, by rate: shared by every option holding this replica (EKS and SageMaker,
    #: instance sizes of one accelerator), which the simulation does not tell apart
    predictions: dict[float, SimResult] = field(default_factory=dict)

    @property
    def bound_rps(self) -> float:
        """No replica serves more requests a second than its roofline bound."""
        return self.bounds.max_requests_per_s

    def predict(self, wm: WorkloadModel, rate: float, seed: int) -> SimResult:
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
    #: a tuning variant whose capacity the team's measurement answers (`plan.measured`), when one was tried
    measured: Replica | None = None
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

    def predict(self, wm: WorkloadModel, rate: float, seed: int) -> SimResult:
        return self.replica.predict(wm, rate, seed)


@dataclass
class SearchState:
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
    near: list[tuple[HardwareOption | Option, dict[str, float]]] = field(default_factory=list)
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
    profiles: dict[tuple[str, str, str], Profile] = field(default_factory=dict)
    #: the option each hosted architecture was placed from, by architecture id (its asynchronous job is simulated
    #: on the option's replica)
    option_of: dict[str, Option] = field(default_factory=dict)
    searches: int = 0

    def over_budget(self, usd_per_month: float) -> bool:
        budget = self.wm.spec.constraints.max_monthly_usd
        return budget is not None and budget > 0 and usd_per_month > budget


def capacity_type_of(wm: WorkloadModel, deployment: str) -> str:
    caps = wm.spec.constraints.capacity
    if deployment == "sagemaker" or "on-demand" in caps:
        return "on-demand"
    return "spot"


def peak_rps_per_replica(wm: WorkloadModel, peak_replicas: int) -> float:
    """The requests per second each replica serves at the workload's peak: an architecture's operating point."""
    return wm.peak_rps / peak_replicas


def config_for(instance_type: str) -> Callable[[ServingConfig], HardwareConfig]:
    """The hardware configuration of a serving configuration on `instance_type`."""

    def cfg_for(s: ServingConfig) -> HardwareConfig:
        return HardwareConfig.from_serving(s, instance_type)

    return cfg_for


def build_replica(
    cfg_for: Callable[[ServingConfig], HardwareConfig],
    serving: ServingConfig,
    wm: WorkloadModel,
    cat: Catalog,
    profiles: dict[tuple[str, str, str], Profile] | None = None,
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


def early_reject(slo: SLO, rep: Replica, wm: WorkloadModel) -> tuple[str, dict[str, float]] | None:
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


def option_label(hw: HardwareOption) -> str:
    return f"{hw.instance_type} TP{hw.tensor_parallel} {hw.quantization} {hw.engine}"
