"""Business spec → WorkloadModel.

A team describes its workload in business terms (users, how often they ask, how long prompts and answers are,
how fast answers must come). `WorkloadSpec` is that description, validated strictly; `WorkloadModel` is what the
estimator needs: arrival rates by hour, concurrency, token-length distributions and the SLO set.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from zoneinfo import available_timezones

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from sizing.base.distributions import MAX_TOKENS, PERCENTILES, TokenDistribution, Z
from sizing.base.errors import InvalidInput, NotFound, Problem, problems_from_pydantic
from sizing.base.vocabulary import CAPACITY_TYPES, DEPLOYMENTS, CapacityType, Deployment, Engine, Quantization

if TYPE_CHECKING:
    from sizing.traces.recorded import Recorded
    from sizing.traces.replay import TraceReplay

PresetName = Literal["chat", "rag", "summarization", "code-completion", "batch"]


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


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
        " model's class: predicted latencies are scaled up, and the capacity down,"
        " by the predicted/measured ratio at that quantile (sizing.perf.calibration.conservative_ratio)."
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


# --- presets -----------------------------------------------------------------------------------------------
#: Defaults per use case; a spec's own values always win. Each says where its numbers come from.
PRESETS: dict[str, dict[str, Any]] = {
    "chat": {
        "reason": "interactive assistant: short prompts with history, medium answers; first token within about a"
        " second feels responsive, 50-60 ms/token is faster than reading speed (the README's example workload)",
        "spec": {
            "users": {"peak_active_fraction": 0.10, "requests_per_active_hour": 30},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 700}},
            "slo": {"ttft_ms": {"p95": 1000}, "tpot_ms": {"p95": 60}, "e2e_s": {"p95": 15}},
        },
    },
    "rag": {
        "reason": "retrieval-augmented answers: several retrieved passages (~4-8 chunks of 512 tokens) make long"
        " inputs and short answers; TTFT dominates",
        "spec": {
            "users": {"peak_active_fraction": 0.10, "requests_per_active_hour": 20},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 4000, "p95": 8000}, "output": {"mean": 300, "p95": 800}},
            "slo": {"ttft_ms": {"p95": 2000}, "tpot_ms": {"p95": 60}},
        },
    },
    "summarization": {
        "reason": "documents in, a page out; users wait for the whole answer, so e2e matters more than TTFT",
        "spec": {
            "users": {"peak_active_fraction": 0.05, "requests_per_active_hour": 6},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 6000, "p95": 12000}, "output": {"mean": 500, "p95": 1000}},
            "slo": {"e2e_s": {"p95": 60}},
        },
    },
    "code-completion": {
        "reason": "inline completions fire on every pause in typing: a few hundred ms to first token or the"
        " suggestion arrives too late; outputs are short",
        "spec": {
            "users": {"peak_active_fraction": 0.30, "requests_per_active_hour": 120},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 1500, "p95": 4000}, "output": {"mean": 60, "p95": 200}},
            "slo": {"ttft_ms": {"p95": 300}, "e2e_s": {"p95": 2.0}},
        },
    },
    "batch": {
        "reason": "offline jobs: throughput and cost matter, latency barely; the day's requests finish within a"
        " day (slo.deadline_s, set when absent; a stated per-request target still binds), and on a real-time"
        " endpoint no request waits more than five minutes",
        "spec": {
            "traffic": {"profile": "flat"},
            "tokens": {"input": {"mean": 2000, "p95": 6000}, "output": {"mean": 400, "p95": 1200}},
            "slo": {"deadline_s": BATCH_DEADLINE_S},
            "constraints": {"min_replicas": 1},
        },
    },
}


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in ("input", "output"):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _apply_preset(raw: dict[str, Any]) -> dict[str, Any]:
    name = raw.get("preset")
    if not isinstance(name, str) or name not in PRESETS:
        return raw
    base = dict(PRESETS[name]["spec"])
    if "rate" in raw:
        base.pop("users", None)
    elif isinstance(raw.get("users"), dict):
        base["users"] = {**base.get("users", {}), **raw["users"]}
    elif "users" not in raw:
        base.pop("users", None)
    tokens = raw.get("tokens")
    if (isinstance(tokens, dict) and "samples_file" in tokens) or raw.get("trace"):
        base.pop("tokens", None)
    if raw.get("trace") and "users" not in raw:
        base.pop("users", None)  # the trace's busiest hour is the peak
    if "slo" in raw:
        base.pop("slo", None)
    merged = _deep_merge(base, raw)
    slo = merged.get("slo")
    if name == "batch" and isinstance(slo, dict) and slo.get("deadline_s") is None:
        # a batch job's deadline is its own field: the preset sets the day beside the spec's own targets
        merged["slo"] = {**slo, "deadline_s": BATCH_DEADLINE_S}
    return merged


USERS_OR_RATE = "give either users (business terms) or rate (peak_rps), not both and not neither"


def parse_spec(raw: Any, *, prefix: str = "", catalog: Any = None) -> WorkloadSpec:
    """Validate a spec given as a mapping. Raises InvalidInput with every problem at once, one per field, in the
    user's words (unknown fields with a did-you-mean). When the spec has problems, an unknown `model` is
    reported among them (against `catalog`, the shipped one by default) rather than only once the rest is
    fixed; a spec whose only problem is its model passes here and is refused by the catalog lookup after."""
    if not isinstance(raw, dict):
        raise InvalidInput(
            "a workload spec must be a mapping (YAML or JSON object)", [Problem(prefix, "not a mapping")]
        )
    merged = _apply_preset(raw)
    try:
        spec = WorkloadSpec.model_validate(merged)
    except ValidationError as exc:
        problems = problems_from_pydantic(exc, prefix, model=WorkloadSpec, quote=True)
    else:
        unstorable = _unstorable(spec.model_dump(mode="json", exclude_none=True), prefix)
        if not unstorable:
            return spec
        raise InvalidInput(_summary(unstorable), unstorable)
    # what WorkloadSpec's own validator says only once every field is valid: say it with the rest
    neither = merged.get("users") is None and merged.get("rate") is None and not merged.get("trace")
    both = merged.get("users") is not None and merged.get("rate") is not None
    if (neither or both) and not any(p.message == USERS_OR_RATE for p in problems):
        problems.append(Problem(_join(prefix, "users"), USERS_OR_RATE))
    # tokens may be left out only with a trace: without one, say so with the rest (WorkloadSpec's validator says it
    # only once every field is valid)
    tokens_field = _join(prefix, "tokens")
    if (
        "tokens" not in merged
        and not merged.get("trace")
        and not any(p.field == tokens_field for p in problems)
    ):
        at = next((i for i, p in enumerate(problems) if p.field == _join(prefix, "slo")), len(problems))
        problems.insert(at, Problem(tokens_field, "required, and missing"))
    for p in problems:
        if p.field == prefix and p.message == USERS_OR_RATE:
            p.field = _join(prefix, "users")
    model_problem = _model_problem(merged.get("model"), prefix, catalog)
    if model_problem is not None and not any(p.field == model_problem.field for p in problems):
        problems.insert(0, model_problem)
    raise InvalidInput(_summary(problems), problems)


def _unstorable(data: Any, path: str) -> list[Problem]:
    """The numbers of a validated spec outside what a run or a watch can store (`SMALLEST_STORED_NUMBER` to
    `LARGEST_STORED_NUMBER` in magnitude, or 0), each named by its field path."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _unstorable(v, _join(path, str(k)))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _unstorable(v, f"{path}[{i}]")]
    number = isinstance(data, int | float) and not isinstance(data, bool)
    if number and data and not SMALLEST_STORED_NUMBER <= abs(data) <= LARGEST_STORED_NUMBER:
        return [
            Problem(
                path,
                f"{data!r} is out of range: use 0 or magnitudes between {SMALLEST_STORED_NUMBER:g} and"
                f" {LARGEST_STORED_NUMBER:g}",
            )
        ]
    return []


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _summary(problems: list[Problem]) -> str:
    n = len(problems)
    return "the workload spec is not valid" + (f" ({n} problems)" if n > 1 else "")


def _model_problem(name: Any, prefix: str, catalog: Any) -> Problem | None:
    """The catalog's refusal of an unknown model name, as a problem of the spec (None when known or not text)."""
    if not isinstance(name, str) or not name:
        return None

    if catalog is None:
        from sizing.catalog import load_catalog

        catalog = load_catalog()
    try:
        catalog.model(name, field_name=_join(prefix, "model"))
    except NotFound as exc:
        return exc.problems[0] if exc.problems else Problem(_join(prefix, "model"), exc.message)
    return None


def load_spec(path: str | Path) -> WorkloadSpec:
    """Read a spec from a YAML or JSON file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read {p}: {exc.strerror}", [Problem("file", str(p))]) from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{p} is not UTF-8 text", [Problem("file", "not UTF-8 text")]) from None
    try:
        raw = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{p} is not valid YAML/JSON: {exc}", [Problem("file", "parse error")]) from None
    except (RecursionError, ValueError):
        # what the parsers raise rather than report: nesting past the recursion limit, an integer past CPython's
        # digit limit (sys.int_info.default_max_str_digits)
        raise InvalidInput(
            f"{p} is nested too deeply or holds a number too long to read", [Problem("file", "parse error")]
        ) from None
    spec = parse_spec(raw)
    if spec.trace and not spec.trace.path.startswith("s3://") and not Path(spec.trace.path).is_absolute():
        resolved_trace = str((p.parent / spec.trace.path).resolve())
        spec = spec.model_copy(update={"trace": spec.trace.model_copy(update={"path": resolved_trace})})
    if spec.tokens.samples_file and not Path(spec.tokens.samples_file).is_absolute():
        resolved = (p.parent / spec.tokens.samples_file).resolve()
        spec = spec.model_copy(
            update={"tokens": spec.tokens.model_copy(update={"samples_file": str(resolved)})}
        )
    return spec


def _dist(t: TokenSpec) -> TokenDistribution:
    if t.fixed is not None:
        return TokenDistribution.fixed(t.fixed)
    assert t.mean is not None
    if t.sigma is not None:
        return TokenDistribution.lognormal(t.mean, t.sigma)
    assert t.p95 is not None
    return TokenDistribution.from_mean_p95(t.mean, t.p95)


def read_token_samples(path: str | Path) -> tuple[list[int], list[int]]:
    """Read (input, output) token counts from CSV (header input_tokens,output_tokens) or JSONL."""
    p = Path(path)
    ins: list[int] = []
    outs: list[int] = []
    try:
        with p.open() as fh:
            if p.suffix == ".jsonl":
                rows: Any = (json.loads(line) for line in fh if line.strip())
            else:
                rows = csv.DictReader(fh)
            for i, row in enumerate(rows, start=1):
                try:
                    a, b = int(row["input_tokens"]), int(row["output_tokens"])
                except (KeyError, TypeError, ValueError):
                    raise InvalidInput(
                        f"{p}: row {i} needs integer input_tokens and output_tokens",
                        [Problem("tokens.samples_file", f"row {i} is malformed")],
                    ) from None
                if a < 1 or b < 1:
                    raise InvalidInput(
                        f"{p}: row {i} has a token count below 1",
                        [Problem("tokens.samples_file", f"row {i}: counts must be >= 1")],
                    )
                ins.append(a)
                outs.append(b)
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {p}: {exc.strerror}", [Problem("tokens.samples_file", str(p))]
        ) from None
    except json.JSONDecodeError:
        raise InvalidInput(f"{p} is not JSONL", [Problem("tokens.samples_file", "not JSONL")]) from None
    if not ins:
        raise InvalidInput(f"{p} has no rows", [Problem("tokens.samples_file", "empty")])
    return ins, outs


# --- the derived model -----------------------------------------------------------------------------------
#: Business hours: 09:00-18:00 local at full weight, shoulders at 09:00-1 and 18:00 at half, night at 5%.
#: The night floor keeps background traffic (other timezones, batch jobs) and min_replicas meaningful.
BUSINESS_HOURS = [0.05] * 7 + [0.3, 0.6] + [1.0] * 9 + [0.6, 0.3] + [0.1] * 2 + [0.05] * 2


#: Days in an average month (365.25 / 12), and the weekdays among them (5 of every 7).
DAYS_PER_MONTH = 365.25 / 12
WEEKDAYS_PER_MONTH = DAYS_PER_MONTH * 5 / 7


def _weights(traffic: Traffic) -> list[float]:
    if traffic.profile == "flat":
        return [1.0] * 24
    if traffic.profile == "business-hours":
        return list(BUSINESS_HOURS)
    w = list(traffic.profile)
    top = max(w)
    return [x / top for x in w]


@dataclass
class WorkloadModel:
    """What the estimator needs: rates by hour, concurrency, token distributions and SLOs."""

    spec: WorkloadSpec
    model_id: str
    peak_rps: float
    hourly_rps: list[float]  # 24 values, index = local hour of day
    input_tokens: TokenDistribution
    output_tokens: TokenDistribution
    peak_active_users: int | None
    think_time_s: float | None
    notes: list[str] = field(default_factory=list)
    #: tokens at the start of every prompt common to all requests (`tokens.shared_prefix`; 0: none declared)
    shared_prefix_tokens: int = 0
    #: the trace's window the estimator replays instead of Poisson arrivals (None: no trace, or trace.replay false)
    replay: TraceReplay | None = None
    #: what the trace says (`sizing.traces.summarize`), with how it was scaled; None without a trace
    trace: dict[str, Any] | None = None

    @property
    def avg_rps(self) -> float:
        """The average rate over a day with traffic (a weekday, for business hours)."""
        return sum(self.hourly_rps) / 24

    @property
    def traffic_days_per_month(self) -> float:
        """Days a month with this traffic: business hours run Monday to Friday (about 21.7 of 30.44 days; weekends
        carry none and the fleet holds min_replicas), any other profile every day."""
        return WEEKDAYS_PER_MONTH if self.spec.traffic.profile == "business-hours" else DAYS_PER_MONTH

    @property
    def requests_per_month(self) -> float:
        """Requests in an average month: a traffic day's requests x the days with traffic."""
        return self.avg_rps * 86400 * self.traffic_days_per_month

    @property
    def slo(self) -> SLO:
        return self.spec.slo

    @property
    def request_seconds_estimate(self) -> float:
        """Time a request is in flight, for Little's law, from the SLO alone (the planner refines it with
        predicted latencies): TTFT + TPOT x mean output tokens when both are bounded, else the e2e bound,
        else a 1 s TTFT and 50 ms/token (typical interactive serving) -- the slowest the SLO allows."""
        slo = self.spec.slo
        if not (slo.ttft_ms or slo.tpot_ms or slo.e2e_s):
            return slo.targets()[0][2]  # a deadline alone: a job's request waits at most this long
        if slo.ttft_ms and slo.tpot_ms:
            ttft = max(v for _, v in slo.ttft_ms.items()) / 1000
            tpot = max(v for _, v in slo.tpot_ms.items()) / 1000
            basis = ttft + tpot * max(self.output_tokens.mean - 1, 0)
            if slo.e2e_s:
                basis = min(basis, max(v for _, v in slo.e2e_s.items()))
            return basis
        if slo.e2e_s:
            return max(v for _, v in slo.e2e_s.items())
        ttft = max(v for _, v in slo.ttft_ms.items()) / 1000 if slo.ttft_ms else 1.0
        tpot = max(v for _, v in slo.tpot_ms.items()) / 1000 if slo.tpot_ms else 0.05
        return ttft + tpot * max(self.output_tokens.mean - 1, 0)

    @property
    def peak_concurrency(self) -> float:
        """Little's law: requests in flight = arrival rate x time in the system."""
        return self.peak_rps * self.request_seconds_estimate

    def derived(self) -> dict[str, Any]:
        i, o = self.input_tokens, self.output_tokens
        return {
            "name": self.spec.name,
            "model": self.model_id,
            "peak_rps": round(self.peak_rps, 4),
            "avg_rps": round(self.avg_rps, 4),
            "peak_active_users": self.peak_active_users,
            "peak_concurrency": round(self.peak_concurrency, 2),
            "concurrency_basis_s": round(self.request_seconds_estimate, 3),
            "think_time_s": None if self.think_time_s is None else round(self.think_time_s, 2),
            "requests_per_day": round(self.avg_rps * 86400),
            "requests_per_month": round(self.requests_per_month),
            "traffic_days_per_month": round(self.traffic_days_per_month, 2),
            "input_tokens": i.describe(),
            "output_tokens": o.describe(),
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "input_tokens_per_s_peak": round(self.peak_rps * i.mean, 1),
            "output_tokens_per_s_peak": round(self.peak_rps * o.mean, 1),
            "hourly_rps": [round(x, 4) for x in self.hourly_rps],
            "timezone": self.spec.traffic.timezone,
            "slo": self.spec.slo.model_dump(exclude_none=True),
            "notes": self.notes,
            **({"trace": self.trace} if self.trace is not None else {}),
        }


def from_trace(spec: WorkloadSpec, notes: list[str], s3_client: Any = None) -> Recorded:
    """What `spec.trace` says, for the workload model; `notes` gets what replaced what."""
    # numpy and the readers: only a spec with a trace pays for them
    from sizing.traces.recorded import recorded, short_for_slo

    assert spec.trace is not None
    t = spec.trace
    rec = recorded(t.path, t.format, t.model, replay=t.replay, s3_client=s3_client)
    n = rec.figures["requests"]
    if short := short_for_slo(n, [q for _, q, _ in spec.slo.targets()]):
        rec.figures["notes"] = [*rec.figures["notes"], short]
    notes.append(
        f"trace {Path(t.path).name if not t.path.startswith('s3://') else t.path} ({rec.figures['format']},"
        f" {n:,} requests): its lengths replace tokens.input/output"
        + (", its arrivals and prefix hits replace Poisson arrivals" if t.replay else "")
    )
    if spec.users is not None or spec.rate is not None:
        notes.append(
            f"the trace's busiest hour ({rec.peak_rps:.3g} requests/s) is time-scaled to the peak the spec gives"
        )
    else:
        notes.append(f"peak = the trace's busiest hour: {rec.peak_rps:.3g} requests/s")
    return rec


def _peak(spec: WorkloadSpec, notes: list[str]) -> tuple[float, int | None, float | None]:
    """(peak requests/s, active users at peak, think time per request) as the spec states them; a trace without
    users or rate gives 0 here: its busiest hour sets the peak (`build_model`)."""
    if spec.users is None:
        return (spec.rate.peak_rps if spec.rate is not None else 0.0), None, None
    u = spec.users
    peak = u.peak_rps()
    notes.append(
        f"{u.total:,} users x {u.peak_active_fraction:.0%} active x {u.requests_per_active_hour:g} requests/hour"
        f" = {peak:.2f} requests/s at peak"
    )
    if peak < MIN_PEAK_RPS:
        # sized as a rate: closed-loop users who think for days between requests model nothing
        notes.append(
            f"these users send {peak:.3g} requests per second at peak, below the smallest load sized"
            f" ({MIN_PEAK_RPS:g}/s): sized at {MIN_PEAK_RPS:g}/s, which min_replicas serve"
        )
        return MIN_PEAK_RPS, None, None
    return peak, max(1, round(u.total * u.peak_active_fraction)), 3600.0 / u.requests_per_active_hour


def build_model(spec: WorkloadSpec, model_id: str | None = None) -> WorkloadModel:
    """Derive the WorkloadModel. `model_id` is the catalog id the spec's model resolved to (if looked up)."""
    notes: list[str] = []
    peak, active_users, think = _peak(spec, notes)
    weights = _weights(spec.traffic)
    hourly = [peak * w for w in weights]
    replay: TraceReplay | None = None
    trace_figures: dict[str, Any] | None = None
    if spec.trace is not None:
        recorded = from_trace(spec, notes)
        i_dist, o_dist, replay, trace_figures = recorded.inp, recorded.out, recorded.replay, recorded.figures
        if spec.users is None and spec.rate is None:
            peak = recorded.peak_rps
            if peak < MIN_PEAK_RPS:
                why = (
                    f"its {trace_figures['requests']:,} requests span no time, so it gives no rate: give rate.peak_rps"
                    " or users to size it for"
                )
                raise InvalidInput(f"trace: {why}", [Problem("trace", why)])
        trace_figures["sized_peak_rps"] = round(peak, 4)
        trace_figures["time_scale"] = round(peak / recorded.peak_rps, 4) if recorded.peak_rps > 0 else None
        hourly = [peak * w for w in (recorded.weights or weights)]
        if recorded.weights is None:
            shape = spec.traffic.profile if isinstance(spec.traffic.profile, str) else "24 hourly weights"
            notes.append(f"the trace covers less than a day: the day's shape is traffic.profile ({shape})")
        prefix = (
            spec.tokens.shared_prefix if spec.tokens.shared_prefix is not None else recorded.shared_prefix
        )
    elif spec.tokens.samples_file:
        ins, outs = read_token_samples(spec.tokens.samples_file)
        i_dist, o_dist = TokenDistribution.empirical(ins), TokenDistribution.empirical(outs)
        if spec.tokens.input or spec.tokens.output:
            notes.append("tokens.samples_file given: its samples replace tokens.input/output")
    else:
        assert spec.tokens.input is not None and spec.tokens.output is not None
        i_dist, o_dist = _dist(spec.tokens.input), _dist(spec.tokens.output)
    if spec.trace is None:
        prefix = spec.tokens.shared_prefix or 0
    problem = shared_prefix_problem(prefix, i_dist.mean)
    if problem:  # a samples_file's mean (the spec's own input was checked when it was parsed)
        raise InvalidInput(f"tokens.shared_prefix: {problem}", [Problem("tokens.shared_prefix", problem)])
    if spec.preset:
        notes.append(f"preset {spec.preset}: {PRESETS[spec.preset]['reason']}")
    wm = WorkloadModel(
        spec=spec,
        model_id=model_id or spec.model,
        peak_rps=peak,
        hourly_rps=hourly,
        input_tokens=i_dist,
        output_tokens=o_dist,
        peak_active_users=active_users,
        think_time_s=think,
        notes=notes,
        shared_prefix_tokens=prefix,
        replay=replay,
        trace=trace_figures,
    )
    if think is not None:
        # a user's cycle is request time + think time; what is left of the cycle is thinking
        wm.think_time_s = max(0.0, think - wm.request_seconds_estimate)
    return wm


def resolve(spec: WorkloadSpec, catalog: Any | None = None) -> WorkloadModel:
    """Look the model up in the catalog (clear error with suggestions when unknown) and derive the model."""
    from sizing.catalog import load_catalog

    cat = catalog or load_catalog()
    model = cat.model(spec.model)
    wm = build_model(spec, model.id)
    check_context(wm, model.id, model.max_position_embeddings)
    return wm


def context_limit(spec: WorkloadSpec, model_context: int) -> int:
    """The longest request a deployment may serve: the model's context, or `constraints.max_context_tokens` if
    lower."""
    cap = spec.constraints.max_context_tokens
    return min(model_context, cap) if cap else model_context


def check_context(wm: WorkloadModel, model_id: str, model_context: int) -> None:
    """Refuse a workload whose requests exceed the allowed context at p99: no deployment serves them. `sizing
    predict` refuses the same case for its one request shape."""
    p_in, p_out = wm.input_tokens.percentile("p99"), wm.output_tokens.percentile("p99")
    limit = context_limit(wm.spec, model_context)
    what = f"{model_id}'s context of {limit:,} tokens"
    if limit < model_context:
        what = f"the allowed context of {limit:,} tokens (constraints.max_context_tokens)"
    problems: list[Problem] = []
    if p_in > limit:
        problems.append(Problem("tokens.input", f"p99 of {p_in:,.0f} tokens exceeds {what}"))
    if p_out > limit:
        problems.append(Problem("tokens.output", f"p99 of {p_out:,.0f} tokens exceeds {what}"))
    if not problems and p_in + p_out > limit:
        problems.append(
            Problem(
                "tokens.input",
                f"p99 input + p99 output = {p_in + p_out:,.0f} tokens exceeds {what}; shorten prompts or answers",
            )
        )
    if problems:
        raise InvalidInput(f"the workload's longest requests do not fit: {problems[0].message}", problems)
