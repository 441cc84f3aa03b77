"""The Locust side of the harness: user classes, the rate dispatcher and the sweep's load shape.

Only ever imported inside the load-test process (`python -m sizing.loadtest.process`; or, for Locust's own UI,
`locust -f sizing/loadtest/locustfile.py StreamUser --sizing-config CONFIG.json`, which steps through the levels
but leaves the step records to process.py), and `locust` first: its gevent monkey-patching must precede anything
that imports ssl/boto3.

- `StreamUser`: a closed-loop user (concurrency steps: no think time; the workload's user model: exponential
  think time between requests). One connection per user, reused (keep-alive).
- `RateUser`: a dispatcher of Poisson arrivals: each arrival runs in its own greenlet, however many are in flight
  (open loop), up to `max_inflight` after which arrivals are counted as `client_saturated` errors.
- `SweepShape`: steps through the plan's levels (fixed list or SLA search). A step is a warm-up, a measured
  window, then a tail at the same load until every request sent in the window has finished and been counted (at
  most one window, plus a worker report interval in distributed mode); it then summarizes the requests sent in
  the window -- long ones included, none sent at another level or before steady state -- and asks the plan for
  the next level. Every process knows the requests it has in flight; a worker's report carries, with its
  records, when it was made and the oldest request still in flight then, so the master ends a step exactly when
  every worker has reported after the window and none still has a request sent in it.
Each request is measured by `sizing.loadtest.streams` and reported both to Locust's own statistics (its UI and
CSV keep working) and, as a raw record, to the collector that computes exact percentiles. Workers ship their raw
records to the master with every report, each record once (a report drains what the worker holds); with
`save_requests` each worker also appends what it ships to `requests.worker-<index>.msgpack` (read it with
`sizing.loadtest.metrics.read_worker_log`), so the master's figures can be checked against the union of every
worker's records (tests/integration/test_loadtest_distributed.py).
"""

import locust  # noqa: I001  (first: gevent monkey-patching before ssl/boto3)

import dataclasses
import gc
import itertools
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import gevent
import msgpack
from locust import LoadTestShape, User, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WORKER_REPORT_INTERVAL

from sizing.loadtest.config import LoadTestConfig, token_distribution
from sizing.loadtest.http import Connection
from sizing.loadtest.confidence import level_verdict
from sizing.loadtest.metrics import (
    RequestRecord,
    StepResult,
    check_slo,
    confident_checks,
    summarize,
    with_checks,
)
from sizing.loadtest.plan import LevelPlan, plan_for, pointless_after
from sizing.loadtest.prompts import PromptItem, PromptSource, ReplayPrompts, load_dataset
from sizing.loadtest.server import TWIN_LAG_SHARE, UNEXPECTED_HIT_SHARE, MetricsSnapshot, scrape, window
from sizing.loadtest.streams import measure_bedrock, measure_openai, measure_sagemaker

assert locust  # imported for its side effect

#: Seconds the master waits after a step before summarizing it, so every worker's last report has arrived.
DRAIN_S = WORKER_REPORT_INTERVAL + 1.0
#: Users start spread over this share of the warm-up. Users that all start at once and ask for the same lengths
#: stay in lock-step (waves of simultaneous arrivals no real population makes, and the estimator does not
#: assume); the rest of the warm-up lets the spread population reach steady state.
RAMP_SHARE_OF_WARMUP = 0.5
#: Seconds between progress lines within a step.
PROGRESS_EVERY_S = 10.0
#: Spawn rate per user when there is no warm-up to spread over (everyone within ~0.1 s).
FAST_SPAWN_PER_USER = 10
#: Pause of a closed-loop user after a failed request: against a refused or broken endpoint a user with no think
#: time would otherwise retry thousands of times a second (the failures are still counted, by kind).
ERROR_BACKOFF_S = 0.1
#: Seconds between two calls of a shape's `tick()`: Locust's shape worker sleeps one second less the tick's own
#: time (locust/runners.py, `Runner.shape_worker`). A window that ends between two ticks is waited for inside the
#: tick, so a step lasts what its plan says instead of being rounded up to the next whole second.
SHAPE_TICK_S = 1.0
#: Seconds between checks, inside a tick, for the window's last answers (the step's tail).
TAIL_POLL_S = 0.05
#: Bedrock and SageMaker region when the endpoint does not name one.
DEFAULT_REGION = "us-east-1"


@dataclass
class _State:
    """Per-process settings, set once by `configure` before users start."""

    cfg: LoadTestConfig | None = None
    dataset: list[dict[str, Any]] | None = None
    rate_per_dispatcher: float = 0.0
    seeds: Any = field(default_factory=lambda: itertools.count(1))
    aws_client: Any = None
    process_index: int = 0
    shipped_log: Path | None = None


STATE = _State()


class Collector:
    """Raw records of this process (and, on the master, those the workers sent), the requests this process has in
    flight, and (on the master) what each worker's last report said about its own."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.total = 0
        self._inflight: dict[int, float] = {}
        self._keys = itertools.count()
        #: worker id -> (epoch seconds its last report was made, oldest start it still had in flight or None, the
        #: starts of every request it had in flight)
        self.reported: dict[str, tuple[float, float | None, list[float]]] = {}

    def begin(self) -> int:
        """A request is about to be sent: remember when (epoch seconds, no later than its record's start)."""
        key = next(self._keys)
        self._inflight[key] = time.time()
        return key

    def end(self, key: int) -> None:
        """The request has ended: recorded (after `add`), or its user was stopped."""
        self._inflight.pop(key, None)

    def oldest_inflight(self) -> float | None:
        return min(self._inflight.values(), default=None)

    def inflight_starts(self) -> list[float]:
        """When each request this process has in flight was sent (epoch seconds)."""
        return list(self._inflight.values())

    def unfinished(self, lo: float, hi: float) -> int:
        """Requests sent in [lo, hi) still running: this process's own, and those the workers' last reports
        listed (a master runs no users)."""
        mine = sum(1 for t in self._inflight.values() if lo <= t < hi)
        theirs = sum(1 for _, _, starts in self.reported.values() for t in starts if lo <= t < hi)
        return mine + theirs

    def add(self, env: Environment, rec: RequestRecord, name: str) -> None:
        self.records.append(rec)
        self.total += 1
        env.events.request.fire(
            request_type="STREAM",
            name=name,
            response_time=rec.e2e_s * 1000,
            response_length=rec.output_tokens or 0,
            exception=None if rec.error is None else RuntimeError(rec.error),
            context={},
        )

    def drain(self) -> list[RequestRecord]:
        out, self.records = self.records, []
        return out


COLLECTOR = Collector()


def configure(cfg: LoadTestConfig, process_index: int = 0) -> None:
    """Set this process's settings; `process_index` (0 master/local, 1.. workers) keeps seeds distinct."""
    STATE.cfg = cfg
    STATE.process_index = process_index
    STATE.dataset = load_dataset(cfg.dataset) if cfg.dataset else None
    STATE.shipped_log = None
    if cfg.save_requests and process_index > 0:  # a worker: its own log of every record it ships
        STATE.shipped_log = Path(cfg.out_dir) / f"requests.worker-{process_index}.msgpack"
        STATE.shipped_log.parent.mkdir(parents=True, exist_ok=True)
        STATE.shipped_log.write_bytes(b"")


def _cfg() -> LoadTestConfig:
    if STATE.cfg is None:
        raise RuntimeError("sizing load test not configured (give --sizing-config)")
    return STATE.cfg


def _aws_client(service: str, region: str) -> Any:
    if STATE.aws_client is None:  # one client per process, created on first use (never at import)
        import boto3

        STATE.aws_client = boto3.client(service, region_name=region)  # type: ignore[call-overload]
    return STATE.aws_client


Sender = Callable[[PromptItem], RequestRecord]


class _OpenAISender:
    def __init__(self, cfg: LoadTestConfig) -> None:
        self.cfg = cfg
        # no timer per read (gevent would arm one for every recv); the whole request is bounded instead
        self.conn = Connection(cfg.endpoint, cfg.request_timeout_s, read_timeouts=False)
        self.path = "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"

    def __call__(self, item: PromptItem) -> RequestRecord:
        payload: dict[str, Any] = {
            "model": self.cfg.model,
            "max_tokens": item.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.cfg.ignore_eos:
            payload["ignore_eos"] = True
        if self.cfg.api == "chat":
            payload["messages"] = [{"role": "user", "content": item.text}]
        else:
            payload["prompt"] = item.text
        start = time.time()
        try:
            with gevent.Timeout(self.cfg.request_timeout_s):
                return measure_openai(self.conn, self.path, payload, expected_input=item.input_tokens)
        except gevent.Timeout:  # the connection was closed on the way out; the next request opens a new one
            return RequestRecord(start, time.time(), error="timeout")

    def close(self) -> None:
        self.conn.close()


class _BedrockSender:
    def __init__(self, cfg: LoadTestConfig) -> None:
        self.cfg = cfg
        self.client = _aws_client("bedrock-runtime", urlsplit(cfg.endpoint).netloc or DEFAULT_REGION)

    def __call__(self, item: PromptItem) -> RequestRecord:
        return measure_bedrock(
            self.client, self.cfg.model, item.text, item.max_tokens, expected_input=item.input_tokens
        )

    def close(self) -> None:
        return None


class _SageMakerSender:
    def __init__(self, cfg: LoadTestConfig) -> None:
        self.cfg = cfg
        u = urlsplit(cfg.endpoint)
        region = parse_qs(u.query).get("region", [DEFAULT_REGION])[0]
        self.endpoint_name = u.netloc
        self.component = parse_qs(u.query).get("component", [None])[0]
        self.client = _aws_client("sagemaker-runtime", region)

    def __call__(self, item: PromptItem) -> RequestRecord:
        body: dict[str, Any]
        if self.cfg.sagemaker_payload == "tgi":
            params: dict[str, Any] = {"max_new_tokens": item.max_tokens}
            if self.cfg.ignore_eos:
                params["ignore_eos_token"] = True
            body = {"inputs": item.text, "parameters": params, "stream": True}
        else:
            body = {
                "model": self.cfg.model,
                "messages": [{"role": "user", "content": item.text}],
                "max_tokens": item.max_tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            if self.cfg.ignore_eos:
                body["ignore_eos"] = True
        return measure_sagemaker(
            self.client, self.endpoint_name, body, expected_input=item.input_tokens,
            inference_component=self.component,
        )  # fmt: skip

    def close(self) -> None:
        return None


def make_sender(cfg: LoadTestConfig) -> Any:
    return {"openai": _OpenAISender, "bedrock": _BedrockSender, "sagemaker": _SageMakerSender}[cfg.target](
        cfg
    )


#: Seeds of users in different processes never collide below this many users per process.
SEED_STRIDE = 1_000_003


def _prompts(cfg: LoadTestConfig) -> PromptSource:
    if cfg.target == "openai":
        chat = cfg.api == "chat"
    else:  # Converse is a chat API; SageMaker is chat when it is sent the OpenAI payload
        chat = cfg.target == "bedrock" or cfg.sagemaker_payload == "openai"
    return PromptSource(
        token_distribution(cfg.input_tokens),
        token_distribution(cfg.output_tokens),
        chat=chat,
        seed=cfg.seed * 7919 + STATE.process_index * SEED_STRIDE + next(STATE.seeds),
        dataset=STATE.dataset,
        shared_prefix=cfg.shared_prefix_tokens,
    )


class StreamUser(User):
    """A closed-loop user: send, read the whole stream, think (exponential, mean `think_time_s`), repeat."""

    def wait_time(self) -> float:
        think = _cfg().think_time_s
        wait = self._rng.expovariate(1.0 / think) if think > 0 else 0.0
        return max(wait, ERROR_BACKOFF_S) if self._failed else wait

    def on_start(self) -> None:
        cfg = _cfg()
        self._prompts = _prompts(cfg)
        self._rng = random.Random(int(self._prompts.rng.integers(0, 2**31)))
        self._sender = make_sender(cfg)
        self._failed = False
        if cfg.think_time_s > 0:
            # a user with think time starts somewhere in its cycle, as a population in steady state does: its
            # first request after an exponential wait (memoryless, so the arrivals are stationary from the start),
            # not all users' first requests in the same second of the warm-up and none in the window
            gevent.sleep(self._rng.expovariate(1.0 / cfg.think_time_s))

    def on_stop(self) -> None:
        self._sender.close()

    @task
    def ask(self) -> None:
        item = self._prompts.next()
        key = COLLECTOR.begin()
        try:
            rec = self._sender(item)
            COLLECTOR.add(self.environment, rec, _cfg().api)
        finally:
            COLLECTOR.end(key)
        self._failed = rec.error is not None


class RateUser(User):
    """Open-loop Poisson arrivals at `STATE.rate_per_dispatcher` per second (set by the shape's message)."""

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        cfg = _cfg()
        self._prompts = _prompts(cfg)
        self._rng = random.Random(int(self._prompts.rng.integers(0, 2**31)))
        self._idle: list[Any] = []
        self._inflight = 0

    def on_stop(self) -> None:
        for s in self._idle:
            s.close()

    def _one(self, item: PromptItem) -> None:
        cfg = _cfg()
        sender = self._idle.pop() if self._idle else make_sender(cfg)
        key = COLLECTOR.begin()
        try:
            rec = sender(item)
            COLLECTOR.add(self.environment, rec, cfg.api)
        finally:
            self._inflight -= 1
            COLLECTOR.end(key)
        self._idle.append(sender)

    @task
    def dispatch(self) -> None:
        cfg = _cfg()
        if cfg.replay is not None:
            self._replay(cfg)
            return
        next_at = time.monotonic()
        while True:
            rate = STATE.rate_per_dispatcher
            if rate <= 0:
                gevent.sleep(0.05)
                next_at = time.monotonic()
                continue
            next_at += self._rng.expovariate(rate)
            delay = next_at - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            item = self._prompts.next()
            if self._inflight >= cfg.max_inflight:
                now = time.time()
                COLLECTOR.add(self.environment, RequestRecord(now, now, error="client_saturated"), cfg.api)
                continue
            self._inflight += 1
            gevent.spawn(self._one, item)

    def _send(self, cfg: LoadTestConfig, item: PromptItem) -> None:
        if self._inflight >= cfg.max_inflight:
            now = time.time()
            COLLECTOR.add(self.environment, RequestRecord(now, now, error="client_saturated"), cfg.api)
            return
        self._inflight += 1
        gevent.spawn(self._one, item)

    def _replay(self, cfg: LoadTestConfig) -> None:
        """Send the trace's requests at its recorded gaps, time-scaled so their mean rate is the level (the window
        repeated past its end). With D worker processes, worker p sends requests p, p + D, ... at the times the
        whole trace gives them, so together they send the trace as recorded."""
        rep = cfg.replay
        assert rep is not None
        n = len(rep.t)
        own = rep.mean_rate if math.isfinite(rep.mean_rate) else float(n)
        period = rep.t[-1] - rep.t[0] + 1.0 / own  # trace seconds from one pass's first request to the next's
        dispatchers = max(1, cfg.workers)
        i = max(0, STATE.process_index - 1) % dispatchers if cfg.workers else 0
        prompts = ReplayPrompts(
            rep.input_tokens, rep.output_tokens, rep.hit_tokens, rep.prefix_keys, chat=self._prompts.chat,
            run_seed=cfg.seed, seed=int(self._prompts.rng.integers(0, 2**31)),
        )  # fmt: skip
        pos = 0.0  # trace time of the last request sent
        passes = 0
        next_at = time.monotonic()
        while True:
            rate = STATE.rate_per_dispatcher
            if rate <= 0:
                gevent.sleep(0.05)
                next_at = time.monotonic()
                continue
            speed = rate * dispatchers / own  # trace seconds per wall second at this level
            at = rep.t[i] - rep.t[0] + passes * period
            next_at += max(0.0, at - pos) / speed
            pos = at
            delay = next_at - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            self._send(cfg, prompts.item(i))
            i += dispatchers
            if i >= n:
                i -= n
                passes += 1


# Locust calls message handlers with (environment, msg) by keyword
def _on_rate(environment: Environment, msg: Any, **_: Any) -> None:  # noqa: ARG001
    STATE.rate_per_dispatcher = float(msg.data)


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if runner is not None and not isinstance(runner, MasterRunner):
        runner.register_message("sizing_rate", _on_rate)
    opts = environment.parsed_options
    path = getattr(opts, "sizing_config", None) if opts is not None else None
    if path and STATE.cfg is None:
        with open(path) as f:
            configure(LoadTestConfig.model_validate_json(f.read()))


@events.init_command_line_parser.add_listener
def _on_parser(parser: Any) -> None:
    parser.add_argument(
        "--sizing-config", default="", help="LoadTestConfig JSON written by `sizing loadtest`"
    )


@events.report_to_master.add_listener
# Locust fires report_to_master with (client_id, data) by keyword
def _on_report(client_id: str, data: dict[str, Any]) -> None:  # noqa: ARG001
    records = COLLECTOR.drain()
    wire = [r.to_wire() for r in records]
    data["sizing_records"] = wire
    # made at the same instant as the drain (no yield between): every request that began before the oldest
    # one still in flight, and ended before now, is in this report or an earlier one
    data["sizing_inflight"] = [time.time(), COLLECTOR.oldest_inflight(), COLLECTOR.inflight_starts()]
    if STATE.shipped_log is not None and wire:
        # msgpack, as Locust ships it: a few ms per report where JSON lines took tens (the streams wait meanwhile)
        with STATE.shipped_log.open("ab") as f:
            f.write(msgpack.packb(wire))


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any]) -> None:
    wire = data.get("sizing_records", ())
    COLLECTOR.records.extend(RequestRecord.from_wire(w) for w in wire)
    COLLECTOR.total += len(wire)
    if (state := data.get("sizing_inflight")) is not None:
        starts = [float(t) for t in state[2]] if len(state) > 2 else []
        COLLECTOR.reported[client_id] = (
            float(state[0]),
            None if state[1] is None else float(state[1]),
            starts,
        )


class SweepShape(LoadTestShape):
    """Runs the plan's levels one step at a time (see the module docstring)."""

    def __init__(
        self, cfg: LoadTestConfig | None = None, plan: LevelPlan | None = None,
        on_step: Callable[[StepResult], None] | None = None, dispatchers: int = 1, drain_s: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()  # type: ignore[no-untyped-call]  # Locust's LoadTestShape is untyped
        self._cfg = cfg
        self._plan = plan
        self.on_step = on_step
        self.dispatchers = dispatchers
        self.drain_s = drain_s
        self.history: list[StepResult] = []
        self.level: float | None = None
        self.step_start = 0.0
        self.began = time.time()
        self.stopped_by = "plan"
        self._started = False
        self._last_progress = time.time()
        #: the server's /metrics at the current step's window start (None: not scraped, or none to scrape)
        self._server_before: MetricsSnapshot | None = None
        self._scrape_at: Any = None
        #: when arrivals were paused between two open-loop levels (None: not draining)
        self._draining_since: float | None = None
        #: the current step's window: the config's, grown one window at a time while its verdict is unsure
        self.window_s = 0.0

    @property
    def cfg(self) -> LoadTestConfig:
        """The settings (given, or -- under `locust -f ... --sizing-config` -- read at init, after this class
        was instantiated)."""
        if self._cfg is None:
            self._cfg = _cfg()
        return self._cfg

    @property
    def plan(self) -> LevelPlan:
        if self._plan is None:
            self._plan = plan_for(self.cfg)
        return self._plan

    def _begin(self, now: float) -> bool:
        self.level = self.plan.next_level(self.history)
        self.step_start = now
        self.window_s = self.cfg.duration_s
        self._last_progress = now
        if self.level is None:
            return False
        if pointless_after(self.history, self.level):  # the sweep ends instead of spending its time
            self.stopped_by = "no_answer"
            self.level = None
            return False
        if self.cfg.mode == "rate":
            assert self.runner is not None
            self.runner.send_message("sizing_rate", self.level / self.dispatchers)
        self._server_before = None
        if self.cfg.server_metrics and self.cfg.target == "openai":
            self._scrape_at = gevent.spawn_later(self.cfg.warmup_s, self._scrape_window_start)
        print(f"step {len(self.history)}: {self._describe(self.level)} ...", file=sys.stderr, flush=True)
        return True

    def _scrape_window_start(self) -> None:
        self._server_before = scrape(self.cfg.endpoint)

    def _server_figures(self, result: StepResult) -> StepResult:
        """The server's own view of the step (its /metrics from the window's start to now, when the window's
        last answers are in), and a flag when its prefix cache served prompts that share no prefix."""
        before, self._server_before = self._server_before, None
        if before is None:
            return result
        after = scrape(self.cfg.endpoint)
        if after is None:
            return result
        server = window(before, after)
        flags = list(result.flags)
        share = server.prefix_cache_hit_share
        if share is not None and self.cfg.shared_prefix_tokens == 0 and share > UNEXPECTED_HIT_SHARE:
            flags.append(
                f"unexpected prefix-cache hits: the server served {share:.0%} of the prompt tokens from its"
                " cache though the prompts share no prefix (prompts repeated from an earlier run with the same"
                " seed, or another client on the server): TTFT is flattered"
            )
        lag = server.twin_lag_share
        if lag is not None and lag > TWIN_LAG_SHARE:
            flags.append(
                f"the twin ran behind its model by {lag:.0%} of the window (the machine is busy): its figures are"
                " slower than the model's, so they say how busy the machine was, not what the model predicts"
            )
        return result.model_copy(update={"server": server, "flags": flags})

    def _describe(self, level: float) -> str:
        return " ".join(f"{k}={v:g}" for k, v in self.cfg.target_of(level).items())

    def _targets(self) -> list[tuple[str, str, float]]:
        chosen = self.cfg.sla_search.targets if self.cfg.sla_search else self.cfg.slo
        return [(t.metric, t.percentile, t.limit) for t in chosen]

    def _grow_window(self, window_end: float) -> bool:
        """When the window's answers are in (its tail done; the load went on meanwhile): grow it by one window when
        an SLO target's verdict is still unsure and the window may grow (`window_cap_s`). The requests sent since
        the window's end fall in the grown window. A request still running at the tail's cap counts as it will:
        an e2e longer than any measured."""
        cfg = self.cfg
        targets = self._targets()
        if not targets or self.window_s + cfg.duration_s > cfg.window_cap_s + 1e-9:
            return False
        lo = self.step_start + cfg.warmup_s
        checks = confident_checks(
            COLLECTOR.records, (lo, window_end), targets, COLLECTOR.unfinished(lo, window_end)
        )
        if level_verdict(checks) != "unsure":
            return False
        self.window_s += cfg.duration_s
        unsure = ", ".join(f"{c.target} {c.note or 'interval straddles ' + format(c.limit, 'g')}"
                           for c in checks if c.verdict == "unsure")  # fmt: skip
        print(f"step {len(self.history)}: unsure ({unsure}): window grows to {self.window_s:g} s",
              file=sys.stderr, flush=True)  # fmt: skip
        return True

    def _finish(self, end: float | None = None) -> None:
        assert self.level is not None
        lo = self.step_start + self.cfg.warmup_s
        hi = end if end is not None else lo + self.window_s
        unfinished = COLLECTOR.unfinished(lo, hi)
        result = summarize(
            COLLECTOR.records, step=len(self.history), target=self.cfg.target_of(self.level), window=(lo, hi),
            warmup_s=self.cfg.warmup_s, unfinished=unfinished,
        )  # fmt: skip
        targets = self._targets()
        if targets:
            result = check_slo(result, targets)
            result = with_checks(result, confident_checks(COLLECTOR.records, (lo, hi), targets, unfinished))
        if self._scrape_at is not None:
            self._scrape_at.kill(block=False)  # a step cut short before its window: no start scrape
            self._scrape_at = None
        result = self._server_figures(result)
        self.history.append(result)
        if self.cfg.save_requests:
            with open(f"{self.cfg.out_dir}/requests.jsonl", "a") as f:
                for r in COLLECTOR.records:
                    if lo <= r.start < hi:
                        f.write(json.dumps({"step": result.step, **dataclasses.asdict(r)}) + "\n")
        COLLECTOR.records.clear()  # whatever finished so far belongs to this step or to none
        gc.collect()  # between steps, where a pause measures nothing (process.py turns automatic GC off)
        if self.on_step is not None:
            self.on_step(result)

    def _window_counted(self, window_end: float, now: float) -> bool:
        """Whether every request sent in the window has finished and its record is here: in this process, none
        sent before the window's end is still in flight; on a master, every connected worker has reported since
        the window ended and had none in flight then. A request still streaming `tail_cap_s` after the window
        (plus a worker report interval) ends the wait, so a stuck stream cannot hold the sweep; it is counted as
        unfinished, not dropped."""
        if now >= window_end + self.cfg.tail_cap_s + self.drain_s:
            return True
        runner = self.runner
        if isinstance(runner, MasterRunner):
            fresh = [oldest for made, oldest, _ in COLLECTOR.reported.values() if made >= window_end]
            return len(fresh) >= runner.worker_count and all(o is None or o >= window_end for o in fresh)
        oldest = COLLECTOR.oldest_inflight()
        return oldest is None or oldest >= window_end

    def _await_window(self, window_end: float, now: float) -> float:
        """When the window ends before the next tick, wait for its end and then (within this tick) for its last
        answers, instead of leaving both to the next tick. Returns the time the step stands at. The wait is a
        gevent sleep: the users keep sending and answering meanwhile."""
        if now < window_end <= now + SHAPE_TICK_S:
            gevent.sleep(window_end - now)
            now = time.time()
        if now >= window_end:
            give_up = now + SHAPE_TICK_S - 2 * TAIL_POLL_S  # past it, the next tick looks again
            while not self._window_counted(window_end, now) and now < give_up:
                gevent.sleep(TAIL_POLL_S)
                now = time.time()
        return now

    def _start_draining(self, now: float) -> bool:
        """Between two open-loop levels: stop arrivals until what the last one left in flight has ended, so the
        next level does not inherit its queue (an overloaded level left a backlog that read as TTFT p95 27-45 s
        at the lower rates searched after it). True when there is something to wait for."""
        if self.cfg.mode != "rate" or not self._in_flight():
            return False
        self._draining_since = now
        assert self.runner is not None
        self.runner.send_message("sizing_rate", 0.0)
        print(f"step {len(self.history)}: arrivals paused until the last level's requests end", file=sys.stderr,
              flush=True)  # fmt: skip
        return True

    def _in_flight(self) -> bool:
        if COLLECTOR.oldest_inflight() is not None:
            return True
        return any(starts for _, _, starts in COLLECTOR.reported.values())

    def _drained(self, now: float) -> bool:
        """Nothing in flight any more (workers: each has reported since with none), or the tail's cap reached."""
        since = self._draining_since
        assert since is not None
        if now - since >= self.cfg.tail_cap_s:
            return True
        if COLLECTOR.oldest_inflight() is not None:
            return False
        return all(made >= since and not starts for made, _, starts in COLLECTOR.reported.values())

    def _users(self) -> tuple[int, float]:
        assert self.level is not None
        if self.cfg.mode == "rate":  # the dispatchers, at once: the arrivals are what the rate shapes
            return self.dispatchers, float(self.dispatchers * FAST_SPAWN_PER_USER)
        users = int(self.level)
        ramp_s = self.cfg.warmup_s * RAMP_SHARE_OF_WARMUP
        return users, float(max(users / ramp_s, 1.0)) if ramp_s > 0 else float(users * FAST_SPAWN_PER_USER)

    def tick(self) -> tuple[int, float] | None:
        now = time.time()
        if not self._started:
            self._started = True
            if not self._begin(now):
                return None
            return self._users()
        if self.level is None:
            return None
        if self._draining_since is not None:
            if self._drained(now):
                self._draining_since = None
                if not self._begin(now):
                    return None
            return self._users()
        cfg = self.cfg
        elapsed = now - self.step_start
        over_total = cfg.max_total_s is not None and now - self.began >= cfg.max_total_s
        over_requests = cfg.max_requests is not None and COLLECTOR.total >= cfg.max_requests
        if over_total or over_requests:
            self.stopped_by = "max_total_s" if over_total else "max_requests"
            if elapsed > cfg.warmup_s:
                self._finish(end=min(now, self.step_start + cfg.warmup_s + self.window_s))
            self.level = None
            return None
        window_end = self.step_start + cfg.warmup_s + self.window_s
        now = self._await_window(window_end, now)
        if now >= window_end and self._window_counted(window_end, now):
            # unsure: the level runs on, its window grown (the load never paused)
            if self._grow_window(window_end):
                return self._users()
            self._finish()
            if self._start_draining(now):
                return self._users()
            if not self._begin(now):
                return None
        elif now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            phase = "warm-up" if elapsed < cfg.warmup_s else "measuring" if now < window_end else "tail"
            running = (
                COLLECTOR.unfinished(self.step_start + cfg.warmup_s, window_end) if phase == "tail" else None
            )
            still = "" if running is None else f", {running} of the window's still running"
            print(
                f"step {len(self.history)}: {phase}, {elapsed:.0f} s in, {len(COLLECTOR.records)} answers so far"
                + still,
                file=sys.stderr,
                flush=True,
            )
        return self._users()
