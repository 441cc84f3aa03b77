"""Faults injected at each stage of a sizing run on the embedded default (the real ASL on moto, handlers
in-process, twins and the load generator as child processes). Each run must end in a clear terminal state, with
teardown done, no process or port of the run left behind, and the cause readable through `GET /runs/{id}`.

Failures are real ones, not patched functions: a twin command that exits at once, a twin that dies after
answering its first health check, a load generator killed mid-sweep, DynamoDB answering ThrottlingException at
the HTTP layer (a botocore `before-send` hook), a Lambda handler that outlives its template timeout."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

import sizing_local.stack as local_mod
from sizing.orchestrate import steps as steps_mod
from sizing.orchestrate.launchers import LocalLauncher
from sizing_local.stack import LocalRunResult, run_local

pytestmark = [pytest.mark.integration]

#: Short sweeps: the faults are the subject, not the figures.
FAST = {"step_s": 1.5, "warmup_s": 0.5}
#: Ready checks: one second apart, two attempts (a twin that died is not coming back).
QUICK_READY = {"READY_MAX_ATTEMPTS": "2", "READY_POLL_S": "1"}
#: Seconds a child of a SIGKILLed run may take to notice (its lifeline polls every second) and stop.
LIFELINE_GRACE_S = 10
#: Command-line markers of the processes a local run starts.
RUN_PROCESS_MARKERS = ("sizing.orchestrate.loadtask", "sizing.cli twin", "fault_twin", "locust")
#: A twin that answers one health check, then exits: provisioned, never ready.
DYING_TWIN = r"""
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", port), H)
srv.handle_request()  # fault_twin: one answer, then gone
"""


@dataclass
class Observed:
    """What the test saw of a run: its id, the API's answer for it before the embedded AWS stopped, and every
    process the run started."""

    run_id: str = ""
    api_answer: dict[str, Any] = field(default_factory=dict)
    api_status: int = 0
    pids: set[int] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _is_run_process(p: psutil.Process) -> bool:
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    return any(m in cmd for m in RUN_PROCESS_MARKERS)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1):
            return True
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def observe(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., tuple[LocalRunResult, Observed]]]:
    """Run `run_local` while recording the run's child processes, and ask the API for the run (GET /runs/{id},
    the deployed resolver, on the same embedded AWS) just before that AWS stops."""
    seen = Observed()
    stop_watch = threading.Event()

    def watch_children() -> None:
        while not stop_watch.wait(0.2):
            for p in _descendants():
                if _is_run_process(p):
                    seen.pids.add(p.pid)

    original_stop = local_mod.EmbeddedAws.stop

    def stop_after_asking_the_api(self: Any) -> None:
        if self._server is not None and seen.run_id:
            seen.api_status, seen.api_answer = _get_run(self, seen.run_id)
        original_stop(self)

    monkeypatch.setattr(local_mod.EmbeddedAws, "stop", stop_after_asking_the_api)

    def run(spec: dict[str, Any], **kwargs: Any) -> tuple[LocalRunResult, Observed]:
        user_started = kwargs.pop("on_started", None)

        def started(run: Any, service: Any) -> None:
            seen.run_id = run.run_id
            if user_started:
                user_started(run, service)

        watcher = threading.Thread(target=watch_children, daemon=True)
        watcher.start()
        try:
            result = run_local(spec, on_started=started, **kwargs)
        finally:
            stop_watch.set()
            watcher.join()
        for path in Path(result.out_dir).rglob("task.json"):
            import json

            seen.urls.add(json.loads(path.read_text())["endpoint"])
        return result, seen

    yield run
    LocalLauncher.stop_all(timeout_s=3)
    steps_mod.close_local_twins()


def _get_run(aws: Any, run_id: str) -> tuple[int, dict[str, Any]]:
    import json

    from sizing.service.api import deps, resolve
    from sizing.service.settings import ApiSettings
    from sizing_local.serve import to_event

    session = aws.session()
    deps.configure(
        ApiSettings(TABLE_NAME=local_mod.TABLE, STAGE="local"),
        dynamodb=session.client("dynamodb", endpoint_url=aws.endpoint),
    )
    try:
        answer = resolve(to_event("GET", f"/runs/{run_id}", {}, b"", "127.0.0.1"), None)
    finally:
        deps.configure()
    return int(answer["statusCode"]), json.loads(answer["body"])


def assert_nothing_left(seen: Observed) -> None:
    """No process the run started is alive, no twin answers, no load-test child is tracked."""
    deadline = time.monotonic() + 5  # reaping after SIGTERM takes a moment
    alive: list[int] = []
    while time.monotonic() < deadline:
        alive = [pid for pid in seen.pids if psutil.pid_exists(pid) and _alive(pid)]
        if not alive:
            break
        time.sleep(0.2)
    assert not alive, f"processes of the run still running: {alive}"
    assert not any(answers(u) for u in seen.urls)
    assert not LocalLauncher._children
    assert not [p for p in _descendants() if _is_run_process(p) and _alive(p.pid)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def assert_failed_visibly(result: LocalRunResult, seen: Observed, *words: str) -> None:
    assert result.run["status"] == "FAILED", result.run
    assert seen.api_status == 200 and seen.api_answer["status"] == "FAILED"
    error = seen.api_answer.get("error") or ""
    for word in words:
        assert word in error, error


def record_fault(record: Callable[..., None], fault: str, result: LocalRunResult, seen: Observed) -> None:
    """For the benchmark: the fault, the run's end state as the API shows it, and what was left (checked above)."""
    record(
        "fault",
        fault=fault,
        execution=result.execution["status"],
        run_status=seen.api_answer.get("status"),
        error=(seen.api_answer.get("error") or "")[:160],
        processes_seen=len(seen.pids),
        left_behind=0,
        measurements_kept=len(result.measurements),
    )


@pytest.fixture
def twin_command(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], None]:
    """Make the embedded default provision twins with this command (the provisioner's own `command` option)."""

    def use(command: list[str]) -> None:
        from sizing_local.twins import LocalTwinProvisioner

        monkeypatch.setattr(steps_mod, "_local_twins", LocalTwinProvisioner(command=command))

    return use


# --- provisioning ---------------------------------------------------------------------------------------------
def test_a_twin_that_cannot_start_fails_the_run_with_its_cause(
    observe, twin_command, tmp_path, small_spec, record_figures
):
    # given a provisioner whose twin exits at once with an error
    twin_command([sys.executable, "-c", "import sys; print('no GPU here', file=sys.stderr); sys.exit(3)"])
    # when a run is made
    result, seen = observe(small_spec(), top_k=1, out_dir=tmp_path, **FAST)
    # then it fails, says why through the API, and nothing is left running
    assert_failed_visibly(result, seen, "did not start", "exited with code 3")
    assert result.execution["status"] == "FAILED"
    assert not result.measurements
    assert_nothing_left(seen)
    record_fault(record_figures, "provisioning error (twin exits at once)", result, seen)


def test_a_twin_that_dies_after_provisioning_is_never_ready_and_torn_down(
    observe, twin_command, tmp_path, small_spec, record_figures
):
    # given a twin that answers its first health check, then exits
    script = tmp_path / "fault_twin.py"
    script.write_text(DYING_TWIN)
    twin_command([sys.executable, str(script)])
    # when
    result, seen = observe(small_spec(), top_k=1, out_dir=tmp_path, extra_env=QUICK_READY, **FAST)
    # then
    assert_failed_visibly(result, seen, "EndpointNeverReady", "not ready after 2 checks")
    assert_nothing_left(seen)
    record_fault(record_figures, "endpoint never ready (twin dies after start)", result, seen)


# --- the load generator ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_load_generator_killed_mid_sweep_fails_the_run_and_leaves_nothing(
    observe, tmp_path, small_spec, record_figures
):
    # given a run whose load generator is SIGKILLed once it has started measuring
    killed: dict[str, int] = {}

    def kill_the_load_generator(run: Any, service: Any) -> None:
        def later() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                with LocalLauncher._lock:
                    procs = list(LocalLauncher._children.values())
                if procs and list(Path(tmp_path).rglob("loadtask.log")):
                    time.sleep(1.0)  # mid-sweep
                    os.killpg(procs[0].pid, signal.SIGKILL)
                    killed["pid"] = procs[0].pid
                    return
                time.sleep(0.1)

        threading.Thread(target=later, daemon=True).start()

    # when
    result, seen = observe(
        small_spec(),
        top_k=1,
        out_dir=tmp_path,
        on_started=kill_the_load_generator,
        extra_env={"HEARTBEAT_S": "10"},
        step_s=4,
        warmup_s=0.5,
        timeout_s=240,
    )
    # then
    assert killed, "the load generator was never seen running"
    assert_failed_visibly(result, seen)
    # the launcher saw its child die without completing the task token and failed it at once, saying how
    assert "LoadGeneratorCrashed" in seen.api_answer["error"]
    assert "the load generator killed by SIGKILL" in seen.api_answer["error"]
    assert_nothing_left(seen)
    record_fault(record_figures, "load generator SIGKILLed mid-sweep", result, seen)


# --- DynamoDB throttling ----------------------------------------------------------------------------------------
THROTTLED_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
    b'"message":"Rate of requests exceeds the allowed throughput."}'
)


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


@dataclass
class Throttle:
    """Answers DynamoDB calls of the step functions (boto3's default session) with HTTP 400
    ThrottlingException: `first_n` calls of each operation, or every call while `always` is set."""

    first_n: int = 0
    always: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    throttled: int = 0

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        op = str(kwargs.get("event_name", "")).rsplit(".", 1)[-1]
        self.counts[op] = self.counts.get(op, 0) + 1
        if self.always or self.counts[op] <= self.first_n:
            self.throttled += 1
            headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "throttled"}
            return AWSResponse(request.url, 400, headers, _Raw(THROTTLED_BODY))
        return None


@pytest.fixture
def throttle() -> Iterator[Throttle]:
    import boto3

    hook = Throttle()
    session = boto3._get_default_session()
    session.events.register("before-send.dynamodb", hook, unique_id="reliability-throttle")
    try:
        yield hook
    finally:
        session.events.unregister("before-send.dynamodb", unique_id="reliability-throttle")


def test_persistent_throttling_fails_the_run_visibly(observe, throttle, tmp_path, small_spec, record_figures):
    # given DynamoDB throttling every call of the step functions (retries give up quickly)
    throttle.always = True
    # when
    result, seen = observe(
        small_spec(), top_k=1, out_dir=tmp_path, extra_env={"AWS_MAX_ATTEMPTS": "2"}, **FAST
    )
    # then
    assert throttle.throttled > 0

    assert_failed_visibly(result, seen, "Throttling")
    assert_nothing_left(seen)
    record_fault(record_figures, "DynamoDB throttling, persistent", result, seen)


@pytest.mark.slow
def test_transient_throttling_is_retried_and_loses_nothing(
    observe, throttle, tmp_path, small_spec, record_figures
):
    # given DynamoDB throttling the first two calls of every operation of the step functions
    throttle.first_n = 2
    # when
    result, seen = observe(small_spec(), top_k=1, out_dir=tmp_path, **FAST)
    # then the retries carry the run through: measured, ranked, nothing lost
    assert throttle.throttled >= 2
    assert result.run["status"] == "SUCCEEDED" and seen.api_answer["status"] == "SUCCEEDED"
    assert result.measurements and result.ranking and result.ranking["measured"] == 1
    assert any(a.get("measured") for a in result.architectures)
    assert_nothing_left(seen)
    record_fault(record_figures, "DynamoDB throttling, transient (2 per operation)", result, seen)


# --- a killed `sizing run` --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_local_run_leaves_no_twin_or_locust_behind(tmp_path, small_spec, sig, record_figures):
    import subprocess

    import yaml

    # given `sizing run` measuring a candidate
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(small_spec()))
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("sizing")), "run", str(spec), "--top", "1", "--out",
         str(tmp_path / "out"), "--step-seconds", "20"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    started: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            kids = [p for p in psutil.Process(proc.pid).children(recursive=True) if _is_run_process(p)]
            started |= {p.pid for p in kids}
            if any("loadtask" in " ".join(p.cmdline()) for p in kids):
                break
            time.sleep(0.2)
        assert started, "the run never started its twin and load generator"
        time.sleep(2)  # mid-sweep
        started |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True) if _is_run_process(p)}
        # when it is interrupted
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # then every process it started is gone (after SIGKILL, within the children's lifeline poll)
    deadline = time.monotonic() + LIFELINE_GRACE_S
    alive = [pid for pid in started if _alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in started if _alive(pid)]
    assert not alive, [" ".join(psutil.Process(p).cmdline()) for p in alive]
    record_figures("fault", fault=f"`sizing run` interrupted ({signal.Signals(sig).name})", execution="-",
                   run_status="-", error="", processes_seen=len(started), left_behind=0, measurements_kept=0)  # fmt: skip


# --- a Lambda timeout -------------------------------------------------------------------------------------------
#: A twin that takes this long to answer its health check: longer than the shortened Provision timeout below.
SLOW_TWIN_S = 8
SLOW_TWIN = rf"""
import http.server, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
time.sleep({SLOW_TWIN_S})  # fault_twin: slow to come up
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""
PROVISION_TIMEOUT_S = 2


@pytest.fixture
def short_provision_template(tmp_path: Path) -> Path:
    """template.yaml with the Provision function's Timeout cut to PROVISION_TIMEOUT_S seconds."""
    from sizing.store.schema import find_template

    text = find_template().read_text()
    marker = "      Handler: app.provision\n      Timeout: 120\n"
    assert marker in text, "the Provision function's Timeout moved; update this fixture"
    out = tmp_path / "template.yaml"
    out.write_text(
        text.replace(marker, f"      Handler: app.provision\n      Timeout: {PROVISION_TIMEOUT_S}\n")
    )
    # the template's relative paths (DefinitionUri, CodeUri) resolve beside it, as SAM resolves them
    for folder in ("statemachines", "functions", "layers"):
        (tmp_path / folder).symlink_to(find_template().resolve().parent / folder)
    return out


@pytest.mark.slow
def test_a_step_that_outlives_its_lambda_timeout_fails_the_candidate_and_tears_down(
    observe, twin_command, tmp_path, small_spec, short_provision_template, record_figures
):
    # given a Provision function that times out (its twin is slower to start than the function may run)
    script = tmp_path / "fault_twin.py"
    script.write_text(SLOW_TWIN)
    twin_command([sys.executable, str(script)])
    # when
    result, seen = observe(
        small_spec(), top_k=1, out_dir=tmp_path / "out", template_path=short_provision_template, **FAST
    )
    # then the timeout is the run's visible cause, and the half-started twin is gone
    assert_failed_visibly(result, seen, "Sandbox.Timedout", f"after {PROVISION_TIMEOUT_S:.2f} seconds")
    assert_nothing_left(seen)
    record_fault(record_figures, "Lambda timeout (Provision)", result, seen)
