"""The workload spec: what a team describes in business terms (users, how often they ask, how long prompts
and answers are, how fast answers must come), validated strictly. Each model names its field and the problem in
the user's words; `sizing.workload.parse` reads a spec into these models."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from sizing.base.distributions import MAX_TOKENS, PERCENTILES, Z
from sizing.base.strict import Strict
from sizing.base.vocabulary import CAPACITY_TYPES, DEPLOYMENTS, CapacityType, Deployment, Engine, Quantization

PresetName = Literal["chat", "rag", "summarization", "code-completion", "batch"]


class Spec(Strict):
    """The base of the workload spec's models: an unknown key is refused and named."""


def _field_errors(title: str, errors: list[tuple[tuple[str, ...], Any, str]]) -> ValidationError:
    """A ValidationError with one error per (location, value, message): raised inside a model validator, pydantic
    reports each under its own field path (e.g. `slo.e2e_s.p95`) instead of the model's."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "{message}", {"message": message}),
                loc=loc,
                input=value,
            )
            for loc, value, message in errors
        ],
    )


#: The smallest peak load sized: one request every ~12 days. Below it there is no load to size, and rates that
#: small vanish to zero in the simulator's per-replica arithmetic: users whose product is smaller are sized at this
#: load (what min_replicas serves anyway), with a note saying so, rather than refused -- no schema can state a
#: bound on a product of three fields, and a spec the API documents as valid is one it answers.
MIN_PEAK_RPS = 1e-6
#: Numbers of a spec lie within what DynamoDB stores (runs and watches keep their spec): magnitudes from 1e-130
#: to below 1e126 (docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html),
#: or 0. Every spec number is held to it, estimates included, so that one rule (said in the OpenAPI document)
#: answers a spec the same on every route.
SMALLEST_STORED_NUMBER = 1e-130
LARGEST_STORED_NUMBER = 1e125


class Users(Spec):
    total: int = Field(gt=0, le=10**9, description="people who use the service")
    peak_active_fraction: float = Field(
        default=0.10, gt=0, le=1, description="share of users active in the busiest hour"
    )
    requests_per_active_hour: float = Field(
        default=30, gt=0, le=36_000, description="requests one active user sends in an hour"
    )

    def peak_rps(self) -> float:
        """Requests per second in the busiest hour."""
        return self.total * self.peak_active_fraction * self.requests_per_active_hour / 3600


class Rate(Spec):
    peak_rps: float = Field(
        ge=MIN_PEAK_RPS, le=1e6, description="requests per second in the busiest hour", examples=[5]
    )


class Traffic(Spec):
    """How requests spread over the day."""

    profile: Literal["flat", "business-hours"] | list[Annotated[float, Field(ge=0)]] = Field(
        default="business-hours",
        description="flat (the same every hour), business-hours (weekday office hours, Monday to Friday: weekends carry"
        " no traffic, so a month bills about 21.7 days of requests and the fleet holds min_replicas on weekends),"
        " or 24 hourly weights (every day alike)",
        examples=["business-hours"],
    )
    timezone: str = Field(
        default="UTC",
        description="IANA time zone of the business hours: a name of the tz database, such as Europe/Berlin",
        examples=["America/New_York"],
    )

    @field_validator("profile")
    @classmethod
    def _weights(cls, v: Any) -> Any:
        if isinstance(v, list):
            if len(v) != 24:
                raise ValueError(f"a custom profile needs 24 hourly weights, got {len(v)}")
            if max(v) <= 0:
                raise ValueError("a custom profile needs at least one hour with a weight above 0")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        if v not in timezone_names():
            raise ValueError(f"unknown timezone '{v}' (use an IANA name such as Europe/Berlin)")
        return v


@functools.cache
def timezone_names() -> frozenset[str]:
    """The IANA time zone names `traffic.timezone` accepts: those of the tz database at hand (the `tzdata`
    package, else the system's; `zoneinfo` loads each), and UTC; the OpenAPI document lists the same set."""
    return frozenset(available_timezones() | {"UTC"})


class TokenSpec(Spec):
    """A token-length distribution: `fixed`, or `mean` + `p95` (fitted to a lognormal), or an explicit
    `dist: lognormal` with `mean` and `sigma`."""

    fixed: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="every request this long")
    mean: float | None = Field(default=None, gt=0, le=MAX_TOKENS, description="mean length", examples=[1200])
    p95: float | None = Field(
        default=None, gt=0, le=MAX_TOKENS, description="95th percentile length (with mean)", examples=[3500]
    )
    dist: Literal["lognormal"] | None = Field(default=None, description="lognormal: give mean and sigma")
    sigma: float | None = Field(default=None, gt=0, le=3, description="lognormal shape (with dist, mean)")

    @model_validator(mode="after")
    def _one_form(self) -> TokenSpec:
        if self.fixed is not None:
            if any(x is not None for x in (self.mean, self.p95, self.sigma, self.dist)):
                raise ValueError(
                    "give either fixed, or mean with p95, or dist: lognormal with mean and sigma"
                )
            return self
        if self.mean is None:
            raise ValueError("give fixed, or mean with p95, or dist: lognormal with mean and sigma")
        if self.dist == "lognormal" or self.sigma is not None:
            if self.sigma is None:
                raise ValueError("dist: lognormal needs sigma")
            if self.p95 is not None:
                raise ValueError("give p95 or sigma, not both")
            return self
        if self.p95 is None:
            raise ValueError("mean needs p95 (or use fixed, or dist: lognormal with sigma)")
        if self.p95 < self.mean:
            raise ValueError(f"p95 ({self.p95:g}) is below the mean ({self.mean:g})")
        ratio = math.log(self.p95 / self.mean)
        if ratio > Z["p95"] ** 2 / 2:
            raise ValueError(
                f"p95 ({self.p95:g}) is more than {math.exp(Z['p95'] ** 2 / 2):.2f}x the mean ({self.mean:g}):"
                " no lognormal has that shape; give dist: lognormal with sigma, or a samples_file"
            )
        return self

    def mean_tokens(self) -> float:
        """The distribution's mean as given (`fixed` or `mean`)."""
        return float(self.fixed) if self.fixed is not None else float(self.mean or 0.0)


def shared_prefix_problem(prefix: int, input_mean: float) -> str | None:
    """Why a shared prefix of `prefix` tokens cannot belong to prompts of `input_mean` tokens on average, or None:
    the prefix starts every prompt, so one as long as a typical prompt is a mistake (a prefix length given for the
    whole prompt, or in characters)."""
    if prefix > 0 and prefix >= input_mean:
        return (
            f"a shared prefix of {prefix:,} tokens is not below the input's mean of {input_mean:,.0f} tokens: the"
            " prefix starts every prompt, so it must be shorter than a typical prompt"
        )
    return None


class Tokens(Spec):
    """Prompt and answer lengths, in tokens of the model's tokenizer."""

    input: TokenSpec | None = Field(
        default=None, description="prompt length (system prompt and history included)"
    )
    output: TokenSpec | None = Field(default=None, description="answer length")
    samples_file: str | None = Field(
        default=None, description="CSV or JSONL with input_tokens and output_tokens per request"
    )
    shared_prefix: int | None = Field(
        default=None,
        ge=0,
        le=MAX_TOKENS,
        description="tokens at the start of every prompt that all requests share (a system prompt, few-shot"
        " examples); counted in tokens.input. With prefix caching (vLLM --enable-prefix-caching) they are read"
        " from the KV cache instead of prefilled again, and held there once for all requests. Must be below the"
        " input's mean",
    )

    def complete(self) -> bool:
        """Lengths are given: input and output, or a samples_file (without them a `trace` must give them)."""
        return self.samples_file is not None or (self.input is not None and self.output is not None)

    @model_validator(mode="after")
    def _complete(self) -> Tokens:
        # with a samples_file the input's mean is known once the file is read (build_model checks it there)
        if self.shared_prefix and self.input is not None and self.samples_file is None:
            problem = shared_prefix_problem(self.shared_prefix, self.input.mean_tokens())
            if problem:
                raise _field_errors("Tokens", [(("shared_prefix",), self.shared_prefix, problem)])
        return self


class PercentileBounds(Spec):
    """Upper bounds by percentile (at least one); they must not decrease from p50 to p99."""

    p50: float | None = Field(default=None, gt=0, description="median bound")
    p90: float | None = Field(default=None, gt=0, description="90th percentile bound")
    p95: float | None = Field(default=None, gt=0, description="95th percentile bound")
    p99: float | None = Field(default=None, gt=0, description="99th percentile bound")

    @model_validator(mode="after")
    def _ordered(self) -> PercentileBounds:
        given = [(k, getattr(self, k)) for k in PERCENTILES if getattr(self, k) is not None]
        if not given:
            raise ValueError("give at least one percentile (p50, p90, p95 or p99)")
        for (ka, va), (kb, vb) in itertools.pairwise(given):
            if vb < va:
                raise ValueError(f"{kb} ({vb:g}) is below {ka} ({va:g}); percentiles must not decrease")
        return self

    def items(self) -> list[tuple[str, float]]:
        return [(k, v) for k in PERCENTILES if (v := getattr(self, k)) is not None]


#: Bounds of `slo.confidence`: below the median the SLO would be checked on the estimator's optimistic side; above
#: 0.99 the quantile rests on the one or two most extreme held-out rows of a family (a few hundred per metric).
MIN_CONFIDENCE = 0.5
MAX_CONFIDENCE = 0.99
#: A batch job's deadline when the batch preset is used and none is stated: the nightly run's day.
BATCH_DEADLINE_S = 86400.0
#: The longest deadline accepted: a week (a longer one is a typo for a job submitted daily).
MAX_DEADLINE_S = 7 * 86400.0
#: A job's requests on a real-time endpoint, when only a deadline is stated, are sized so that none waits longer
#: than this (p99): five minutes keeps a request from starving behind the queue while throughput decides the fleet
#: (the batch preset's per-request bound before deadlines were their own field). Not a stated target: jobs are
#: judged by the deadline.
JOB_REQUEST_E2E_S = 300.0


class SLO(Spec):
    """Latency objectives (at least one): the estimate keeps every one of them at peak load."""

    ttft_ms: PercentileBounds | None = Field(default=None, description="time to first token, milliseconds")
    tpot_ms: PercentileBounds | None = Field(
        default=None, description="time per output token after the first, ms"
    )
    e2e_s: PercentileBounds | None = Field(default=None, description="whole request, seconds")
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DEADLINE_S,
        description="a batch job's deadline, seconds: the day's requests, submitted as one job, finish within it"
        " (Bedrock batch inference, a SageMaker asynchronous job, or a real-time endpoint's day). The batch"
        " preset sets 86400 (a day) when absent. A stated per-request target (ttft_ms, tpot_ms, e2e_s) still"
        " binds every answer, a job's requests included",
        examples=[86400],
    )
    confidence: float | None = Field(
        default=None,
        ge=MIN_CONFIDENCE,
        le=MAX_CONFIDENCE,
        description="size so that every SLO target holds at this quantile of the estimator's own cross-validated"
        " error (leave one harness out, the rows its stated intervals rest on) for the hardware's kind and the"
        " model's class: predicted latencies are scaled up by the predicted/measured ratio at that quantile, per"
        " unit of the queue's amplification of a step error and raised to the amplification of each simulated"
        " load, as the stated intervals are, and the capacity down by the throughput's ratio at that quantile"
        " (sizing.perf.calibration.conservative_ratio; docs/estimator.md, 'Sizing at a confidence')."
        " Without it a fixed share of each replica's SLO capacity is kept free at peak (20% by default)",
        examples=[0.8],
    )

    @model_validator(mode="after")
    def _some(self) -> SLO:
        if not (self.ttft_ms or self.tpot_ms or self.e2e_s or self.deadline_s):
            raise ValueError("give at least one SLO: ttft_ms, tpot_ms, e2e_s or (a batch job's) deadline_s")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> SLO:
        """An e2e bound below the TTFT bound of the same percentile contradicts itself: a request cannot end
        before its first token. Only that pure contradiction is refused; whether the bounds can be met is the
        estimate's question."""
        if self.ttft_ms is None or self.e2e_s is None:
            return self
        errors: list[tuple[tuple[str, ...], Any, str]] = []
        for q in PERCENTILES:
            ttft, e2e = getattr(self.ttft_ms, q), getattr(self.e2e_s, q)
            if ttft is None or e2e is None or e2e * 1000 >= ttft:
                continue
            ttft_text = f"{ttft / 1000:g} s" if ttft >= 1000 else f"{ttft:g} ms"
            why = "a request cannot end before its first token"
            errors.append(
                (
                    ("e2e_s", q),
                    e2e,
                    f"e2e {q} {e2e:g} s is below TTFT {q} {ttft_text}: {why}; raise slo.e2e_s.{q}"
                    f" or lower slo.ttft_ms.{q}",
                )
            )
            errors.append(
                (
                    ("ttft_ms", q),
                    ttft,
                    f"TTFT {q} {ttft_text} is above e2e {q} {e2e:g} s: {why}; lower"
                    f" slo.ttft_ms.{q} or raise slo.e2e_s.{q}",
                )
            )
        if errors:
            raise _field_errors("SLO", errors)
        return self

    def stated_targets(self) -> list[tuple[str, str, float]]:
        """The per-request targets as stated: (metric, percentile, limit), ms for ttft/tpot, seconds for e2e."""
        out: list[tuple[str, str, float]] = []
        for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
            p = getattr(self, metric)
            if p is not None:
                out += [(metric, k, v) for k, v in p.items()]
        return out

    def targets(self) -> list[tuple[str, str, float]]:
        """The per-request targets real-time answers are sized to: those stated, or with only a deadline, a job's
        requests kept from starving (e2e p99 within JOB_REQUEST_E2E_S, or the deadline when shorter)."""
        stated = self.stated_targets()
        if stated or self.deadline_s is None:
            return stated
        return [("e2e_s", "p99", min(JOB_REQUEST_E2E_S, self.deadline_s))]


class TraceSpec(Spec):
    """A recorded trace of the workload's requests (docs/traces.md): its lengths, arrivals and prefix reuse replace
    `tokens` and the Poisson arrivals of the estimate; its busiest hour is the peak unless `users` or `rate` give
    one (the trace is then time-scaled to it)."""

    path: str = Field(
        min_length=1,
        max_length=2048,
        description="the trace: a file or folder on this machine (CLI), or an s3:// object or prefix (deployed)",
        examples=["traces/tuesday.jsonl", "s3://my-bucket/bedrock-logs/2026/03/03/"],
    )
    format: Literal["mooncake", "bedrock", "datacapture", "csv"] | None = Field(
        default=None,
        description="mooncake (JSONL), bedrock (model-invocation logs), datacapture (SageMaker Data Capture) or"
        " csv; detected from the first line when unset",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="the model whose requests to read, where a log holds several (a Bedrock modelId)",
    )
    replay: bool = Field(
        default=True,
        description="replay the trace's arrivals and prefix hits in the estimate; false: Poisson arrivals at the"
        " same rate with the trace's lengths",
    )


def _default_deployments() -> list[Deployment]:
    return list(DEPLOYMENTS)


def _default_capacity() -> list[CapacityType]:
    return list(CAPACITY_TYPES)


def _default_quants() -> list[Quantization]:
    return ["bf16", "fp8"]


def _default_engines() -> list[Engine]:
    return ["vllm"]


class Constraints(Spec):
    region: str = Field(
        default="us-east-1",
        description="the AWS Region to deploy in and price for (a code such as us-east-1 or eu-central-1)",
        examples=["us-east-1"],
    )
    #: Where requests and their data may be processed: `in-region` (only `region`), `geography` (a geographic
    #: Bedrock cross-Region inference profile, e.g. `us.` or `eu.`), `any` (a `global.` profile too).
    data_residency: Literal["in-region", "geography", "any"] = Field(
        default="in-region",
        description="where requests may be processed: in-region (only region), geography (a Bedrock cross-Region"
        " profile of the region's geography, such as us. or eu.), any (a global. profile too)",
    )
    #: For a batch workload (preset `batch`, or an e2e SLO of an hour or more): also consider batch modes (Bedrock
    #: batch inference). `false` keeps only the real-time answers.
    #: Leave out hardware whose availability in the Region the dated price snapshot does not cover (by default such
    #: hardware is ranked, marked "availability unknown" and priced from us-east-1).
    require_known_availability: bool = Field(
        default=False,
        description="leave out instance types whose availability in the region is unknown (the dated price"
        " snapshot does not cover their family there); by default they are ranked, each saying 'availability in"
        " <region> unknown; price from us-east-1'",
    )
    batch_inference: bool = Field(
        default=True,
        description="for a batch workload (preset batch, or an e2e SLO of an hour or more), also consider batch"
        " modes such as Bedrock batch inference; false keeps only real-time answers",
    )
    deployments: list[Deployment] = Field(
        default_factory=_default_deployments,
        min_length=1,
        description="where it may run: eks (Karpenter GPU or Neuron nodes), sagemaker (real-time endpoints),"
        " bedrock (managed models)",
    )
    instance_families: list[str] | None = Field(
        default=None,
        description="only these EC2 instance families, such as g6e or p5 (GET /catalog/instances); all when unset",
        examples=[["g6e", "p5"]],
    )
    instance_types: list[str] | None = Field(
        default=None,
        description="only these instance types, such as g6e.xlarge (an ml. prefix is accepted; GET"
        " /catalog/instances); all when unset",
        examples=[["g6e.xlarge", "p5.48xlarge"]],
    )
    capacity: list[CapacityType] = Field(
        default_factory=_default_capacity,
        min_length=1,
        description="purchase options: on-demand, spot (spot runs what is above the on-demand base of"
        " min_replicas)",
    )
    quantizations: list[Quantization] = Field(
        default_factory=_default_quants,
        min_length=1,
        description="weight formats the model may be served in; a model's own checkpoint format is tried too"
        " unless this is given",
    )
    engines: list[Engine] = Field(
        default_factory=_default_engines,
        min_length=1,
        description="serving engines to consider (neuron is vLLM on AWS Inferentia/Trainium)",
    )
    #: Two replicas so one availability zone can fail (and a rollout can proceed) without an outage.
    min_replicas: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="replicas always running; 2 or more spreads them over two availability zones",
    )
    max_monthly_usd: float | None = Field(
        default=None, gt=0, description="refuse architectures that cost more than this a month (USD)"
    )
    max_context_tokens: int | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS,
        description="the longest request (prompt + answer, tokens) a deployment serves, at most the model's own"
        " context (its context when unset); a workload longer at p99 is refused",
    )

    @field_validator("region")
    @classmethod
    def _known_region(cls, v: str) -> str:
        # deferred here and below: sizing.catalog (its pydantic models) costs ~50 ms (-X importtime) of the cold
        # starts that parse no spec (the Slack acknowledgement, the notifier)
        from sizing.catalog.regions import is_region, suggest_regions

        code = v.strip().lower()
        if not is_region(code):
            hint = suggest_regions(code)
            raise ValueError(
                f"unknown AWS Region '{v}'"
                + (
                    f"; did you mean {', '.join(hint)}?"
                    if hint
                    else " (use a code such as us-east-1 or eu-central-1)"
                )
            )
        return code


class WorkloadSpec(Spec):
    """A workload in business terms: one model for CLI, API, Slack and events (docs/workload-spec.md). Give
    either `users` or `rate`; `tokens` and `slo` are required unless a `preset` fills them. With a `trace`, `tokens`,
    `users` and `rate` may be left out: the trace gives the lengths and its busiest hour the peak."""

    name: str = Field(default="workload", min_length=1, max_length=128, description="a name for the workload")
    model: str = Field(
        min_length=1,
        max_length=256,
        description="the model: a catalog id or alias, or a Hugging Face id (GET /catalog/models)",
        examples=["meta-llama/Llama-3.1-70B-Instruct"],
    )
    preset: PresetName | None = Field(
        default=None, description="defaults for a use case; the spec's own values win"
    )
    users: Users | None = Field(default=None, description="load in business terms (or give rate)")
    rate: Rate | None = Field(default=None, description="load as a request rate (or give users)")
    traffic: Traffic = Field(default_factory=Traffic, description="how the load spreads over the day")
    tokens: Tokens = Field(
        default_factory=Tokens, description="prompt and answer lengths (a trace gives them when omitted)"
    )
    trace: TraceSpec | None = Field(
        default=None, description="a recorded trace: its lengths, arrivals and prefix reuse (docs/traces.md)"
    )
    slo: SLO = Field(description="latency objectives")
    constraints: Constraints = Field(
        default_factory=Constraints, description="where and how it may be deployed"
    )

    @model_validator(mode="after")
    def _users_or_rate(self) -> WorkloadSpec:
        if self.users is not None and self.rate is not None:
            raise ValueError(USERS_OR_RATE)
        if self.users is None and self.rate is None and self.trace is None:
            raise ValueError(USERS_OR_RATE)
        if self.trace is None and not self.tokens.complete():
            raise _field_errors(
                "WorkloadSpec",
                [
                    (
                        ("tokens",),
                        None,
                        "give tokens.input and tokens.output, or tokens.samples_file (or a trace)",
                    )
                ],
            )
        return self


USERS_OR_RATE = "give either users (business terms) or rate (peak_rps), not both and not neither"
