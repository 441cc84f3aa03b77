"""Start a candidate's load test with a task token: a local child process, or Fargate tasks (Locust master and
workers) in AWS. Either way the load generator (`sizing.orchestrate.loadtask`) stores its steps and completes the
token itself, so the state machine waits for the measurement, not for the launcher."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

from sizing.base.errors import InvalidInput, SizingError
from sizing.base.lifeline import lifeline_env
from sizing.orchestrate.budget import fargate_task_size
from sizing.orchestrate.settings import OrchestrationSettings

#: ECS container name of the load generator in template.yaml's task definition.
MASTER_CONTAINER = "locust-master"


class LocalLauncher:
    """Runs `python -m sizing.orchestrate.loadtask run TASK.json` as a child process per candidate. Every child
    is tracked so a stopped run (or a killed `sizing run`) can end them: `stop_all()`."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _children: ClassVar[dict[str, subprocess.Popen[bytes]]] = {}

    def __init__(self, settings: OrchestrationSettings) -> None:
        self.settings = settings

    def start(self, task: dict[str, Any]) -> dict[str, Any]:
        out = Path(task["out_dir"])
        out.mkdir(parents=True, exist_ok=True)
        path = out / "task.json"
        path.write_text(json.dumps(task, indent=2))
        log = (out / "loadtask.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sizing.orchestrate.loadtask", "run", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=lifeline_env(),  # it ends with this process, even a SIGKILLed one
            start_new_session=True,  # its own process group: stop_all ends Locust's children too
        )
        with self._lock:
            self._children[f"{task['run_id']}/{task['candidate_id']}"] = proc
        threading.Thread(
            target=_report_crash, args=(proc, task["task_token"], out / "loadtask.log"), daemon=True
        ).start()
        return {"launched": "local", "pid": proc.pid, "log": str(out / "loadtask.log")}

    @classmethod
    def stop_run(cls, run_id: str, timeout_s: float = 10.0) -> int:
        """End the load-test children of one run."""
        with cls._lock:
            keys = [k for k in cls._children if k.startswith(f"{run_id}/")]
            procs = [cls._children.pop(k) for k in keys]
        return cls._stop(procs, timeout_s)

    @classmethod
    def stop_all(cls, timeout_s: float = 10.0) -> int:
        """End every load-test child (and its process group). Returns how many were still running."""
        with cls._lock:
            procs = list(cls._children.values())
            cls._children.clear()
        return cls._stop(procs, timeout_s)

    @staticmethod
    def _stop(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> int:
        running = [p for p in procs if p.poll() is None]
        for p in running:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in running:
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return len(running)


#: Exit codes of the load generator that mean it completed the task token itself (0: success; 1: it sent
#: SendTaskFailure with the cause). Anything else (a signal, an interpreter crash) left the token open.
TOKEN_COMPLETED_CODES = (0, 1)
#: Characters of the load generator's log quoted in the failure cause.
LOG_TAIL_CHARS = 1500


def _report_crash(proc: subprocess.Popen[bytes], task_token: str, log_path: Path) -> None:
    """Wait for the child; if it died without completing its task token, fail the token with the cause at once
    (rather than leave the state machine waiting for the heartbeat to run out)."""
    code = proc.wait()
    if code in TOKEN_COMPLETED_CODES:
        return
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        tail = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
    except OSError:
        tail = ""
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    # the run was stopped (our own SIGTERM) or the token already closed: then nothing is waiting
    with contextlib.suppress(BotoCoreError, ClientError):
        boto3.client("stepfunctions").send_task_failure(
            taskToken=task_token, error="LoadGeneratorCrashed", cause=f"the load generator {how}: {tail}"
        )


class FargateLauncher:
    """Runs the load generator as one Fargate task (awsvpc) with the task in its environment. Locust's own
    master/worker mode runs inside it: the master and `workers` worker processes, LOADGEN_VCPU / LOADGEN_GB each,
    the task sized to hold them (`budget.fargate_task_size`), so workers always find their master on the task's
    loopback."""

    def __init__(self, settings: OrchestrationSettings, ecs_client: Any | None = None) -> None:
        self.settings = settings
        self._ecs = ecs_client

    @property
    def ecs(self) -> Any:
        if self._ecs is None:
            import boto3

            self._ecs = boto3.client("ecs")
        return self._ecs

    def start(self, task: dict[str, Any]) -> dict[str, Any]:
        s = self.settings
        if not (s.ecs_cluster and s.master_task_definition and s.subnets):
            raise InvalidInput(
                "the Fargate load generator is not configured (cluster, task definition, subnets)"
            )
        vcpu, gb = fargate_task_size(int(task.get("workers") or 0))
        out = self.ecs.run_task(
            cluster=s.ecs_cluster,
            taskDefinition=s.master_task_definition,
            launchType="FARGATE",
            count=1,
            networkConfiguration={
                "awsvpcConfiguration": {
                    "subnets": [x for x in s.subnets.split(",") if x],
                    "securityGroups": [x for x in (s.security_groups or "").split(",") if x],
                    "assignPublicIp": "DISABLED",
                }
            },
            overrides={
                # the task's size follows from its workers: LOADGEN_VCPU / LOADGEN_GB per Locust process
                "cpu": str(vcpu * 1024),
                "memory": str(gb * 1024),
                "containerOverrides": [
                    {
                        "name": MASTER_CONTAINER,
                        "environment": [{"name": "LOADTEST_TASK", "value": json.dumps(task)}],
                    }
                ],
            },
            tags=[
                {"key": "sizing.llm/run-id", "value": task["run_id"]},
                {"key": "sizing.llm/candidate-id", "value": task["candidate_id"]},
            ],
            startedBy=f"sizing-{task['run_id']}"[:36],
        )
        arns = [t["taskArn"] for t in out.get("tasks", [])]
        if not arns or out.get("failures"):
            raise SizingError(f"the load generator did not start: {out.get('failures')}")
        return {"launched": "fargate", "tasks": arns}
