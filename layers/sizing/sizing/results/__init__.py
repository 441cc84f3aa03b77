"""The product's answer, typed: an estimate result and its architectures, as the planner builds them and every
consumer (API, store, report, Slack, release comparisons, manifests, twin, load test) reads them.

The JSON contract is these models' `model_dump(mode="json")`. Models are frozen; fields may be added, never renamed.
Unknown keys are refused (`extra="forbid"`): the planner builds the models with named fields, so a misspelled field
fails type checking and validation instead of riding along unread; what a run's merge step adds is declared here
too (the blocks beside an architecture's own figures are in `sizing.results.blocks`). The ranking rule and the
architecture id live here, once."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from sizing.base.serving_config import ServerFacts, ServingConfig
from sizing.base.vocabulary import CapacityType, Deployment, Invocation
from sizing.results.blocks import (
    Assumptions,
    Basis,
    BedrockOffer,
    BillComponent,
    CalibrationSummary,
    Frozen,
    HourlySchedule,
    Infeasible,
    LevelOutcome,
    LoadTarget,
    PredictedAtLevel,
    PriceSource,
    RegionInfo,
    SearchedCapacity,
    SearchStats,
    Stated,
    WorkloadFigures,
)
from sizing.results.blocks import (
    Percentiles as Percentiles,
)


class Predicted(Frozen):
    """Latency distributions at an operating point: ms for TTFT and TPOT, seconds for e2e."""

    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_s: Percentiles


class Replicas(Frozen):
    peak: int
    min: int
    mean: float


class Instances(Frozen):
    peak: int
    #: None in an older or hand-written result that states only the peak (unknown)
    min: int | None = None
    mean: float | None = None


class PerReplica(Frozen):
    #: requests in flight at the SLO capacity, as the simulation saw them
    max_concurrency: float
    #: requests in flight at the operating point (the busiest hour), as the simulation saw them
    in_flight: float | None = None
    rps: float
    rps_slo_limit: float
    rps_at_peak: float
    kv_cache_tokens: int


class Cost(Frozen):
    #: None in an older or hand-written result that states only the monthly cost (unknown)
    usd_per_hour_peak: float | None = None
    usd_per_month: float
    usd_per_month_spot: float | None = None
    usd_per_month_savings_plan_1y: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_user_month: float | None = None
    #: the bill's components by name: each deployment bills different things (instance-hours and the control
    #: plane on EKS, tokens on Bedrock, model units for Provisioned Throughput, jobs for batch), so this is an open
    #: map of named components rather than one record
    breakdown: dict[str, BillComponent] = Field(default_factory=dict)
    schedule: HourlySchedule | None = None
    price: PriceSource | None = None

    def component(self, name: str) -> float | None:
        """A figure of the breakdown by name (None: this bill has no such figure)."""
        value = self.breakdown.get(name)
        return float(value) if isinstance(value, int | float) else None


#: SLO metrics and latencies as an allowance's text names them.
ALLOWANCE_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "e2e", "ttft": "TTFT", "tpot": "TPOT"}


def factors_read(latency: dict[str, float], amplification: dict[str, float]) -> str:
    """ "TTFT x1.76, TPOT x1.18, e2e x1.23 (the queue multiplying a step error TTFT x1.09, TPOT x1.10)": the factors
    by SLO metric a sizing at a confidence read at one load, and the queue's multiplication there where above 1."""
    read = ", ".join(f"{ALLOWANCE_NAMES.get(m, m)} x{f:.2f}" for m, f in latency.items())
    queued = ", ".join(f"{ALLOWANCE_NAMES.get(m, m)} x{x:.2f}" for m, x in amplification.items() if x > 1.0)
    return f"{read} (the queue multiplying a step error {queued})" if queued else read


class Allowance(Frozen):
    """What a sizing at `slo.confidence` allowed for the estimator's own error at the busiest hour's load
    (docs/estimator.md, "Sizing at a confidence")."""

    #: the quantile of the estimator's held-out error every SLO target holds at
    confidence: float
    #: per SLO metric ("ttft_ms", "tpot_ms", "e2e_s"): the factor its predicted figure was multiplied by before the
    #: SLO check at this load
    latency: dict[str, float]
    #: per latency ("ttft", "tpot"): how many times the queue multiplied a step-time error at this load (1: as it is)
    amplification: dict[str, float]
    #: the share of the replica's SLO capacity sized to (saturated throughput over-predicted at the quantile)
    capacity: float


class Headroom(Stated):
    """How far the operating point is from trouble: spare load, and each SLO target's margin."""

    #: share of the replica's SLO capacity left free in the busiest hour
    load_pct: float
    #: per SLO target ("e2e_s.p95"): how far below its limit the prediction is, in percent of the limit
    latency: dict[str, float] = Field(default_factory=dict)
    tightest: str | None = None
    tightest_pct: float | None = None
    #: how the sizing allowed for the estimator's error: "fixed 20% load headroom", or with `slo.confidence` the
    #: quantile and the factors applied to predicted latencies and capacity
    reasoning: str | None = None
    #: with `slo.confidence`: the factors the sizing read at this load (absent without one)
    allowance: Allowance | None = None


class Tuning(Frozen):
    """What the runtime-parameter search gained over the engine's defaults."""

    #: None in an older result whose tuning block states only its summary (unknown)
    searched: int | None = None
    changed: dict[str, list[Any]] = Field(default_factory=dict)
    summary: str
    default_usd_per_month: float | None = None
    capacity_gain_pct: float = 0.0


class ContextInfo(Frozen):
    max_model_len: int
    covers: str
    refused_share: float
    model_context: int


class Placement(Frozen):
    """How replicas land on nodes, as the cost counts them and the manifests make them."""

    replicas_per_instance: int
    #: `zone`: replicas spread over `zones` availability zones (topology spread), nodes counted per zone
    spread: Literal["zone"] | None = None
    zones: int = 1


class AlsoFits(Frozen):
    instance_type: str
    usd_per_month: float


class Measured(Frozen):
    """Figures from a load test. `origin` says what served them: `endpoint` (a real server: measured) or `twin`
    (a local endpoint timed by our own model: simulated, never a measurement).

    A run's load test (`sizing.orchestrate.merge`) states the level shown and its throughput, the SLO capacity the
    passing levels reached (or the capacity search's, with its interval: `capacity`), each level and whether it
    met the SLOs, the serving configuration and engine version served, when and how it was measured, and the
    estimator's figures re-simulated at the level shown. The fields are declared in the order the merge writes
    them, so a run's stored JSON and this model's dump (of the fields set) read alike."""

    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    e2e_s: Percentiles | None = None
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    at: LoadTarget | None = None
    capacity_rps: float | None = None
    meets_slo: bool | None = None
    levels: list[LevelOutcome] = Field(default_factory=list)
    origin: Literal["twin", "endpoint"] | None = None
    serving: ServingConfig | None = None
    engine_version: str | None = None
    #: what the server reported it runs, and where that differs from the serving configuration the estimate
    #: assumed, in words
    server: ServerFacts | None = None
    when: str | None = None
    how: str | None = None
    #: a replayed trace's digest: its levels were the trace time-scaled to each rate
    trace_digest: str | None = None
    differs: list[str] = Field(default_factory=list)
    predicted_at_level: PredictedAtLevel | None = None
    #: the architecture whose deployment was load-tested, when it is not this row (SageMaker on the hardware of a
    #: measured EKS row), and that in words
    measured_on: str | None = None
    note: str | None = None
    capacity: SearchedCapacity | None = None


class MeasuredEdge(Frozen):
    """Where the SLO's edge lies on the measured closed-loop levels (`sizing.learn.matching.slo_edge`)."""

    #: requests in flight and closed-loop requests/s at the edge, between the two measured levels around it
    concurrency: float
    requests_per_s: float
    #: the SLO target that reaches its limit there ("e2e_s.p95")
    binding: str | None = None


class Measurement(Frozen):
    """The measurement an architecture's figures rest on when its `basis` is `measured`: the run and candidate
    that measured this model, accelerator and ServingConfig, the levels used, the token shape measured and its
    distance to the workload's (`sizing predict` states the same block)."""

    run_id: str
    candidate_id: str
    recorded_at: str | None = None
    engine_version: str | None = None
    #: the measured levels (closed-loop concurrency) the figures were interpolated between
    levels: list[int] = Field(default_factory=list)
    token_shape: dict[str, float] = Field(default_factory=dict)
    token_distance: float | None = None
    #: the SLO's edge on the measured levels, the open-loop edge of the estimator rescaled to this measurement
    #: (req/s per replica), and which of the two (the lower) is the capacity
    edge: MeasuredEdge | None = None
    open_loop_rps: float | None = None
    decided_by: str | None = None
    #: the time scales (prefill, decode) that make the estimator's closed-loop predictions match the levels
    scales: dict[str, float] = Field(default_factory=dict)
    #: the estimator's own figures at the operating point (Poisson arrivals on the rescaled replica)
    modelled: Predicted | None = None
    #: where the figures shown come from: the measured levels, or the estimator rescaled to the measurement (below
    #: the lowest measured level)
    figures_from: str | None = None


#: What kind of answer a row is: an endpoint serving requests as they come, a batch job (Bedrock batch inference),
#: or an asynchronous job (SageMaker asynchronous inference draining the day's requests).
Kind = Literal["real-time", "batch job", "async job"]
#: What a row's figures rest on, in a buyer's words (`Architecture.basis` says `modelled` for `estimated`).
RowBasis = Literal["estimated", "calibrated", "measured", "simulated (twin)"]
#: Whether the hardware is known to be sold in the row's Region (the price snapshot covers it) or not known.
Availability = Literal["sold here", "unknown"]


class QuotaFlag(Frozen):
    """An adjustable service quota the architecture needs raised: a caveat, not a rejection. Bedrock reserves a
    request's input plus `max_tokens` of output against the tokens-per-minute quota when the request starts."""

    needs_increase: bool
    tokens_per_minute_needed: int | None = None
    tokens_per_minute_default: int | None = None
    requests_per_minute_needed: int | None = None
    requests_per_minute_default: int | None = None
    #: the one line to show: "needs a quota increase to N tokens/min (default M)"
    message: str
    #: what to file, and where (Service Quotas console or `aws service-quotas request-service-quota-increase`)
    request: str | None = None
    source: str | None = None


class BatchJob(Frozen):
    """A batch inference job costed as a whole: the hours of traffic a day submitted as one job."""

    requests: int
    input_tokens: int
    output_tokens: int
    usd_per_job: float
    usd_per_million_tokens: float
    #: expected wall time of the job, hours (Bedrock's completion window is the bound AWS states)
    wall_time_h: float
    wall_time_bound_h: float | None = None
    wall_time_assumed: bool = True
    note: str | None = None
    #: instances that run the job and the instance-hours billed for it (SageMaker asynchronous inference)
    instances: int | None = None
    instance_hours: float | None = None


class SpotInfo(Frozen):
    """Spot as a buyer sees it: the price paid, how often AWS reclaims the capacity, and the on-demand base kept."""

    region: str
    usd_per_hour: float
    discount: float
    discount_source: str
    discount_assumed: bool
    #: the Spot Instance Advisor band of the family in the Region ("<5%" ... ">20%" of instances reclaimed a month)
    interruption_band: str
    interruption_band_assumed: bool
    interruption_source: str
    expected_interruptions_per_month: float
    #: nodes kept on-demand so that min_replicas stay up through interruptions, and their monthly cost
    on_demand_base_nodes: int
    on_demand_base_usd_per_month: float
    message: str


class InferenceComponentsInfo(Frozen):
    """SageMaker real-time endpoint packing: model copies as inference components, each with its own accelerators,
    sharing the endpoint's instances (SageMaker bills the instances, per instance-hour)."""

    copies_per_instance: int
    accelerators_per_copy: float
    instances_peak: int
    copies_peak: int
    source: str
    message: str


class Architecture(Frozen):
    """One deployable answer: hardware, its serving configuration, predicted figures and cost."""

    rank: int | None = None
    id: str
    model: str
    #: the catalog entry whose facts the estimate used (the model as named may be an alias of it)
    catalog_model: str | None = None
    deployment: Deployment
    instance_type: str | None = None
    accelerator: str | None = None
    accelerators_per_replica: float | None = None
    tensor_parallel: int | None = None
    quantization: str | None = None
    engine: str
    capacity_type: CapacityType = "on-demand"
    #: how requests reach it: as they arrive, queued to an asynchronous endpoint, or as a batch job
    invocation: Invocation = "real-time"
    replicas: Replicas | None = None
    replicas_per_instance: int | None = None
    instances: Instances | None = None
    per_replica: PerReplica | None = None
    predicted: Predicted
    calibration: CalibrationSummary | None = None
    #: what the predicted figures rest on (`Basis`), and the calibration profile version the estimate used (the
    #: shipped profile's, plus `+team.<version>` when a team correction applied); read from `calibration` when not
    #: given
    basis: Basis | None = None
    profile_version: str | None = None
    #: with `basis: measured`, the measurement the capacity and figures come from
    measurement: Measurement | None = None
    measured: Measured | None = None
    meets_slo: bool
    headroom_pct: float | None = None
    headroom: Headroom | None = None
    cost: Cost
    #: after a run's load test re-priced the row at its measured capacity, the estimate's own cost (absent from
    #: the JSON otherwise)
    cost_estimated: Cost | None = Field(default=None, exclude_if=lambda v: v is None)
    serving: ServingConfig | None = None
    context: ContextInfo | None = None
    tuning: Tuning | None = None
    placement: Placement | None = None
    also_fits_on: list[AlsoFits] = Field(default_factory=list)
    weights_gb: float | None = None
    bedrock: BedrockOffer | None = None
    #: a quota to raise before this architecture can serve the peak (ranked by its cost all the same)
    quota: QuotaFlag | None = None
    #: the Region the architecture runs in and its prices are from
    region: str | None = None
    #: whether the hardware is known to be sold in the Region (`sold here`: the dated price snapshot lists it there)
    #: or `unknown` (the snapshot does not cover its family there: never assumed available); None for Bedrock
    availability: Availability | None = None
    #: the Region the price comes from when it is not the architecture's own (us-east-1 standing in)
    price_region: str | None = None
    #: a batch job's cost and wall time (Bedrock batch inference, SageMaker asynchronous inference, or the day's
    #: requests on a real-time architecture)
    batch: BatchJob | None = None
    #: Bedrock service tier of the offer (`standard`, `priority`, `flex`, `reserved`) or `provisioned` throughput
    service_tier: str | None = None
    #: spot price, interruption class and on-demand base (EKS architectures with a spot cost)
    spot: SpotInfo | None = None
    #: SageMaker inference components: copies per instance and accelerators per copy
    inference_components: InferenceComponentsInfo | None = None
    pareto: bool | None = None
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _basis_from_calibration(cls, data: Any) -> Any:
        """`basis` and `profile_version` from the calibration block the planner states (`calibration.summary`)."""
        if isinstance(data, dict) and isinstance(data.get("calibration"), dict):
            cal = data["calibration"]
            if data.get("basis") is None and cal.get("estimate_basis"):
                data = {**data, "basis": cal["estimate_basis"]}
            if data.get("profile_version") is None and cal.get("profile_version"):
                data = {**data, "profile_version": cal["profile_version"]}
        return data

    @staticmethod
    def make_id(
        deployment: str,
        instance_type: str,
        tensor_parallel: int,
        quantization: str,
        engine: str,
        capacity: str,
    ) -> str:
        """`{deployment}:{instance_type}:tp{N}:{quantization}:{engine}:{capacity_type}`."""
        return f"{deployment}:{instance_type}:tp{tensor_parallel}:{quantization}:{engine}:{capacity}"

    @staticmethod
    def parse_id(arch_id: str) -> dict[str, Any] | None:
        """The fields `make_id` joined, or None when `arch_id` is not of that form."""
        parts = arch_id.split(":")
        if len(parts) != 6 or not parts[2].startswith("tp") or not parts[2][2:].isdigit():
            return None
        deployment, instance_type, tp, quant, engine, capacity = parts
        return {
            "deployment": deployment,
            "instance_type": instance_type,
            "tensor_parallel": int(tp[2:]),
            "quantization": quant,
            "engine": engine,
            "capacity_type": capacity,
        }

    @property
    def ranked_usd_per_month(self) -> float:
        """The monthly cost an architecture is ranked by: its spot cost where it runs on spot, else on-demand."""
        return ranked_usd_per_month(self.cost.usd_per_month, self.cost.usd_per_month_spot, self.capacity_type)

    def rank_key(self) -> tuple[float, float, int]:
        """The ranking: cheapest first; then more load headroom; then fewer nodes at peak."""
        return (
            self.ranked_usd_per_month,
            -(self.headroom_pct or 0.0),
            self.instances.peak if self.instances else 0,
        )

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=False)


def ranked_usd_per_month(on_demand: float, spot: float | None, capacity_type: str) -> float:
    """The ranking's cost rule, for figures not yet in an `Architecture` (the search's bounds)."""
    if capacity_type == "spot" and spot is not None:
        return float(spot)
    return float(on_demand)


def rank_cost(arch: dict[str, Any] | Architecture) -> float:
    """The ranking's cost of an architecture given as a model or as its JSON (a stored or merged result)."""
    typed = arch if isinstance(arch, Architecture) else Architecture.model_validate(arch)
    return typed.ranked_usd_per_month


class RejectedKind(StrEnum):
    """Why a candidate is not in the ranking."""

    memory = "memory"
    slo = "slo"
    dominated = "dominated"
    budget = "budget"
    quota = "quota"
    unsupported = "unsupported"


class Rejected(Frozen):
    id: str
    kind: RejectedKind
    reason: str


class NotCheaper(Frozen):
    """A hardware option cheaper than the answer that an SLO excluded, and by how much."""

    option: str
    usd_per_month: float
    reason: str


class QuotaNote(Frozen):
    """A quota the architecture needs raised before it can serve the peak (a caveat, not a rejection)."""

    service: Literal["bedrock", "ec2"]
    #: the one line to show: "needs a quota increase to 900,000 tokens/min (default 600,000)"
    message: str
    #: what to file and where
    request: str | None = None
    source: str | None = None


class Figures(Frozen):
    """The figures that apply to the row's kind, at the percentile each SLO bounds (p95 where none)."""

    percentiles: dict[str, str]
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_s: float | None = None
    #: requests in flight per replica at peak (a real-time replica's; None for a job)
    in_flight: float | None = None
    #: requests/s a replica sustains under the SLO (what capacity the replicas were counted from)
    capacity_rps: float | None = None
    replicas_min: int | None = None
    replicas_peak: int | None = None
    instances_peak: int | None = None
    usd_per_month: float | None = None
    usd_per_month_spot: float | None = None
    usd_per_million_output_tokens: float | None = None
    #: a job's cost and its expected wall time (batch and asynchronous jobs, and a batch workload's day of
    #: requests on a real-time endpoint)
    usd_per_job: float | None = None
    job_wall_time_h: float | None = None


class AnswerRow(Frozen):
    """One architecture as every output shows it."""

    rank: int | None = None
    id: str
    deployment: str
    #: the instance type, or the Bedrock model id
    where: str
    #: `TP8 fp8 vllm`, or `per-token` for Bedrock
    config: str
    kind: Kind
    #: Bedrock: `Standard tier`, `Priority tier`, `Flex tier`, `Reserved tier`, `provisioned throughput`,
    #: `batch`; hosted: `on-demand` or `spot`
    tier: str
    quotas: list[QuotaNote] = Field(default_factory=list)
    region: str | None = None
    availability: Availability = "sold here"
    #: the Region the price is from, when it is not the row's own
    price_region: str | None = None
    basis: RowBasis
    meets_slo: bool = True
    figures: Figures

    @property
    def label(self) -> str:
        return f"{self.deployment} {self.where} {self.config}".strip()

    def availability_phrase(self) -> str | None:
        """`availability in eu-west-1 unknown; price from us-east-1`, or None when the hardware is known sold."""
        if self.availability != "unknown":
            return None
        price = f"; price from {self.price_region}" if self.price_region else ""
        return f"availability in {self.region} unknown{price}"

    @model_validator(mode="before")
    @classmethod
    def _drop_said(cls, data: Any) -> Any:
        """`qualifiers` in a row's JSON is derived (below), not an input."""
        if isinstance(data, dict) and "qualifiers" in data:
            data = {k: v for k, v in data.items() if k != "qualifiers"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def qualifiers(self) -> list[str]:
        """The phrases every output carries for this row: kind, tier, basis, quotas and availability."""
        out = [self.kind, self.tier, self.basis]
        out += [q.message for q in self.quotas]
        if (phrase := self.availability_phrase()) is not None:
            out.append(phrase)
        return out

    def qualifier_text(self) -> str:
        """The qualifiers as one line: `batch job · batch · estimated · needs a quota increase ...`."""
        return " · ".join(self.qualifiers)


class SloCost(Frozen):
    """What one stated SLO target costs: the answer's monthly cost, and the cheapest answer's with that target alone
    relaxed one step (its bound doubled; `sizing.plan.slo_cost`)."""

    #: `ttft_ms.p99`, and its name `TTFT p99`
    target: str
    name: str
    limit: float
    relaxed_limit: float
    #: the answer's monthly cost (None: nothing meets the SLOs as stated) and the cheapest under the relaxation
    usd_per_month: float | None = None
    relaxed_usd_per_month: float | None = None
    saving_usd_per_month: float | None = None
    relaxed_answer: str | None = None
    #: the target whose relaxation saves most: the one that binds
    binding: bool = False
    #: the line every output prints: `TTFT p99 150 ms → 300 ms: $784,350 → $96,033/month`
    line: str


class EstimateResult(Frozen):
    """The estimate result contract: the workload as modelled, ranked architectures, what was rejected and why."""

    workload: WorkloadFigures
    architectures: list[Architecture]
    rejected: list[Rejected] = Field(default_factory=list)
    assumptions: Assumptions = Field(default_factory=Assumptions)
    search: SearchStats | None = None
    generated_at: str | None = None
    infeasible: Infeasible | None = None
    why_not_cheaper: list[NotCheaper] = Field(default_factory=list)
    summary: str | None = None
    #: the Region estimated, where its prices come from, and hardware it lacks
    region: RegionInfo | None = None
    #: every managed (Bedrock) offer priced for the workload, whether or not it meets the SLOs: what a buyer
    #: compares the ranking with (`meets_slo`, `quota` and `notes` say why it is or is not ranked)
    managed_options: list[Architecture] = Field(default_factory=list)
    #: the ranked architectures as every output shows them (`sizing.answer`): kind, tier, quotas, Region and
    #: availability, basis and the figures that apply, one per architecture in rank order
    rows: list[AnswerRow] = Field(default_factory=list)
    #: each stated SLO target relaxed one step alone, the cheapest answer under it and the dollar difference
    slo_costs: list[SloCost] = Field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def document(self) -> dict[str, Any]:
        """The result's JSON as `sizing estimate --json` prints it and Slack, the store, the release comparisons and
        the Step Functions payloads carry it: `as_json()` without `infeasible` when something is ranked (the HTTP
        API states it as null)."""
        out = self.as_json()
        if out.get("infeasible") is None:
            out.pop("infeasible", None)
        return out
