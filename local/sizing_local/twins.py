"""Provision candidates as local twins: `sizing twin` child processes on free loopback ports, each serving its
architecture's whole `ServingConfig` (served name, TP, quantization, engine, context and batch limits, memory
share, KV dtype, prefix caching, chunked prefill) as the estimator simulated it.

Every child runs in its own process group and is stopped by `teardown`, by `close()` (also a context manager),
and at interpreter exit, so a run — finished, failed or interrupted — leaves no process behind."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sizing.base.lifeline import lifeline_env
from sizing.base.serving_config import ServingConfig
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.base import (
    Endpoint,
    EndpointKind,
    Provisioner,
    TeardownReport,
    as_target,
    http_healthy,
)
from sizing.deploy.kube import ProvisioningError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: A twin imports the perf model and binds a socket: a second or two; allow for a loaded 2-core machine.
STARTUP_TIMEOUT_S = 30.0
#: After SIGTERM, wait this long before SIGKILL.
STOP_GRACE_S = 5.0
HEALTH_POLL_S = 0.1
#: Ports are picked free, then bound by the child; another process can take one in between: retry.
PORT_ATTEMPTS = 3
#: Characters of the child's log quoted in an error.
LOG_TAIL_CHARS = 2000


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class _Child:
    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, endpoint: Endpoint) -> None:
        self.proc, self.log_path, self.endpoint = proc, log_path, endpoint

    def tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return ""


def _stop(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL it if it lingers; always reaps."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    else:
        proc.wait()


_live: weakref.WeakSet[LocalTwinProvisioner] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for prov in list(_live):
        prov.close()


class LocalTwinProvisioner(Provisioner):
    """Starts one `sizing twin` per candidate; `command` replaces the twin command line prefix (tests)."""

    kind: EndpointKind = "local-twin"

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        host: str = LOOPBACK,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        log_dir: Path | None = None,
        extra_args: Sequence[str] = (),
        time_scale: float = 1.0,
    ) -> None:
        self.command = list(command) if command else [sys.executable, "-m", "sizing.cli", "twin"]
        #: the twins run this many times faster than real time (`sizing twin --time-scale`)
        self.time_scale = time_scale
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="sizing-twins-"))
        self.extra_args = list(extra_args)
        self._children: dict[tuple[str, str], _Child] = {}
        self._lock = threading.Lock()
        _live.add(self)

    def __enter__(self) -> LocalTwinProvisioner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- apply ----------------------------------------------------------------------------------------
    @staticmethod
    def serving_of(arch: DeployTarget) -> ServingConfig:
        """The architecture's `ServingConfig`: the one it states, else the engine defaults of its bare id."""
        if arch.serving is not None:
            return arch.serving
        serving = arch.resolve().serving
        assert serving is not None  # resolve() always fills it
        return serving

    def _argv(self, arch: DeployTarget, port: int) -> list[str]:
        """`sizing twin` for the architecture's whole serving configuration, with vLLM's flag names, so the twin's
        step model is the estimator's for exactly that config."""
        s = self.serving_of(arch)
        argv = [
            *self.command,
            "--model", s.model,
            "--instance", arch.instance_type or "",
            "--tp", str(s.tensor_parallel),
            "--quant", s.quantization,
            "--engine", s.engine,
            "--image", s.image,
            "--max-model-len", str(s.max_model_len),
            "--max-num-seqs", str(s.max_num_seqs),
            "--gpu-memory-utilization", str(s.gpu_memory_utilization),
            "--kv-cache-dtype", s.kv_cache_dtype,
            "--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching",
            "--enable-chunked-prefill" if s.enable_chunked_prefill else "--no-enable-chunked-prefill",
        ]  # fmt: skip
        if s.max_num_batched_tokens is not None:
            argv += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
        if self.time_scale != 1.0:
            argv += ["--time-scale", f"{self.time_scale:g}"]
        return [*argv, "--port", str(port), "--host", self.host, *self.extra_args]

    def apply(
        self, architecture: DeployTarget | dict[str, Any], run_id: str, candidate_id: str | None = None
    ) -> Endpoint:
        arch = as_target(architecture)
        cand = candidate_id or arch.id
        key = (run_id, cand)
        with self._lock:
            existing = self._children.get(key)
            if existing and existing.proc.poll() is None:
                return existing.endpoint  # re-apply: the twin is already running
        last_error = ""
        for _ in range(PORT_ATTEMPTS):
            child = self._start(arch, run_id, cand)
            with self._lock:
                self._children[key] = child
            try:
                outcome = self._await_health(child)
            except BaseException:  # interrupted while waiting: do not leave the child running
                self.teardown(run_id, cand)
                raise
            if outcome is None:
                return child.endpoint
            last_error = outcome
            self.teardown(run_id, cand)
            if "Address already in use" not in last_error:
                break
        raise ProvisioningError(f"twin for {cand} did not start: {last_error}")

    def _start(self, arch: DeployTarget, run_id: str, cand: str) -> _Child:
        port = free_port(self.host)
        url = f"http://{self.host}:{port}"
        log_path = self.log_dir / f"twin-{port}.log"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                self._argv(arch, port),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=lifeline_env(),  # the twin ends with this process, even a SIGKILLed one
            )
        endpoint = Endpoint(
            url=url,
            kind=self.kind,
            run_id=run_id,
            candidate_id=cand,
            model=self.serving_of(arch).model,  # the served name, exactly as the workload named the model
            details={"pid": str(proc.pid), "port": str(port), "log": str(log_path)},
            time_scale=self.time_scale,
        )
        return _Child(proc, log_path, endpoint)

    def _await_health(self, child: _Child) -> str | None:
        """None once /health answers; else why not (exited early, or too slow)."""
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if child.proc.poll() is not None:
                return f"exited with code {child.proc.returncode}: {child.tail().strip()}"
            if http_healthy(child.endpoint.url, timeout_s=1.0):
                return None
            time.sleep(HEALTH_POLL_S)
        return f"no answer on {child.endpoint.url}/health within {self.startup_timeout_s:.0f} s: {child.tail().strip()}"

    # --- ready / teardown -----------------------------------------------------------------------------
    def ready(self, endpoint: Endpoint) -> bool:
        child = self._children.get((endpoint.run_id, endpoint.candidate_id))
        if child is None or child.proc.poll() is not None:
            return False
        return http_healthy(endpoint.url)

    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:
        report = TeardownReport()
        with self._lock:
            keys = [
                k for k in self._children if k[0] == run_id and (candidate_id is None or k[1] == candidate_id)
            ]
            children = [(k, self._children.pop(k)) for k in keys]
        for (_, cand), child in children:
            _stop(child.proc)
            report.deleted.append(f"twin/{cand}@{child.endpoint.url} (pid {child.proc.pid})")
        return report

    def running(self) -> list[Endpoint]:
        return [c.endpoint for c in self._children.values() if c.proc.poll() is None]

    def close(self) -> None:
        """Stop every twin this provisioner started."""
        with self._lock:
            children = list(self._children.values())
            self._children.clear()
        for child in children:
            _stop(child.proc)
