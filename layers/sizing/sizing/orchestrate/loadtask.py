"""The load generator's entry point: `python -m sizing.orchestrate.loadtask run TASK.json` (a local child process)
or with the task in `$LOADTEST_TASK` (the Fargate container). It sweeps the candidate with the Locust harness (in
its own child process: Locust must not share a process with boto3), stores every step in DynamoDB, and completes
the state machine's task token: SendTaskSuccess with a summary, or SendTaskFailure with the cause. A heartbeat
thread tells Step Functions it is alive while the sweep runs.

Every stored step, the sweep's config and the summary record the serving configuration measured (`serving`, the
architecture's `ServingConfig` dict) and the engine version the server reports (`engine_version`: vLLM's
GET /version, `twin-<version>` from a local twin, None from a server that does not say), and what the server
itself reports (`server_facts`: version, served models, max_model_len, KV capacity in tokens, block size, prefix
caching) beside it, with the seed its prompts were drawn from, so a measurement belongs to a configuration."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sizing.base.errors import problems_from_pydantic
from sizing.base.lifeline import exit_with_parent
from sizing.base.serving_config import ServerFacts
from sizing.base.vocabulary import CAPACITY_PHASE
from sizing.loadtest.capacity import CapacitySearch
from sizing.loadtest.launch import run_config
from sizing.loadtest.server import EndpointUnreachable, probe
from sizing.orchestrate.contracts import LoadTask
from sizing.store import SizingStore
from sizing.traces.replay import reread

#: Heartbeats go out at this fraction of the state's HeartbeatSeconds, so one lost heartbeat is not fatal.
HEARTBEAT_FRACTION = 1 / 3
#: Step Functions' limit on a failure cause (characters).
MAX_CAUSE = 32_000
#: Longest served-model list recorded (characters).
MAX_SERVED_CHARS = 1000


def server_facts(endpoint: str) -> ServerFacts | None:
    """What the server runs, as it reports it (vLLM: GET /version, /v1/models and /metrics; a twin the same);
    None for Bedrock and SageMaker URLs or a server that answers none of them."""
    if not endpoint.startswith(("http://", "https://")):
        return None
    try:
        return probe(endpoint)
    except EndpointUnreachable:
        return None


def replayed_window(task: LoadTask) -> dict[str, Any] | None:
    """The trace window the task replays, read again where the estimate read it (None: the task replays no
    trace); InvalidInput when it cannot be read or changed since."""
    if task.trace is None:
        return None
    ref = task.trace
    return reread(ref.path, ref.format, ref.model, ref.digest).as_load()


def _capacity_search(
    task: LoadTask, version: str | None, store: Any, recorded: dict[str, Any], replay: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The candidate's capacity searched in arrival rate after its closed-loop levels, each level stored with
    `phase: capacity` (the merge reads the edge and its interval from them; the learning loop leaves them out).
    None when the task asks for no search."""
    cfg = task.capacity_config(engine_version=version, replay=replay)
    if cfg is None:
        return None
    steps = run_config(cfg, quiet=True)
    for s in steps:
        store.put_measurement(
            task.run_id, task.candidate_id, {**s.model_dump(mode="json"), **recorded, "phase": CAPACITY_PHASE}
        )
    return CapacitySearch(task.capacity_from or 1.0).estimate(steps).model_dump(mode="json")


class Heartbeat(threading.Thread):
    def __init__(self, sfn: Any, token: str, every_s: float) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.sfn, self.token, self.every_s = sfn, token, every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                self.sfn.send_task_heartbeat(taskToken=self.token)
            except Exception as exc:  # a failed heartbeat is retried on the next tick; the sweep goes on
                print(f"heartbeat failed: {exc}", file=sys.stderr, flush=True)


def execute(task: LoadTask, sfn: Any, store: Any) -> dict[str, Any]:
    """Sweep, store, complete the token. Returns the summary sent (or the failure)."""
    beat = Heartbeat(sfn, task.task_token, max(1.0, task.heartbeat_s * HEARTBEAT_FRACTION))
    beat.start()
    try:
        facts = server_facts(task.endpoint)
        version = None if facts is None else facts.version
        replay = replayed_window(task)
        cfg = task.config(engine_version=version, replay=replay)
        steps = run_config(cfg, quiet=True)
        ok = sum(s.answered for s in steps)
        if not steps or ok <= 0:
            errors: dict[str, int] = {}
            for s in steps:
                for kind, n in s.errors.items():
                    errors[kind] = errors.get(kind, 0) + n
            raise RuntimeError(f"no request to {task.endpoint} succeeded during the sweep (errors: {errors})")
        recorded = {
            "serving": task.serving,
            "engine_version": version,
            "served_model": None
            if facts is None
            else ",".join(facts.served_models)[:MAX_SERVED_CHARS] or None,
            "shared_prefix_tokens": task.shared_prefix_tokens,
            "seed": cfg.seed,
            "server_facts": None if facts is None else facts.model_dump(mode="json"),
        }
        for s in steps:
            store.put_measurement(task.run_id, task.candidate_id, {**s.model_dump(mode="json"), **recorded})
        capacity = _capacity_search(task, version, store, recorded, replay)
        summary = {
            "candidate_id": task.candidate_id,
            "engine_version": version,
            "steps": len(steps),
            "requests": sum(s.requests for s in steps),
            "errors": sum(s.failed for s in steps),
            "max_requests_per_s": max(s.requests_per_s for s in steps),
            "capacity": capacity,
            "trace_digest": None if task.trace is None else task.trace.digest,
        }
        sfn.send_task_success(taskToken=task.task_token, output=json.dumps(summary))
        return summary
    except Exception as exc:  # the process boundary: every failure must reach the state machine as a cause
        cause = f"{type(exc).__name__}: {exc}"[:MAX_CAUSE]
        sfn.send_task_failure(taskToken=task.task_token, error="LoadTestFailed", cause=cause)
        return {"error": "LoadTestFailed", "cause": cause}
    finally:
        beat.stopped.set()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"] and len(args) == 2:
        raw = Path(args[1]).read_text()
    elif os.environ.get("LOADTEST_TASK"):
        raw = os.environ["LOADTEST_TASK"]
    else:
        print(
            "usage: python -m sizing.orchestrate.loadtask run TASK.json  (or set LOADTEST_TASK)",
            file=sys.stderr,
        )
        return 2
    try:
        task = LoadTask.model_validate_json(raw)
    except ValidationError as exc:  # no token to complete: the launcher reports this exit with the log's tail
        problems = "; ".join(f"{p.field}: {p.message}" for p in problems_from_pydantic(exc))
        print(f"the load task is not valid: {problems}", file=sys.stderr)
        return 2

    exit_with_parent()  # started by a local run: end with it (and end Locust), even if it is SIGKILLed
    import boto3

    result = execute(task, boto3.client("stepfunctions"), SizingStore(task.table_name))
    print(json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    raise SystemExit(main())
