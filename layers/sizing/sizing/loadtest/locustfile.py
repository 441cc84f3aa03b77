"""The Locust side of the harness: user classes, the rate dispatcher and the sweep's load shape (the shape in
`sizing.loadtest.sweep`, the process's settings and record collector in `sizing.loadtest.collector`).

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

import math
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import gevent
import msgpack
from locust import User, events, task
from locust.env import Environment
from locust.runners import MasterRunner

from sizing.loadtest.collector import COLLECTOR, STATE, Collector, configure, configured
from sizing.loadtest.config import LoadTestConfig
from sizing.workload.parse import token_distribution
from sizing.loadtest.http import Connection
from sizing.loadtest.metrics import RequestRecord
from sizing.loadtest.prompts import PromptItem, PromptSource, ReplayPrompts
from sizing.loadtest.streams import measure_bedrock, measure_openai, measure_sagemaker
from sizing.loadtest.sweep import DRAIN_S, SweepShape

__all__ = ["COLLECTOR", "DRAIN_S", "Collector", "RateUser", "StreamUser", "SweepShape", "configure"]

assert locust  # imported for its side effect

#: Pause of a closed-loop user after a failed request: against a refused or broken endpoint a user with no think
#: time would otherwise retry thousands of times a second (the failures are still counted, by kind).
ERROR_BACKOFF_S = 0.1
#: Bedrock and SageMaker region when the endpoint does not name one.
DEFAULT_REGION = "us-east-1"


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
        think = configured().think_time_s
        wait = self._rng.expovariate(1.0 / think) if think > 0 else 0.0
        return max(wait, ERROR_BACKOFF_S) if self._failed else wait

    def on_start(self) -> None:
        cfg = configured()
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
            COLLECTOR.add(self.environment, rec, configured().api)
        finally:
            COLLECTOR.end(key)
        self._failed = rec.error is not None


class RateUser(User):
    """Open-loop Poisson arrivals at `STATE.rate_per_dispatcher` per second (set by the shape's message)."""

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        cfg = configured()
        self._prompts = _prompts(cfg)
        self._rng = random.Random(int(self._prompts.rng.integers(0, 2**31)))
        self._idle: list[Any] = []
        self._inflight = 0

    def on_stop(self) -> None:
        for s in self._idle:
            s.close()

    def _one(self, item: PromptItem) -> None:
        cfg = configured()
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
        cfg = configured()
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
            self._send(cfg, self._prompts.next())

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
