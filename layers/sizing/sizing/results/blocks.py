"""The blocks of an estimate result beside its architectures' own figures: a cost's schedule and price source, a
load test's levels and searched capacity, the calibration summary, the Bedrock offer, the workload as modelled
(with a recorded trace's figures), why nothing is feasible, the Region, the assumptions and what the search
covered. `sizing.results` composes them into `Architecture` and `EstimateResult`.

A block whose writers state only the fields that apply (`Stated`) keeps its JSON as they wrote it: the fields it
was given, in the order declared, the others left out rather than written as null."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
)

from sizing.catalog.offerings import BedrockQuota
from sizing.workload.spec import SLO


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Stated(Frozen):
    """A block whose writers state only the fields that apply to it (a Bedrock offer has no EKS price fields, an
    open-loop level no concurrency): its JSON holds the fields it was given, in the order declared, and leaves
    the others out instead of writing them as null. Each subclass declares its fields in the order its writers
    write them."""

    @model_serializer(mode="wrap")
    def _stated(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if k in self.model_fields_set}


#: One component of a bill: a price, a count, hours, a term ("1 month") or the terms sold (months).
BillComponent = bool | int | float | str | list[int] | None


class Percentiles(Frozen):
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class HourlySchedule(Stated):
    """Replicas and nodes in each hour of the traffic profile's day (24 values each)."""

    replicas_by_hour: list[int]
    nodes_by_hour: list[int]


class PriceSource(Stated):
    """Where a row's prices come from: the source and date of the price, whether it is assumed, and for Bedrock the
    Region and tier priced; for EKS and SageMaker the spot and Savings Plan discounts applied."""

    source: str | None = None
    as_of: str | None = None
    assumed: bool | None = None
    region: str | None = None
    tier: str | None = None
    tier_multiple: float | None = None
    tier_source: str | None = None
    tier_as_of: str | None = None
    spot_discount: float | None = None
    spot_discount_assumed: bool | None = None
    savings_plan_discount: float | None = None
    savings_plan_assumed: bool | None = None


class LoadTarget(Stated):
    """A load level as the load generator states it (`sizing.loadtest.metrics.StepResult.target`): closed-loop
    `concurrency`, `users` with a `think_time_s`, or an open-loop arrival `rate_rps`."""

    concurrency: int | float | None = None
    users: int | float | None = None
    think_time_s: int | float | None = None
    rate_rps: int | float | None = None


class LevelOutcome(Stated):
    """One measured level as the `measured` block lists it: its load, its throughput and whether it met the SLOs."""

    target: LoadTarget | None = None
    requests_per_s: float | None = None
    meets_slo: bool | None = None


class PredictedAtLevel(Stated):
    """The estimator re-simulated at the level a `measured` block shows (`sizing.orchestrate.merge`)."""

    ttft_ms: Percentiles = Percentiles()
    tpot_ms: Percentiles = Percentiles()
    e2e_s: Percentiles = Percentiles()
    requests_per_s: float | None = None
    at: LoadTarget | None = None


class SearchedCapacity(Stated):
    """The capacity a run's search found for a row's hardware (`sizing.loadtest.capacity.CapacityEstimate` as it
    dumps: its fields are restated here because that module pulls numpy into every reader of a result), with
    the estimate's own capacity and whether it lies inside the interval."""

    capacity_rps: float | None = None
    low_rps: float | None = None
    high_rps: float | None = None
    converged: bool | None = None
    tolerance: float | None = None
    #: the search's level records, each as the load generator stored it (`StepResult`'s JSON, read by nothing here)
    levels: list[dict[str, Any]] = Field(default_factory=list)
    note: str | None = None
    predicted_rps: float | None = None
    consistent_with_estimate: bool | None = None
    verdict: str | None = None


class BedrockOffer(Stated):
    """The Bedrock offer a managed row prices: the model id invoked and its base model, the mode and tier, the
    inference profile's scope and Region, the on-demand quotas, and what a committed mode buys."""

    model_id: str | None = None
    base_model_id: str | None = None
    #: `on-demand`, `batch`, `provisioned` or `reserved`
    mode: str | None = None
    tier: str | None = None
    scope: str | None = None
    region: str | None = None
    quota: BedrockQuota | None = None
    #: the output tokens a request reserves against the tokens-per-minute quota when it starts
    max_tokens: int | None = None
    #: Provisioned Throughput: model units bought and their commitment term
    model_units: int | None = None
    term: str | None = None
    latency_assumed: bool | None = None
    latency_source: str | None = None


class TokenSummary(Stated):
    """A token-length distribution as the result states it (`sizing.base.distributions.TokenDistribution.describe`):
    its kind, mean and percentiles, and a lognormal's parameters."""

    kind: str | None = None
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mu: float | None = None
    sigma: float | None = None


class Burstiness(Frozen):
    """Arrivals in one window width (`sizing.traces.summary.burstiness`): the busiest window's count over the
    mean, the counts' index of dispersion (1 for a Poisson stream), and the busiest window's rate."""

    peak_to_mean: float | None = None
    index_of_dispersion: float | None = None
    peak_rps: float


class LengthFigures(Frozen):
    """A trace's prompt or output lengths in tokens: mean, longest and percentiles (None where the trace holds too
    few requests for one)."""

    mean: float
    max: int
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None


class PrefixReuse(Stated):
    """How much of the trace's prompts a prefix cache held already (`sizing.traces.summary.reuse`)."""

    source: str | None = None
    prefix_hit_share: float | None = None
    requests_with_hit_share: float | None = None
    median_hit_tokens: int | None = None
    blocks_seen_share: float | None = None


class SessionFigures(Frozen):
    """Multi-turn sessions where the trace names them (`sizing.traces.summary.sessions`)."""

    sessions: int
    turns_mean: float
    turns_p95: float | None = None
    follow_up_share: float
    gap_between_turns_s_median: float | None = None


class ReplayWindow(Frozen):
    """The stretch of the trace the load test and the estimate replay: its requests, own rate and start."""

    requests: int
    own_mean_rps: float
    starts_s: float


class ComparedArchitecture(Frozen):
    """One architecture as a trace's effect compares it (`sizing.plan.traceeffect`)."""

    id: str
    replicas_peak: int | None = None
    ttft_ms_p95: float | None = None
    e2e_s_p95: float | None = None
    usd_per_month: float


class TraceEffect(Stated):
    """What replaying the trace changed against Poisson arrivals at the same means: the best architecture of each,
    the trace's best as Poisson sizes it, and that in words."""

    against: str | None = None
    trace_best: ComparedArchitecture | None = None
    poisson_best: ComparedArchitecture | None = None
    poisson_on_trace_best: ComparedArchitecture | None = None
    summary: str | None = None


class TraceFigures(Stated):
    """The recorded trace the workload was built from (`sizing.traces.summary.summarize`, with what the estimate
    took from it): where it came from, its requests, rates by hour, burstiness, lengths, prefix reuse and sessions,
    the window replayed, the peak it was sized at and, with a replay, its effect against Poisson arrivals. Counts
    and hashes only: a trace's text is never in the result."""

    source: str | None = None
    format: str | None = None
    digest: str | None = None
    requests: int | None = None
    model: str | None = None
    #: requests per model the trace names
    models: dict[str, int] = Field(default_factory=dict)
    span_s: float | None = None
    start: float | None = None
    mean_rps: float | None = None
    busiest_hour_rps: float | None = None
    hourly_rps: list[float] = Field(default_factory=list)
    hours: str | None = None
    #: by window width (`1s`, `1min`); None where the trace spans fewer than two windows
    burstiness: dict[str, Burstiness | None] = Field(default_factory=dict)
    input_tokens: LengthFigures | None = None
    output_tokens: LengthFigures | None = None
    input_output_log_correlation: float | None = None
    prefix_reuse: PrefixReuse | None = None
    sessions: SessionFigures | None = None
    estimated_counts: int | None = None
    notes: list[str] = Field(default_factory=list)
    replayed: bool | None = None
    replay_window: ReplayWindow | None = None
    shared_prefix_tokens: int | None = None
    sized_peak_rps: float | None = None
    time_scale: float | None = None
    effect: TraceEffect | None = None


class WorkloadFigures(Stated):
    """The workload as modelled (`sizing.workload.derived.WorkloadModel.derived`): its rates, concurrency, token
    lengths, daily profile and SLO, as the estimate used them."""

    name: str | None = None
    model: str | None = None
    peak_rps: float | None = None
    avg_rps: float | None = None
    peak_active_users: int | None = None
    peak_concurrency: float | None = None
    concurrency_basis_s: float | None = None
    think_time_s: float | None = None
    requests_per_day: int | None = None
    requests_per_month: int | None = None
    traffic_days_per_month: float | None = None
    input_tokens: TokenSummary | None = None
    output_tokens: TokenSummary | None = None
    shared_prefix_tokens: int | float | None = None
    input_tokens_per_s_peak: float | None = None
    output_tokens_per_s_peak: float | None = None
    hourly_rps: list[float] = Field(default_factory=list)
    timezone: str | None = None
    #: the SLO as the spec states it (its JSON holds the stated targets only)
    slo: SLO | None = None
    notes: list[str] = Field(default_factory=list)
    trace: TraceFigures | None = None

    @field_validator("slo", mode="before")
    @classmethod
    def _no_slo(cls, value: Any) -> Any:
        """An empty block (a hand-written result's) states no SLO."""
        return None if value == {} else value

    @field_serializer("slo")
    def _stated_slo(self, slo: SLO | None) -> dict[str, Any]:
        return {} if slo is None else slo.model_dump(exclude_none=True)


class Closest(Frozen):
    """The candidate that came closest to a binding SLO target, and its figure there."""

    value: float
    on: str


class Infeasible(Stated):
    """Why nothing is feasible: no hardware in the Region, or the SLO that binds nearest and what came closest."""

    binding: str | None = None
    region: str | None = None
    nearest_region: str | None = None
    #: the closest candidate's figure for the binding target and where it was reached
    closest: Closest | None = None
    message: str | None = None


class RegionInfo(Stated):
    """The Region estimated, where its prices come from, and the hardware it lacks."""

    code: str | None = None
    name: str | None = None
    data_residency: str | None = None
    prices: str | None = None
    unavailable_here: list[str] = Field(default_factory=list)
    nearest_region_with_hardware: str | None = None


class ProfileRef(Stated):
    """The calibration profile an estimate used: its version and date."""

    version: str | None = None
    date: str | None = None


class Assumptions(Stated):
    """What every figure of the estimate assumes: the load headroom (or the SLO's confidence), the calibration
    profile, where prices and spot discounts come from, scale-up lead times, Bedrock latency, arrivals and the
    serving configuration (`sizing.plan.explain.assumptions`)."""

    headroom: float | None = None
    confidence: float | None = None
    headroom_reasoning: str | None = None
    #: the profile's version and date (an older result states the version alone)
    calibration: ProfileRef | str | None = None
    prices: str | None = None
    spot: str | None = None
    savings_plan_1y_discount: float | None = None
    #: seconds from a scale-up decision to a serving replica, by accelerator kind (`gpu`, `neuron`)
    scale_up_lead_s: dict[str, int | float] | None = None
    bedrock_latency: str | None = None
    arrivals: str | None = None
    serving: str | None = None


class SearchStats(Stated):
    """What the search covered: hardware options, replicas simulated and tuned, the seed, feasible answers and the
    time it took."""

    hardware_options: int | None = None
    simulated: int | None = None
    capacity_searches: int | None = None
    tuned_replicas: int | None = None
    seed: int | None = None
    feasible: int | None = None
    seconds: float | None = None


#: What an estimate's figures rest on: `measured` (this configuration's own measurement, interpolated),
#: `calibrated` (the shipped profile with the team's adopted correction) or `modelled` (the shipped profile alone).
Basis = Literal["measured", "calibrated", "modelled"]


class CalibrationSummary(Stated):
    """What an architecture's predictions state about their calibration (`sizing.perf.calibration.summary`): the
    profile's version, what it was fitted on, the error to expect per metric, and what the figures rest on."""

    version: str | None = None
    family: str | None = None
    engine: str | None = None
    basis: str | None = None
    #: cross-validated median absolute percentage error per metric (`ttft`, `tpot`, `throughput`, ...)
    expected_error: dict[str, float] = Field(default_factory=dict)
    profile_version: str | None = None
    estimate_basis: Basis | None = None
