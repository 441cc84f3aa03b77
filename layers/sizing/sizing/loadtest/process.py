"""The load-test process: `python -m sizing.loadtest.process run CONFIG` (local: one process, or a master
plus N worker processes), `master CONFIG --expect-workers N --bind HOST --port P [--upload s3://...]
[--task-token T]` and `worker CONFIG --master HOST --port P --index I` (Fargate tasks). CONFIG is a
LoadTestConfig as a JSON file path or inline JSON. It imports Locust first, runs the sweep,
writes `steps.jsonl` (one line per step, as it ends), `steps.csv` and `summary.json` into the config's out_dir.
"""

import locust  # noqa: I001  (first: gevent monkey-patching before ssl/boto3)

import argparse
import csv
import gc
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment
from pydantic import ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.loadtest import locustfile as lf
from sizing.loadtest.aws import report_to_aws  # it imports boto3 only when it reports, well after Locust
from sizing.loadtest.config import LoadTestConfig
from sizing.loadtest.metrics import CSV_COLUMNS, StepResult, csv_row
from sizing.loadtest.capacity import CapacitySearch
from sizing.loadtest.plan import SlaSearch, plan_for
from sizing.base.serving_config import ServerFacts
from sizing.loadtest.server import EndpointUnreachable, probe
from sizing.loadtest.timescale import in_model_time, on_wall_clock

assert locust
#: How long the master waits for its workers to connect (process start + imports take a few seconds).
WORKER_CONNECT_TIMEOUT_S = 60.0


class Output:
    """Writes each step as it ends, then the CSV and the summary."""

    def __init__(self, cfg: LoadTestConfig) -> None:
        self.cfg = cfg
        self.dir = Path(cfg.out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.steps_path = self.dir / "steps.jsonl"
        self.steps_path.write_text("")
        self.steps: list[StepResult] = []
        #: what the server said it runs, read before the first step (None: it does not say, or not http)
        self.server: ServerFacts | None = None

    def step(self, measured: StepResult) -> None:
        r = in_model_time(measured, self.cfg)  # itself, unless the server's clock is scaled
        if self.cfg.replay is not None:
            r.trace_digest = self.cfg.replay.digest  # the level measured the trace as recorded, time-scaled
        self.steps.append(r)
        with self.steps_path.open("a") as f:
            f.write(r.model_dump_json() + "\n")
        errs = r.failed
        slo = (
            ""
            if r.meets_slo is None
            else ("  meets SLO" if r.meets_slo else f"  FAILS {'; '.join(r.slo_failures)}")
        )
        print(
            f"step {r.step}: {' '.join(f'{k}={v:g}' for k, v in r.target.items())}: {r.requests} requests"
            f" ({errs} errors{f', {r.unfinished} unfinished' if r.unfinished else ''}), {r.requests_per_s:.2f} req/s, {r.output_tokens_per_s:.0f} tok/s,"
            f" ttft p50/p95 {r.ttft_ms.p50} / {r.ttft_ms.p95} ms, tpot p95 {r.tpot_ms.p95} ms,"
            f" e2e p95 {r.e2e_s.p95} s{slo}",
            file=sys.stderr,
            flush=True,
        )
        if r.server is not None and r.server.requests:
            sv = r.server
            print(
                f"step {r.step}: the server saw {sv.requests} requests, ttft mean {sv.ttft_ms} ms, tpot mean"
                f" {sv.tpot_ms} ms, e2e mean {sv.e2e_s} s, {sv.output_tokens_per_s} tok/s, prefix-cache hits"
                f" {'-' if sv.prefix_cache_hit_share is None else f'{sv.prefix_cache_hit_share:.0%}'}",
                file=sys.stderr,
                flush=True,
            )
        for flag in r.flags:
            print(f"step {r.step}: warning: {flag}", file=sys.stderr, flush=True)

    def finish(self, stopped_by: str, plan: Any, started: float) -> None:
        with (self.dir / "steps.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(CSV_COLUMNS)
            for r in self.steps:
                w.writerow(csv_row(r))
        summary: dict[str, Any] = {
            "endpoint": self.cfg.endpoint,
            "model": self.cfg.model,
            "mode": self.cfg.mode,
            "started_at": started,
            "finished_at": time.time(),
            "stopped_by": stopped_by,
            "config": self.cfg.model_dump(mode="json"),
            "server": None if self.server is None else self.server.model_dump(mode="json"),
            "steps": [r.model_dump(mode="json") for r in self.steps],
            "sla_search": plan.summary(self.steps) if isinstance(plan, SlaSearch) else None,
            "capacity": plan.summary(self.steps) if isinstance(plan, CapacitySearch) else None,
        }
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2))


def _quiet_gc(collect_between_steps: bool) -> None:
    """Keep the garbage collector from stalling every stream at once in the middle of a measurement: what was
    imported is frozen out of its sight; the process that runs the steps (local, or the master) then collects
    only between steps (measured here: with automatic collection a 256-stream step's TTFT error p99 was
    17-46 ms, much of it collection pauses). Workers, which do not know the step boundaries and keep few
    objects (they ship their records every few seconds), keep the automatic collector."""
    gc.collect()
    gc.freeze()
    if collect_between_steps:
        gc.disable()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _user_classes(cfg: LoadTestConfig) -> list[type]:
    return [lf.RateUser if cfg.mode == "rate" else lf.StreamUser]


def _run_shape(env: Environment) -> None:
    runner = env.runner
    assert runner is not None
    runner.start_shape()
    while runner.shape_greenlet is not None and not runner.shape_greenlet.dead:
        gevent.sleep(0.2)
    runner.quit()


def load_config(arg: str) -> LoadTestConfig:
    """The config from a file path, or inline JSON (an ECS container override can pass it that way). A file that
    cannot be read, or a config that is not valid, is an `InvalidInput` that names the file or the fields."""
    try:
        text = arg if arg.lstrip().startswith("{") else Path(arg).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise InvalidInput(f"the load-test config {arg} cannot be read: {reason}") from None
    try:
        return LoadTestConfig.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidInput("the load-test config is not valid", problems_from_pydantic(exc)) from None


def run(
    cfg_arg: str, *, expect_workers: int | None = None, bind: str = "127.0.0.1", port: int = 0,
    upload: str | None = None, task_token: str | None = None,
) -> int:  # fmt: skip
    given = load_config(cfg_arg)
    Path(given.out_dir).mkdir(parents=True, exist_ok=True)
    cfg_path = str(Path(given.out_dir) / "config.json")
    Path(cfg_path).write_text(given.model_dump_json(indent=2))
    # a time-scaled server: the steps run on the wall clock, and are recorded in the server's time
    cfg = on_wall_clock(given)
    if given.time_scale != 1.0:
        print(f"the server runs {given.time_scale:g}x faster than real time: each level runs at {given.time_scale:g}"
              " times its rate for a fraction of its seconds, and its results read in the server's time",
              file=sys.stderr, flush=True)  # fmt: skip
    lf.configure(cfg, 0)
    _quiet_gc(collect_between_steps=True)
    out = Output(given)
    if cfg.target == "openai":
        try:
            out.server = probe(cfg.endpoint)
        except (
            EndpointUnreachable
        ) as exc:  # the steps will count its errors; the summary says why none is known
            print(f"server facts: {exc}", file=sys.stderr, flush=True)
    plan = plan_for(cfg)
    started = time.time()
    n_workers = cfg.workers if expect_workers is None else expect_workers
    shape = lf.SweepShape(
        cfg, plan, out.step, dispatchers=max(1, n_workers), drain_s=lf.DRAIN_S if n_workers else 0.0
    )
    env = Environment(user_classes=_user_classes(cfg), shape_class=shape, events=locust.events)
    workers: list[subprocess.Popen[bytes]] = []
    if n_workers:
        port = port or cfg.master_port or _free_port()
        env.create_master_runner(bind, port)
        if expect_workers is None:  # local: start the workers as child processes
            workers = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "sizing.loadtest.process",
                        "worker",
                        cfg_path,
                        "--master",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--index",
                        str(i + 1),
                    ]
                )
                for i in range(n_workers)
            ]
        deadline = time.time() + WORKER_CONNECT_TIMEOUT_S
        runner = env.runner
        assert runner is not None
        while len(runner.clients.ready) < n_workers:  # type: ignore[attr-defined]
            if time.time() > deadline:
                print(f"only {len(runner.clients.ready)} of {n_workers} workers connected", file=sys.stderr)  # type: ignore[attr-defined]
                runner.quit()
                return 1
            gevent.sleep(0.2)
    else:
        env.create_local_runner()
    locust.events.init.fire(environment=env, runner=env.runner, web_ui=None)
    try:
        _run_shape(env)
    finally:
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
    out.finish(shape.stopped_by, plan, started)
    if upload or task_token:
        report_to_aws(Path(cfg.out_dir), upload, task_token)
    return 0


def worker(cfg_arg: str, master: str, port: int, index: int) -> int:
    cfg = on_wall_clock(load_config(cfg_arg))
    lf.configure(cfg, index)
    _quiet_gc(collect_between_steps=False)
    env = Environment(user_classes=_user_classes(cfg), events=locust.events)
    runner = env.create_worker_runner(master, port)
    locust.events.init.fire(environment=env, runner=runner, web_ui=None)
    assert runner.greenlet is not None
    runner.greenlet.join()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sizing.loadtest.process")
    p.add_argument("role", choices=["run", "master", "worker"])
    p.add_argument("config")
    p.add_argument("--master", default="127.0.0.1")
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--index", type=int, default=1)
    p.add_argument("--expect-workers", type=int, default=None)
    p.add_argument("--upload", default=None, help="s3://bucket/prefix to copy the results to")
    p.add_argument(
        "--task-token", default=None, help="Step Functions task token to complete with the summary"
    )
    a = p.parse_args(argv)
    try:
        if a.role == "worker":
            return worker(a.config, a.master, a.port, a.index)
        if a.role == "master":
            return run(a.config, expect_workers=a.expect_workers or 1, bind=a.bind, port=a.port, upload=a.upload,
                       task_token=a.task_token)  # fmt: skip
        return run(a.config, upload=a.upload, task_token=a.task_token)
    except InvalidInput as exc:  # a config that cannot be read or is not valid: its message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
