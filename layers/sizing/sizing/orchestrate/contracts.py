"""The sizing run's payloads, typed: what each state of `statemachines/sizing_run.asl.json` takes and returns, and
the task the load generator is handed. One model per payload, shared by the step that produces it and the step
(or process) that consumes it.

A step reads its input once at the Lambda boundary (`step_input`) and works with typed attributes; what it returns
is its model's `model_dump(mode="json")`. The keys are the JSON contract the state machine's JSONPaths read
(`$.estimate.value.candidates`, `$.poll.value.ready`, `$.candidate.candidate_id`, ...): fields may be added, never
renamed. Inputs ignore keys they do not name (Step Functions assembles them); what this package produces forbids
unknown keys, so a typo in a producer fails its tests instead of a run."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.serving_config import ServerFacts, ServingConfig
from sizing.base.strict import Lenient, Open, Strict
from sizing.deploy.base import Endpoint
from sizing.loadtest.capacity import level_requests
from sizing.loadtest.config import (
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    CapacitySearchSpec,
    LoadTestConfig,
    Metric,
    Pct,
    ReplaySpec,
    SloTarget,
)
from sizing.loadtest.metrics import Distribution
from sizing.loadtest.overload import Overload
from sizing.loadtest.stepsample import StepsSample
from sizing.orchestrate.settings import CAPACITY_MAX_LEVEL_S
from sizing.results import Architecture
from sizing.results.blocks import LoadTarget
from sizing.traces.formats import TraceFormat
from sizing.workload.spec import TokenSpec

#: Most levels a candidate's capacity search runs (bracketing 2-3, bisecting 2-3, a bound 1): each is a warm-up,
#: a window that may grow (`capacity_window_cap`), and a tail.
CAPACITY_LEVELS = 7
#: Windows an unsure capacity-search level may grow to, whatever its rate.
CAPACITY_UNSURE_WINDOWS = 2


def capacity_window_cap(
    window_s: float, capacity_rps: float, percentiles: Sequence[str], most_s: float = CAPACITY_MAX_LEVEL_S
) -> float:
    """Longest a capacity-search level's window grows (seconds): as long as `level_requests` (for the SLO's
    `percentiles`) take at the predicted capacity, at least CAPACITY_UNSURE_WINDOWS windows and at most `most_s`
    (or those windows, where longer)."""
    need = level_requests(percentiles) / capacity_rps if capacity_rps > 0 else math.inf
    return max(CAPACITY_UNSURE_WINDOWS * window_s, min(most_s, need))


#: One SLO target as the load generator reads it: (metric, percentile, limit), a JSON list of three.
SloTriple = tuple[Metric, Pct, float]

M = TypeVar("M", bound=BaseModel)


class Produced(Strict):
    """A payload this package writes: unknown keys are a producer's bug."""


class StateInput(Lenient):
    """A state's input as the state machine assembles it: keys it adds that a step does not read are ignored."""


def step_input(model: type[M], event: Any) -> M:
    """The state's input as `model`, or InvalidInput naming each field: "the step's input is incomplete" when
    keys are missing, "... is not valid" when a value is of the wrong shape."""
    if not isinstance(event, dict):
        raise InvalidInput("the step's input must be an object", [Problem("event", "not an object")])
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        errors = exc.errors()
        missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and len(e["loc"]) == 1]
        if len(missing) == len(errors):
            raise InvalidInput(
                "the step's input is incomplete", [Problem(k, "missing") for k in missing]
            ) from None
        raise InvalidInput("the step's input is not valid", problems_from_pydantic(exc, quote=True)) from None


# --- what the Estimate step hands on ---------------------------------------------------------------------------
class MachineSettings(Open):
    """The numbers the state machine reads from the Estimate step's output (Wait, Map, heartbeat, timeout);
    `OrchestrationSettings.machine_settings()` writes them."""

    ready_poll_s: int
    ready_max_attempts: int = Field(ge=1)
    max_concurrency: int
    heartbeat_s: int = Field(ge=1)
    loadtest_timeout_s: int


class TraceLoad(Produced):
    """The recorded trace a candidate's load test replays (the workload's `trace`, docs/traces.md): where it is
    and how to read it, and the digest of what the estimate read. The load generator reads it again (the window
    of 1,000 requests is too large for a state's payload) and refuses a trace that changed since."""

    path: str = Field(min_length=1, description="a file or folder (local run), or an s3:// object or prefix")
    format: TraceFormat | None = None
    model: str | None = None
    digest: str = Field(min_length=1, description="sha256:... of the bytes the estimate read")


class LoadPlan(Produced):
    """What the load generator needs from the workload: token distributions and SLO targets, and the trace to
    replay where the workload has one. A workload read from a samples file has no distribution here: the load
    test then uses `LoadTestConfig`'s defaults."""

    input_tokens: TokenSpec | None = None
    output_tokens: TokenSpec | None = None
    slo: list[SloTriple] = Field(default_factory=list)
    #: tokens at the start of every prompt that all requests share (the workload's `tokens.shared_prefix`; 0: none)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    #: the recorded trace the load test replays (its arrivals, lengths and prefixes); None: drawn lengths
    trace: TraceLoad | None = None

    @field_serializer("input_tokens", "output_tokens")
    def _given_only(self, spec: TokenSpec | None) -> dict[str, Any] | None:
        return None if spec is None else spec.model_dump(mode="json", exclude_none=True)

    @model_serializer(mode="wrap")
    def _trace_when_replayed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The plan as before traces were replayed, unless it replays one."""
        out: dict[str, Any] = handler(self)
        if out.get("trace") is None:
            out.pop("trace", None)
        return out


class Candidate(Produced):
    """One hardware option to measure (an item of the MeasureCandidates Map): the ranked architecture, the
    architectures the measurement stands for (EKS and SageMaker on the same accelerators), the concurrency
    levels of its sweep, and the workload to drive."""

    candidate_id: str = Field(min_length=1)
    architecture: Architecture
    applies_to: list[str] = Field(default_factory=list)
    levels: list[int] = Field(min_length=1)
    workload: LoadPlan | None = None


class EstimateOutput(Produced):
    """The Estimate state's result (`$.estimate.value`): BudgetGuard reads `refused`, the Map `candidates` and
    `settings`, NotifyRefused `reason`."""

    settings: MachineSettings
    measurement_cost: dict[str, Any]
    workload: dict[str, Any]
    refused: bool
    reason: str | None
    candidates: list[Candidate]


class EstimateInput(StateInput):
    run_id: str = Field(min_length=1)
    #: the workload spec as the run was started with it; `parse_spec` validates it with its own wording
    spec: dict[str, Any]
    top_k: int | None = None
    #: the exact architectures to measure (a Slack "Measure these N"); None: the top `top_k` hardware options
    architecture_ids: list[str] | None = None
    budget_usd: float | None = None


# --- one candidate: provision, ready, load test, teardown --------------------------------------------------------
class CandidateInput(StateInput):
    run_id: str = Field(min_length=1)
    candidate: Candidate


class ProvisionInput(CandidateInput):
    settings: MachineSettings | None = None


class CheckReadyInput(CandidateInput):
    endpoint: Endpoint
    attempts: int | None = 0
    settings: MachineSettings


class ReadyCheck(Produced):
    """The CheckReady state's result (`$.poll.value`), fed back as the next check's `attempts`."""

    ready: bool
    give_up: bool
    attempts: int = Field(ge=0)
    reason: str = ""


class LoadTestInput(CandidateInput):
    task_token: str = Field(min_length=1)
    endpoint: Endpoint
    settings: MachineSettings


class TeardownInput(CandidateInput):
    outcome: str | None = None
    error: Any = None


class Teardown(Produced):
    """What a candidate's teardown removed (the state discards it: `ResultPath: null`; logs and tests read it)."""

    candidate_id: str
    outcome: str | None = None
    deleted: list[str] = Field(default_factory=list)
    remaining: list[str] = Field(default_factory=list)


#: The parts of a stored level read whole or not at all (`StepRecord._readable`).
_WHOLE: dict[str, type[BaseModel]] = {"serving": ServingConfig, "engine_steps": StepsSample}


class StepRecord(Lenient):
    """One stored load level as the run's merge, the report and the learning loop read it: the load generator's
    `StepResult` JSON with what the load task recorded beside it (`sizing.orchestrate.loadtask`: the serving
    configuration measured, the engine version, the model served, the shared prefix, the prompts' seed and what
    the server reports it runs) and, on a capacity search's levels, `phase`. Each field is optional: records of
    earlier releases and hand-written ones state fewer. Keys not named here are not read."""

    target: LoadTarget | None = None
    requests: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    input_tokens: float | None = None
    output_tokens: float | None = None
    ttft_ms: Distribution = Field(default_factory=Distribution)
    tpot_ms: Distribution = Field(default_factory=Distribution)
    e2e_s: Distribution = Field(default_factory=Distribution)
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    meets_slo: bool | None = None
    trace_digest: str | None = None
    serving: ServingConfig | None = None
    engine_version: str | None = None
    served_model: str | None = None
    #: the name the user told the run the server serves the model under (`--served-model`)
    served_as: str | None = None
    shared_prefix_tokens: int = 0
    seed: int | None = None
    server_facts: ServerFacts | None = None
    phase: str | None = None
    #: a closed loop's lock-step groups (`StepResult.lockstep_group`): re-simulated with groups of that size
    lockstep_group: float | None = None
    #: the warm-up before its window, which its users started in (`StepResult.warmup_s`): a closed loop is
    #: re-simulated with its users started so (`sizing.base.spawn`; None: a record that does not state it)
    warmup_s: float | None = Field(default=None, ge=0)
    #: whether the server kept up with an open-loop level's arrivals (`sizing.loadtest.overload`; None: not tested,
    #: or a record of an earlier release)
    overload: Overload | None = None
    #: the level's engine steps rebuilt from its streamed chunks (`StepResult.engine_steps`; None: a record of an
    #: earlier release, or chunks that could not be read as steps)
    engine_steps: StepsSample | None = None

    @field_validator("serving", "engine_steps", mode="before")
    @classmethod
    def _readable(cls, value: Any, info: ValidationInfo) -> Any:
        """A part recorded in a shape this release does not read is unknown, and the level stands without it: a
        serving configuration recorded before the whole of it was, engine steps stored in another shape."""
        if isinstance(value, dict):
            try:
                _WHOLE[info.field_name or ""].model_validate(value)
            except ValidationError:
                return None
        return value

    @field_validator("requests", "shared_prefix_tokens", mode="before")
    @classmethod
    def _none_is_zero(cls, value: Any) -> Any:
        return 0 if value is None else value

    @property
    def failed(self) -> int:
        """Requests of the level that failed, of every kind."""
        return sum(self.errors.values())

    def distribution(self, metric: str) -> Distribution:
        """The level's `ttft_ms`, `tpot_ms` or `e2e_s` distribution."""
        dist: Distribution = getattr(self, metric)
        return dist


def seed_of(*parts: str) -> int:
    """A prompt seed that is the same for the same parts and differs between runs (the run id is unique)."""
    return int(hashlib.sha256(":".join(parts).encode()).hexdigest()[:8], 16)


# --- the load generator's task -------------------------------------------------------------------------------------
class LoadTask(Produced):
    """What the LoadTest state hands the load generator (a local child process's TASK.json, or the Fargate
    container's `$LOADTEST_TASK`): the endpoint, the sweep and where to report. `config()` is the sweep as the
    load-test process runs it."""

    task_token: str = Field(min_length=1)
    run_id: str
    candidate_id: str
    endpoint: str
    model: str
    levels: list[int] = Field(min_length=1)
    input_tokens: TokenSpec = Field(default_factory=lambda: TokenSpec(fixed=DEFAULT_INPUT_TOKENS))
    output_tokens: TokenSpec = Field(default_factory=lambda: TokenSpec(fixed=DEFAULT_OUTPUT_TOKENS))
    slo: list[SloTriple] = Field(default_factory=list)
    step_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0)
    workers: int = Field(ge=0)
    table_name: str
    heartbeat_s: int = Field(ge=1)
    out_dir: str
    #: the architecture's ServingConfig as a dict (optional: tasks written before it was recorded have none)
    serving: dict[str, Any] | None = None
    #: tokens every prompt starts with, the same in all requests (the workload's `tokens.shared_prefix`)
    shared_prefix_tokens: int = Field(default=0, ge=0)
    #: the prompts' seed; None: drawn from the run and the candidate (`seed_of`), so no two runs send the same
    #: prompts and a server's prefix cache cannot serve one run's prompts from an earlier one's
    seed: int | None = Field(default=None, ge=0)
    #: after the closed-loop levels, search the arrival rate at the SLO edge from this predicted per-replica
    #: capacity (req/s; `sizing.loadtest.capacity`); None: no search (no SLO targets, or switched off)
    capacity_from: float | None = Field(default=None, gt=0)
    #: longest a capacity-search level near the SLO edge runs (its window, seconds of the endpoint's time)
    capacity_max_level_s: float = Field(default=CAPACITY_MAX_LEVEL_S, gt=0)
    #: the endpoint's clock runs this many times faster than the wall's (a time-scaled local twin): the task's
    #: seconds, rates and results are in its time (`sizing.loadtest.timescale`)
    time_scale: float = Field(default=1.0, ge=1.0)
    #: a recorded trace to replay: the levels are then `rates` (req/s), each the trace time-scaled to it, instead
    #: of closed-loop concurrency, and the capacity search replays it too
    trace: TraceLoad | None = None
    rates: list[float] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rates_with_trace(self) -> LoadTask:
        if self.trace is not None and (not self.rates or any(r <= 0 for r in self.rates)):
            raise ValueError("a task that replays a trace needs its rates (req/s, above 0)")
        return self

    @field_serializer("input_tokens", "output_tokens")
    def _given_only(self, spec: TokenSpec) -> dict[str, Any]:
        return spec.model_dump(mode="json", exclude_none=True)

    def config(
        self, engine_version: str | None = None, replay: ReplaySpec | dict[str, Any] | None = None
    ) -> LoadTestConfig:
        """The task's sweep as the load-test process runs it: closed-loop concurrency at each level (with a trace:
        the trace's window, `replay`, time-scaled to each of `rates`), a warm-up and a measured window per step,
        the SLO targets checked, the serving configuration recorded. InvalidInput names a field that the load
        test refuses (an endpoint that is not a URL, a trace not read, ...)."""
        if self.trace is not None and replay is None:
            raise InvalidInput(
                "the task replays a trace: read its window first (sizing.traces.replay.reread)",
                [Problem("trace", f"{self.trace.path} not read")],
            )
        replayed = self.trace is not None
        try:
            return LoadTestConfig(
                endpoint=self.endpoint,
                model=self.model,
                mode="rate" if replayed else "concurrency",
                levels=[float(x) for x in (self.rates if replayed else self.levels)],
                replay=_replay_spec(replay) if replayed else None,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                duration_s=self.step_s,
                warmup_s=self.warmup_s,
                slo=[SloTarget(metric=m, percentile=p, limit=v) for m, p, v in self.slo],
                workers=self.workers,
                out_dir=self.out_dir,
                serving=self.serving,
                engine_version=engine_version,
                shared_prefix_tokens=self.shared_prefix_tokens,
                seed=self.seed if self.seed is not None else seed_of(self.run_id, self.candidate_id),
                time_scale=self.time_scale,
            )
        except ValidationError as exc:
            raise InvalidInput("the load-test settings are not valid", problems_from_pydantic(exc)) from None

    def capacity_config(
        self, engine_version: str | None = None, replay: ReplaySpec | dict[str, Any] | None = None
    ) -> LoadTestConfig | None:
        """The capacity search that follows the closed-loop levels (None when the task asks for none): Poisson
        levels from `capacity_from` (with a trace: the trace time-scaled to each), windows as the levels' (grown
        while a verdict is unsure), the same prompts' shapes and seed, its own folder."""
        if self.capacity_from is None or not self.slo:
            return None
        base = self.config(engine_version, replay)
        percentiles = [p for _, p, _ in self.slo]
        search = CapacitySearchSpec(
            start=self.capacity_from, max_levels=CAPACITY_LEVELS, level_requests=level_requests(percentiles)
        )
        return base.model_copy(
            update={
                "mode": "rate",
                "levels": [],
                "capacity_search": search,
                "out_dir": f"{self.out_dir}/capacity",
                "workers": 0,
                # a level near the edge runs on until it holds level_requests (within a bound: several candidates)
                "max_window_s": capacity_window_cap(
                    self.step_s, self.capacity_from, percentiles, self.capacity_max_level_s
                ),
                # prompts of their own: the closed-loop levels' would hit the server's prefix cache
                "seed": (base.seed + 1) % 2**31,
            }
        )


def _replay_spec(replay: ReplaySpec | dict[str, Any] | None) -> ReplaySpec | None:
    return ReplaySpec.model_validate(replay) if isinstance(replay, dict) else replay


# --- collect and rank, or fail the run -----------------------------------------------------------------------------
class CandidateOutcome(Open):
    """One item of the Map's result (`$.measured`): the Measured, CandidateFailed or TeardownFailed state's
    output. Keys it does not name are kept for the merge."""

    candidate_id: str | None = None
    status: str | None = None
    measurement: Any = None
    error: Any = None
    applies_to: list[str] = Field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The item as the state machine gave it (no keys added)."""
        return self.model_dump(mode="json", exclude_unset=True)


class CollectInput(StateInput):
    run_id: str = Field(min_length=1)
    measured: list[CandidateOutcome] | None = None


class FailedCandidate(Produced):
    candidate_id: str | None
    status: str | None
    error: str


class Ranking(Produced):
    """What CollectAndRank stores for the run; the state's result (`$.ranking.value`) is it without the
    calibration rows. RankOutcome reads `status`; the completion event carries the rest."""

    status: Literal["SUCCEEDED", "FAILED"]
    workload: dict[str, Any]
    measured: int = Field(ge=0)
    failed: list[FailedCandidate]
    #: the first ranked architectures' rank, id, SLO verdict, cost and predicted and measured figures
    top: list[dict[str, Any]]
    calibration_rows: list[Any]
    learning: dict[str, Any]

    def output(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"calibration_rows"})


class FailRunInput(StateInput):
    run_id: str = Field(min_length=1)
    #: the caught error (`{"Error": ..., "Cause": ...}`) or a text
    error: Any = None


class RunFailure(Produced):
    """The RunFailed state's result (`$.failure.value`)."""

    status: Literal["FAILED"] = "FAILED"
    error: str
    torn_down: list[str] = Field(default_factory=list)
