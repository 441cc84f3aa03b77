"""What one load test does: the validated settings the parent writes and the load-test process reads."""

from __future__ import annotations

import secrets
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sizing.base.strict import Strict
from sizing.workload.spec import TokenSpec

#: Default measured window per step and warm-up before it: 20 s + 5 s, plus a tail while the window's last
#: requests finish (about one answer), so one step takes about 30 s (the issue's target); a warm-up of a few
#: seconds lets a closed loop reach steady state (every user has a request in flight, the batch has filled).
DEFAULT_DURATION_S = 20.0
DEFAULT_WARMUP_S = 5.0
#: Shortest wait, after a step's window, for the answers of requests sent in it (the step's tail); longer when the
#: window is (`LoadTestConfig.tail_cap_s`). 600-token answers at 15 ms a token take 9 s: a tail of one 4 s window
#: lost every one of them ("0 requests"). Past the cap the step ends and those still running count as unfinished.
MIN_TAIL_CAP_S = 60.0
#: Default per-request timeout: the longest SLO anyone sets on e2e is minutes; 10 minutes bounds a stuck stream.
DEFAULT_REQUEST_TIMEOUT_S = 600.0
#: Most requests in flight from one rate dispatcher before new arrivals count as `client_saturated`.
DEFAULT_MAX_INFLIGHT = 4096
#: Prompt and answer lengths when a load test is not told (a short chat turn): assumed, not sourced; a sizing
#: run's workload gives its own (`sizing.orchestrate.contracts.LoadPlan`).
DEFAULT_INPUT_TOKENS = 512
DEFAULT_OUTPUT_TOKENS = 128

Mode = Literal["concurrency", "rate", "users"]
Metric = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_s"]
Pct = Literal["p50", "p90", "p95", "p99"]


class SloTarget(Strict):
    metric: Metric
    percentile: Pct
    limit: float = Field(gt=0)


class SlaSearchSpec(Strict):
    """Find the highest level at which every SLO percentile holds: double from `start` until a level fails,
    then bisect between the last passing and the first failing level."""

    targets: list[SloTarget] = Field(min_length=1)
    start: float = Field(default=1, gt=0)
    max_level: float = Field(default=1024, gt=0)
    #: stop when the bracket is this narrow: 1 for concurrency; for rates a fraction of the upper bound
    resolution: float = Field(default=1, gt=0)
    relative: bool = False
    max_steps: int = Field(default=12, ge=1, le=64)


class CapacitySearchSpec(Strict):
    """Search the arrival rate at the SLO edge (`sizing.loadtest.capacity`): from `start` (the predicted capacity),
    bracketing by 1.5x, then bisecting until the edge is known to +/- `tolerance`. The SLO targets are the
    config's `slo`."""

    start: float = Field(gt=0, description="first rate (req/s): the predicted capacity")
    tolerance: float = Field(default=0.05, gt=0, lt=1)
    max_levels: int = Field(default=10, ge=1, le=64)
    max_rate: float | None = Field(default=None, gt=0)
    level_requests: int | None = Field(
        default=None,
        ge=1,
        description="requests a level whose reading lies near its SLO limit reads before its verdict stands (its"
        " window grows one window at a time, up to the window cap; sizing.loadtest.capacity.needs_more); None:"
        " decide as soon as every target's interval excludes its limit",
    )


class ReplaySpec(Strict):
    """A recorded trace's window to replay (`sizing.traces.replay.TraceReplay`): each request's arrival (s since
    the window's first), prompt and answer tokens, prompt tokens it shares with an earlier request of the same
    prefix key, and that key. At a level of R req/s the arrivals are time-scaled so their mean rate is R; the
    window repeats past its end. Requests of one key start with the same text for as many tokens as they share, so
    a server's prefix cache hits as the trace's did. `digest` identifies the trace (its bytes' SHA-256)."""

    digest: str = Field(min_length=1, description="the trace's digest (sha256:...), recorded with each level")
    t: list[float] = Field(min_length=1)
    input_tokens: list[int] = Field(min_length=1)
    output_tokens: list[int] = Field(min_length=1)
    hit_tokens: list[int] = Field(min_length=1)
    prefix_keys: list[int] = Field(min_length=1)

    @model_validator(mode="after")
    def _aligned(self) -> ReplaySpec:
        n = len(self.t)
        if any(
            len(x) != n for x in (self.input_tokens, self.output_tokens, self.hit_tokens, self.prefix_keys)
        ):
            raise ValueError(
                "t, input_tokens, output_tokens, hit_tokens and prefix_keys need one value per request"
            )
        if any(b < a for a, b in zip(self.t, self.t[1:], strict=False)):
            raise ValueError("t must not decrease")
        return self

    @property
    def mean_rate(self) -> float:
        """The window's own mean rate (requests over its span; as `TraceReplay.mean_rate`)."""
        span = self.t[-1] - self.t[0]
        return (len(self.t) - 1) / span if len(self.t) > 1 and span > 0 else float("inf")


class LoadTestConfig(Strict):
    endpoint: str = Field(
        description="http(s)://host:port (OpenAI API), bedrock://REGION, sagemaker://NAME[?region=R]"
    )
    model: str = Field(
        min_length=1, description="served model name, Bedrock model id, or SageMaker payload model"
    )
    api: Literal["chat", "completions"] = "chat"
    sagemaker_payload: Literal["openai", "tgi"] = "openai"
    mode: Mode = "concurrency"
    levels: list[float] = Field(default_factory=list)
    think_time_s: float = Field(default=0.0, ge=0)
    input_tokens: TokenSpec = Field(default_factory=lambda: TokenSpec(fixed=DEFAULT_INPUT_TOKENS))
    output_tokens: TokenSpec = Field(default_factory=lambda: TokenSpec(fixed=DEFAULT_OUTPUT_TOKENS))
    dataset: str | None = None
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        description="tokens at the start of every synthesized prompt that all requests share (a system prompt:"
        " the workload's tokens.shared_prefix), so a server's prefix cache serves them; the rest of each prompt"
        " is its own",
    )
    ignore_eos: bool = True
    duration_s: float = Field(default=DEFAULT_DURATION_S, gt=0)
    warmup_s: float = Field(default=DEFAULT_WARMUP_S, ge=0)
    max_tail_s: float | None = Field(
        default=None,
        gt=0,
        description="longest wait after a step's window for the answers of requests sent in it; those still"
        " running then count as unfinished (default: the window, at least 60 s, at most the request timeout)",
    )
    sla_search: SlaSearchSpec | None = None
    capacity_search: CapacitySearchSpec | None = None
    max_window_s: float | None = Field(
        default=None,
        gt=0,
        description="longest a level's window may grow while an SLO target's verdict is unsure (its interval"
        " straddles the limit), one window at a time; default: 4 windows in a capacity search, else no growth",
    )
    slo: list[SloTarget] = Field(default_factory=list)
    workers: int = Field(default=0, ge=0, le=64, description="0: one process; N: Locust master + N workers")
    master_port: int = Field(default=0, ge=0, le=65535)
    out_dir: str
    seed: int = Field(
        default=0,
        ge=0,
        description="seed of the synthesized prompts (callers give a fresh one per run: `fresh_seed`)",
    )
    request_timeout_s: float = Field(default=DEFAULT_REQUEST_TIMEOUT_S, gt=0)
    max_requests: int | None = Field(default=None, gt=0, description="stop after this many requests in all")
    max_total_s: float | None = Field(default=None, gt=0, description="stop after this long in all")
    max_inflight: int = Field(default=DEFAULT_MAX_INFLIGHT, gt=0)
    save_requests: bool = Field(
        default=False,
        description="also write every request of each level to requests.jsonl (those sent in its warm-up marked"
        " `warmup`)",
    )
    serving: dict[str, Any] | None = Field(
        default=None,
        description="the serving configuration measured (a sizing.base.serving_config.ServingConfig as a dict), recorded so"
        " each figure belongs to a configuration",
    )
    server_metrics: bool = Field(
        default=True,
        description="scrape an http(s) server's /metrics at each level's window start and end, and record the"
        " server's own figures over it (sizing.loadtest.server.ServerWindow)",
    )
    replay: ReplaySpec | None = Field(
        default=None,
        description="a recorded trace to replay in rate mode instead of Poisson arrivals and drawn lengths",
    )
    engine_version: str | None = Field(
        default=None,
        description="the version the server reported (vLLM: GET /version; a local twin: twin-<sizing version>)",
    )
    time_scale: float = Field(
        default=1.0,
        ge=1.0,
        description="the server's clock runs this many times faster than the wall's (a time-scaled twin: sizing"
        " twin --time-scale); rates, seconds and SLO limits here and in the results are in the server's time"
        " (sizing.loadtest.timescale)",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        u = urlsplit(v)
        if u.scheme in ("http", "https") and u.hostname:
            return v.rstrip("/")
        if u.scheme in ("bedrock", "sagemaker") and u.netloc:
            return v
        raise ValueError(
            "give http(s)://host[:port][/prefix], bedrock://REGION or sagemaker://ENDPOINT[?region=R]"
        )

    @model_validator(mode="after")
    def _levels(self) -> LoadTestConfig:
        if not self.levels and self.sla_search is None and self.capacity_search is None:
            raise ValueError("give levels (concurrency, rates or users), an SLA search or a capacity search")
        if self.capacity_search is not None and (self.mode != "rate" or not self.slo):
            raise ValueError("a capacity search runs in arrival rate (mode rate) against SLO targets (slo)")
        if any(x <= 0 for x in self.levels):
            raise ValueError("levels must be above 0")
        if self.mode != "rate" and any(x != int(x) for x in self.levels):
            raise ValueError(f"{self.mode} levels must be whole numbers")
        if self.replay is not None and self.mode != "rate":
            raise ValueError("a trace is replayed in arrival rate (mode rate)")
        return self

    @property
    def window_cap_s(self) -> float:
        """How long a level's window may grow while its verdict is unsure."""
        if self.max_window_s is not None:
            return max(self.max_window_s, self.duration_s)
        return self.duration_s * (4 if self.capacity_search is not None else 1)

    @property
    def tail_cap_s(self) -> float:
        """How long a step's tail may wait for the window's answers."""
        if self.max_tail_s is not None:
            return self.max_tail_s
        return min(max(self.duration_s, MIN_TAIL_CAP_S), self.request_timeout_s)

    @property
    def target(self) -> Literal["openai", "bedrock", "sagemaker"]:
        scheme = urlsplit(self.endpoint).scheme
        return "bedrock" if scheme == "bedrock" else "sagemaker" if scheme == "sagemaker" else "openai"

    def target_of(self, level: float) -> dict[str, float]:
        if self.mode == "rate":
            return {"rate_rps": level}
        if self.mode == "users":
            return {"users": level, "think_time_s": self.think_time_s}
        return {"concurrency": level}


def fresh_seed() -> int:
    """A prompt seed of its own for a load test that was given none: two runs never send the same prompts, so a
    server's prefix cache cannot serve one run's prompts from another's (a rerun with vLLM's prefix caching on
    got 84-96% of its prompt tokens from the cache, and half the TTFT, when every run used seed 0)."""
    return secrets.randbelow(2**31)
