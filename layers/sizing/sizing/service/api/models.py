"""Request and response models of the HTTP API (the estimate result and its architectures are
`sizing.results`'s) (they also make its OpenAPI document).

Requests are strict (`extra="forbid"`): a misspelt field is an error naming it, not silently ignored. The
workload spec inside a request stays a mapping here and is validated by `sizing.workload.parse.parse_spec`, the one
validator every entry point (CLI, API, Slack, events) shares, so presets apply the same way everywhere.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from sizing.base.strict import Strict
from sizing.results import Architecture
from sizing.service.runs import DEFAULT_TOP_K, MAX_TOP_K
from sizing.store import Run, RunSource, RunStatus, SlackThread

SPEC_DESCRIPTION = (
    "A workload spec: model, users or rate, tokens, slo, constraints (every field: docs/workload-spec.md in"
    " the repository; the schema here is generated from the same model)."
)
#: The README's support chatbot (examples/chatbot.yaml), shown in the OpenAPI document and Swagger UI.
EXAMPLE_SPEC: dict[str, Any] = {
    "name": "support-chat",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "users": {"total": 10000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "traffic": {"profile": "business-hours", "timezone": "America/New_York"},
    "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 90, "p95": 160}},
    "slo": {"ttft_ms": {"p95": 1000}, "e2e_s": {"p95": 2.5}},
}


class ErrorBody(Strict):
    """Every 4xx/5xx answer: a stable code, a sentence for a person, and the problems by field path."""

    error: str = Field(description="stable code: invalid_input, not_found, conflict, payload_too_large, ...")
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


#: A budget is money: a cent is the smallest amount; a million dollars is far above any sizing run (a few
#: GPU-hours per measured candidate) and catches a typo'd extra zero or three.
MIN_BUDGET_USD = 0.01
MAX_BUDGET_USD = 1_000_000


class RunRequest(Strict):
    """POST /runs: measure the top candidates of a workload."""

    spec: dict[str, Any] = Field(description=SPEC_DESCRIPTION, examples=[EXAMPLE_SPEC])
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=MAX_TOP_K, description="candidates to measure")
    budget_usd: float | None = Field(
        default=None,
        ge=MIN_BUDGET_USD,
        le=MAX_BUDGET_USD,
        description="stop (REFUSED) when the run's estimated cost exceeds this",
    )


class Links(Strict):
    self_: str = Field(alias="self", serialization_alias="self")
    architectures: str
    report: str
    cancel: str

    # built here by field name (`self_=`, in `for_run`); `self` is its name in JSON (the alias)
    model_config = ConfigDict(populate_by_name=True)

    @classmethod
    def for_run(cls, run_id: str) -> Links:
        base = f"/runs/{run_id}"
        return cls(
            self_=base,
            architectures=f"{base}/architectures",
            report=f"{base}/report",
            cancel=f"{base}/cancel",
        )


class ReportLink(Strict):
    """A time-limited link to a run's report stored in S3."""

    url: str
    expires_in_s: int


class CandidateProgress(Strict):
    """One measured candidate of a run, as far as its execution has gone."""

    candidate_id: str = Field(description="c1, c2, ... in estimate order")
    architecture: str | None = Field(default=None, description="the architecture id it measures")
    levels: list[int] = Field(default_factory=list, description="load levels (concurrent users) of its sweep")
    state: str | None = Field(
        default=None,
        description="last state entered: Provision, WaitUntilReady, StartLoadTest, Teardown, ...",
    )


class RunProgress(Strict):
    """What a run's execution has done so far (shown where the server follows executions: `sizing serve`)."""

    state: str | None = Field(default=None, description="the state machine state entered last")
    queue_position: int | None = Field(default=None, description="while QUEUED: 1 for the next run to start")
    candidates: list[CandidateProgress] = Field(default_factory=list)


class RunOut(Strict):
    """A run as the API shows it."""

    run_id: str
    status: RunStatus
    created_at: str
    updated_at: str
    model: str
    spec: dict[str, Any]
    top_k: int
    architecture_ids: list[str] | None = Field(
        default=None,
        description="the exact architectures measured, when the run named them (Slack's Measure these N)",
    )
    budget_usd: float | None = None
    execution_arn: str | None = None
    error: str | None = None
    source: RunSource
    slack: SlackThread | None = None
    links: Links
    progress: RunProgress | None = Field(
        default=None, description="the execution's progress (GET /runs/{id} under `sizing serve`)"
    )

    @classmethod
    def of(cls, run: Run, progress: dict[str, Any] | None = None) -> RunOut:
        return cls(
            **run.model_dump(),
            links=Links.for_run(run.run_id),
            progress=RunProgress.model_validate(progress) if progress is not None else None,
        )


class RunCreated(Strict):
    """202 answer of POST /runs: where to follow the run."""

    run_id: str
    status: RunStatus
    created_at: str
    links: Links


class RunPage(Strict):
    runs: list[RunOut]
    next_token: str | None = Field(
        default=None, description="pass as ?token= for the next page; null at the end"
    )


class RunArchitectures(Strict):
    run_id: str
    status: RunStatus
    architectures: list[Architecture] = Field(description="ranked; empty until the run has ranked any")


class InstanceOut(Strict):
    instance_type: str
    family: str
    accelerator: str
    accelerator_name: str
    accelerator_count: int
    devices: int = Field(description="tensor-parallel units: GPUs, or NeuronCores on inf2/trn")
    device_memory_gb: float
    vcpu: int
    memory_gib: float
    usd_per_hour: float | None = Field(
        description="on-demand, in the requested region (us-east-1 when absent)"
    )
    price_assumed: bool
    spot_discount: float


class InstanceList(Strict):
    region: str
    instances: list[InstanceOut]


class ModelOut(Strict):
    id: str
    aliases: list[str]
    params_b: float
    active_params_b: float
    layers: int
    max_context_tokens: int
    moe: bool
    kv_bytes_per_token_bf16: float
    bedrock: list[str] = Field(description="Bedrock model ids serving this model on demand")


class ModelList(Strict):
    models: list[ModelOut]
