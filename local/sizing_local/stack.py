"""The embedded default: the sizing run on one machine with no AWS account.

moto (in-process server) is the AWS: its Step Functions engine executes the *same* ASL file with the
substitutions template.yaml declares, Lambda tasks are dispatched in-process to the handlers template.yaml names
(`functions/steps/app.py`), DynamoDB and EventBridge are moto's. Candidates are provisioned as local twins (or the
`--endpoint` given) and measured by real Locust in child processes."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sizing.base.errors import Unavailable
from sizing.deploy.janitor import first_failure
from sizing.service.runs import RunsService
from sizing.store import TERMINAL
from sizing.store.schema import load_template
from sizing_local import STEP_S, TWIN_TIME_SCALE, WARMUP_S
from sizing_local.awsmodels import share_service_models
from sizing_local.files import use_stack_files

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = "llm-sizing-local"
BUS = "llm-sizing-local"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/llm-sizing-local"
STATE_MACHINE_RESOURCE_TYPE = "AWS::Serverless::StateMachine"
#: A valid, empty zip: moto stores the function; the code that runs is ours, dispatched in-process.
EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18

#: Local settings: poll twins every second (they start in about one), measure one candidate at a time (two
#: load tests at once would share this machine's two cores and distort each other).
LOCAL_ENV = {
    "SIZING_BACKEND": "local",
    "TABLE_NAME": TABLE,
    "STAGE": "local",
    "READY_POLL_S": "1",
    "READY_MAX_ATTEMPTS": "60",
    "MAP_MAX_CONCURRENCY": "3",
    "HEARTBEAT_S": "120",
    "LOADTEST_TIMEOUT_S": "900",
    "LOADTEST_WORKERS": "0",
    # a capacity search adds a minute or more a candidate on two shared cores (docs/loadgen.md, "Time-scaled
    # twins"): `sizing run --capacity-search` asks for it; the deployed stack searches by default
    "LOADTEST_CAPACITY_SEARCH": "false",
    # a level near the edge reads its percentile's requests for at most 5 minutes of the twin's time (75 s of wall
    # time at 4x), so a search of 7 levels and the closed-loop levels stay inside LOADTEST_TIMEOUT_S
    "LOADTEST_CAPACITY_MAX_LEVEL_S": "300",
    # twins run faster than real time; the load test reads their figures back in their own time
    "TWIN_TIME_SCALE": f"{TWIN_TIME_SCALE:g}",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_SERVICE_NAME": "llm-sizing",
    "POWERTOOLS_METRICS_NAMESPACE": "LLMSizing",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_DISABLED": "true",  # no EMF lines on the terminal of a local run
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


class LambdaContextStub:
    """The parts of the Lambda context our handlers read (Powertools logger, tracer)."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = uuid.uuid4().hex
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


class _Timeout:
    """A handler still running when its function's timeout passed (it runs on, like a sandbox not yet frozen)."""


def _call_with_timeout(
    handler: Callable[[Any, Any], Any], event: Any, context: Any, timeout_s: float | None
) -> Any:
    """The handler's return value, or `_Timeout` once `timeout_s` passed; its exception is re-raised."""
    if timeout_s is None:
        return handler(event, context)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = handler(event, context)
        except BaseException as exc:  # handed to the caller below (or dropped if it already timed out)
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"lambda-{context.function_name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return _Timeout()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@contextlib.contextmanager
def inprocess_lambdas(
    handlers: dict[str, Callable[[Any, Any], Any]], timeouts: dict[str, float] | None = None
) -> Iterator[None]:
    """Make moto's Lambda `Invoke` call our handlers in this process: a handler's return value is the payload;
    an exception becomes a function error whose errorType is the exception's class, as in AWS. A handler that
    outlives its function's timeout (`timeouts`, seconds by function name, from template.yaml) is a function
    error `Sandbox.Timedout`, as in AWS."""
    from moto.awslambda.models import LambdaBackend
    from moto.awslambda_simple.models import LambdaSimpleBackend

    backends = (LambdaBackend, LambdaSimpleBackend)  # moto picks the simple one when use_docker is off
    originals = {cls: cls.invoke for cls in backends}

    def invoke(
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> Any:
        name = function_name.split(":function:")[-1].split(":")[0]
        handler = handlers.get(name)
        if handler is None:
            return originals[type(self)](self, function_name, qualifier, body, headers, response_headers)
        event = json.loads(body) if body else {}
        timeout_s = (timeouts or {}).get(name)
        try:
            payload: Any = _call_with_timeout(handler, event, LambdaContextStub(name), timeout_s)
        except Exception as exc:  # the Lambda runtime boundary: report as a function error, like AWS
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
        if isinstance(payload, _Timeout):
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"Task timed out after {timeout_s:.2f} seconds",
            }
        data = json.dumps(payload, default=str).encode()
        response_headers["Content-Length"] = str(len(data))
        return data

    for cls in backends:
        cls.invoke = invoke  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.invoke = original  # type: ignore[method-assign]


def _load_handler(code_uri: str, handler: str) -> Callable[[Any, Any], Any]:
    from sizing.lambdas import load_function

    module_name, func = handler.rsplit(".", 1)
    fn: Callable[[Any, Any], Any] = getattr(load_function(code_uri, module_name), func)
    return fn


def _reset_handler_state() -> None:
    """Handlers build their parts once per container; a new embedded AWS is a new container."""
    from sizing.lambdas import loaded_functions

    for module in loaded_functions():
        cached = getattr(module, "services", None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


@dataclass
class LocalStack:
    endpoint: str
    state_machine_arn: str
    handlers: dict[str, Callable[[Any, Any], Any]] = field(default_factory=dict)
    substitutions: dict[str, str] = field(default_factory=dict)
    #: Each function's Timeout (seconds) from template.yaml (its own, else the Globals one).
    timeouts: dict[str, float] = field(default_factory=dict)


def _substitute(asl: str, values: dict[str, str]) -> str:
    missing = sorted(set(re.findall(r"\$\{(\w+)\}", asl)) - set(values))
    if missing:
        raise RuntimeError(f"placeholders without a DefinitionSubstitutions entry: {missing}")
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], asl)


def deploy_local(session: Any, endpoint: str, template_path: Path | None = None) -> LocalStack:
    """Create, on the embedded AWS, what template.yaml declares for a sizing run: the table, the event bus, one
    Lambda function per step (dispatched in-process) and the state machine from its DefinitionUri with its
    DefinitionSubstitutions resolved. `template_path` defaults to `use_stack_files()` (the checkout's, else the
    copy the installed package ships)."""
    from sizing.store import create_table

    template_path = Path(template_path) if template_path is not None else use_stack_files()
    tpl = load_template(template_path)
    resources: dict[str, Any] = tpl["Resources"]
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    create_table(ddb, TABLE, template_path)
    events = session.client("events", endpoint_url=endpoint)
    lam = session.client("lambda", endpoint_url=endpoint)
    sfn = session.client("stepfunctions", endpoint_url=endpoint)
    iam = session.client("iam", endpoint_url=endpoint)
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    role_arn = iam.create_role(RoleName=ROLE.rsplit("/", 1)[1], AssumeRolePolicyDocument=json.dumps(trust))[
        "Role"
    ]["Arn"]
    name, sm = next((n, r) for n, r in resources.items() if r["Type"] == STATE_MACHINE_RESOURCE_TYPE)
    props = sm["Properties"]
    values: dict[str, str] = {}
    handlers: dict[str, Callable[[Any, Any], Any]] = {}
    timeouts: dict[str, float] = {}
    default_timeout = tpl.get("Globals", {}).get("Function", {}).get("Timeout")
    for key, ref in props.get("DefinitionSubstitutions", {}).items():
        if isinstance(ref, dict) and "Fn::GetAtt" in ref:
            target = ref["Fn::GetAtt"]
            resource_name = target[0] if isinstance(target, list) else target.split(".")[0]
            fn = resources[resource_name]["Properties"]
            arn = lam.create_function(
                FunctionName=resource_name,
                Runtime="python3.12",
                Role=role_arn,
                Handler=fn["Handler"],
                Code={"ZipFile": EMPTY_ZIP},
            )["FunctionArn"]
            handlers[resource_name] = _load_handler(fn["CodeUri"], fn["Handler"])
            timeout = fn.get("Timeout", default_timeout)
            if isinstance(timeout, int | float):
                timeouts[resource_name] = float(timeout)
            values[key] = arn
        elif (
            isinstance(ref, dict)
            and "Ref" in ref
            and resources[ref["Ref"]]["Type"] == "AWS::Events::EventBus"
        ):
            events.create_event_bus(Name=BUS)
            values[key] = BUS
        else:
            raise RuntimeError(f"{name}: cannot resolve substitution {key}={ref!r} locally")
    _reset_handler_state()
    asl = (template_path.resolve().parent / props["DefinitionUri"]).read_text()
    arn = sfn.create_state_machine(
        name=f"llm-sizing-run-local-{uuid.uuid4().hex[:6]}",
        definition=_substitute(asl, values),
        roleArn=role_arn,
    )["stateMachineArn"]
    return LocalStack(endpoint, arn, handlers, values, timeouts)


#: How often the embedded AWS's server checks whether it was asked to stop: stopping waits up to this long
#: (werkzeug's default, 0.5 s, was half a second of every local run and test that starts one).
SHUTDOWN_POLL_S = 0.05


def keep_task_failure_causes() -> None:
    """Make the embedded Step Functions keep the cause a task sends with `SendTaskFailure` (idempotent).

    moto's SendTaskFailure handler passes the error on and drops the cause (moto 5.2's
    `StepFunctionResponse.send_task_failure` reads only `taskToken` and `error`), where AWS hands both to the
    state's Catch: a local run whose load test failed said `LoadTestFailed` and not why ("no request to ...
    succeeded during the sweep", the load generator's log tail). Its execution engine takes the cause; only the
    request handler's reading of it is replaced."""
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    if getattr(StepFunctionResponse.send_task_failure, "keeps_cause", False):
        return

    def send_task_failure(self: Any) -> Any:
        self.stepfunction_backend.send_task_failure(
            self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
        )
        return EmptyResult()

    send_task_failure.keeps_cause = True  # type: ignore[attr-defined]
    StepFunctionResponse.send_task_failure = send_task_failure  # type: ignore[method-assign]


def moto_server(ip_address: str = "127.0.0.1", port: int = 0) -> Any:
    """moto's threaded server, with DynamoDB's writes atomic as the real service's are.

    moto checks a conditional write's condition and then writes, with no lock between: two threads of its server
    can both pass `attribute_not_exists` for one key, so two containers holding one Idempotency-Key could both
    start a run (seen under load in tests/reliability/test_reliability_concurrency.py). DynamoDB applies each
    request atomically, so the embedded one applies DynamoDB requests one at a time. Other services keep their
    threads: an SQS long poll or a state machine's execution must not hold the table."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    table_lock = threading.Lock()

    class _AtomicTables(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)

            def serve(environ: dict[str, Any], start_response: Any) -> Any:
                if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
                    with table_lock:
                        return list(app(environ, start_response))
                return app(environ, start_response)

            self._server = make_server(
                self._ip_address, self._port, serve, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever(poll_interval=SHUTDOWN_POLL_S)

    keep_task_failure_causes()
    return _AtomicTables(ip_address=ip_address, port=port, verbose=False)


class EmbeddedAws:
    """moto's server in this process, configured to execute state machines; environment pointed at it."""

    def __init__(self) -> None:
        self._server: Any = None
        self.endpoint = ""
        self._saved: dict[str, str | None] = {}

    def start(self, extra_env: dict[str, str] | None = None) -> EmbeddedAws:
        import logging
        import urllib.request

        for noisy in ("werkzeug", "moto"):  # the embedded AWS's request log and its engine's traces
            logging.getLogger(noisy).setLevel(logging.CRITICAL)
        share_service_models()
        self._server = moto_server()
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        env = {**LOCAL_ENV, "AWS_ENDPOINT_URL": self.endpoint, "MOTO_PORT": str(port), **(extra_env or {})}
        for k, v in env.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        # moto keeps its backends per process: start each embedded AWS empty, then let it run state machines
        reset = urllib.request.Request(f"{self.endpoint}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(reset, timeout=5):
            pass
        body = json.dumps(
            {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        ).encode()
        req = urllib.request.Request(f"{self.endpoint}/moto-api/config", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=5):
            pass
        return self

    def session(self) -> Any:
        import boto3

        return boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        )

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved.clear()


# --- watching an execution -------------------------------------------------------------------------------
TERMINAL_EXECUTION = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
#: Characters of a task failure's cause kept in the run's error (a Lambda traceback can run to kilobytes).
FAILURE_CAUSE_CHARS = 1000


#: Longest pause, in seconds, between two reads of an execution's history while no new event comes. moto's
#: engine ignores `maxResults` and serializes the whole history on every read: ~50 ms for a one-candidate run,
#: more as events accumulate. An execution waiting on a load test adds none for many seconds, so its history is
#: read less and less often (doubling from `poll_s`), and again at once after the next new event.
HISTORY_QUIET_MAX_S = 4.0
#: Most of a core the history reads of one execution may take: after a read that took d seconds, the next waits
#: d / HISTORY_READ_SHARE at least. Without it, an execution that keeps adding events (a readiness loop checking
#: every second for a minute, ~9 events a check) was read every `poll_s` at a cost growing with its history:
#: quadratic, and most of what `sizing serve` spent while such runs waited.
HISTORY_READ_SHARE = 0.05


def watch_execution(
    sfn: Any,
    execution_arn: str,
    on_state: Callable[[str, str], None],
    poll_s: float = 0.5,
    timeout_s: float = 3600,
    cancelled: Callable[[], bool] = lambda: False,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Poll the execution; call on_state(event_type, state_name) for every state entered or failed (and
    `on_event` with every history event). Its status is read every `poll_s`; its history at that pace while
    events keep coming, less often while none do (`HISTORY_QUIET_MAX_S`) or while reading it costs much
    (`HISTORY_READ_SHARE`), and once more when it ends, so every event is reported. Returns at once (status ABORTED) when `cancelled()` says the run was cancelled: moto's
    engine does not interrupt a Map iteration on StopExecution as AWS does, so the runner stops waiting and
    tears down itself."""
    seen = 0
    deadline = time.monotonic() + timeout_s
    history_every = poll_s
    next_history = time.monotonic()

    def read_history() -> int:
        nonlocal seen
        history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        for ev in history[seen:]:
            if on_event is not None:
                on_event(ev)
            details = ev.get("stateEnteredEventDetails") or {}
            if details.get("name"):
                on_state("entered", details["name"])
            for key in ("taskFailedEventDetails", "executionFailedEventDetails"):
                if key in ev:
                    on_state("failed", f"{ev[key].get('error', '')}: {ev[key].get('cause', '')[:300]}")
        new, seen = len(history) - seen, len(history)
        return new

    while True:
        if cancelled():
            return {**sfn.describe_execution(executionArn=execution_arn), "status": "ABORTED"}
        desc = sfn.describe_execution(executionArn=execution_arn)
        if desc["status"] in TERMINAL_EXECUTION:
            read_history()
            return dict(desc)
        if time.monotonic() >= next_history:
            began = time.monotonic()
            history_every = poll_s if read_history() else min(2 * history_every, HISTORY_QUIET_MAX_S)
            spent = time.monotonic() - began
            next_history = time.monotonic() + max(history_every, spent / HISTORY_READ_SHARE)
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=execution_arn, cause=f"local run exceeded {timeout_s:.0f} s")
        time.sleep(poll_s)


@dataclass
class LocalRunResult:
    run: dict[str, Any]
    execution: dict[str, Any]
    architectures: list[dict[str, Any]]
    ranking: dict[str, Any] | None
    measurements: list[dict[str, Any]]
    out_dir: Path


def run_local(
    spec_raw: dict[str, Any],
    *,
    top_k: int = 3,
    endpoint_url: str | None = None,
    served_model: str | None = None,
    out_dir: Path,
    step_s: float = STEP_S,
    warmup_s: float = WARMUP_S,
    budget_usd: float | None = None,
    on_state: Callable[[str, str], None] | None = None,
    template_path: Path | None = None,
    timeout_s: float = 1800,
    extra_env: dict[str, str] | None = None,
    on_started: Callable[[Any, Any], None] | None = None,
) -> LocalRunResult:
    """Start the embedded AWS, run one sizing run through the real state machine, tear everything down."""
    from sizing.orchestrate.launchers import LocalLauncher
    from sizing.orchestrate.steps import close_local_twins
    from sizing.store import SizingStore

    out_dir.mkdir(parents=True, exist_ok=True)
    extra = {
        "LOADTEST_STEP_S": str(step_s),
        "LOADTEST_WARMUP_S": str(warmup_s),
        "SIZING_OUT_DIR": str(out_dir),
    }
    if endpoint_url:
        extra["SIZING_ENDPOINT"] = endpoint_url
    if served_model:
        extra["SIZING_SERVED_MODEL"] = served_model
    extra.update(extra_env or {})
    aws = EmbeddedAws().start(extra)
    try:
        session = aws.session()
        stack = deploy_local(session, aws.endpoint, template_path)
        sfn = session.client("stepfunctions", endpoint_url=aws.endpoint)
        store = SizingStore(TABLE, client=session.client("dynamodb", endpoint_url=aws.endpoint))
        with inprocess_lambdas(stack.handlers, stack.timeouts), _cleanup_on_signals():
            service = RunsService(store, stack.state_machine_arn, sfn_client=sfn)
            run = service.create_run(spec_raw, top_k=top_k, budget_usd=budget_usd, source="api")
            assert run.execution_arn
            if on_started:
                on_started(run, service)
            run_id = run.run_id
            execution = watch_execution(
                sfn,
                run.execution_arn,
                on_state or (lambda *_: None),
                timeout_s=timeout_s,
                cancelled=lambda: store.get_run(run_id).status == "CANCELLING",
            )
            if execution["status"] in ("ABORTED", "TIMED_OUT", "FAILED"):
                # FAILED too: when the RunFailed step itself failed (DynamoDB throttled it), the run was left
                # RUNNING while the execution's cause pointed at the run's error
                cause = (
                    first_failure(sfn, run.execution_arn)[:FAILURE_CAUSE_CHARS]
                    if execution["status"] == "FAILED"
                    else ""
                )
                finish_stopped_run(store, run.run_id, execution["status"], cause)
            final = store.get_run(run.run_id)
            architectures = store.get_architectures(run.run_id)
            ranking = store.get_ranking(run.run_id)
            measurements = [m.model_dump(mode="json") for m in store.list_measurements(run.run_id)]
        return LocalRunResult(
            final.model_dump(mode="json"), execution, architectures, ranking, measurements, out_dir
        )
    finally:
        LocalLauncher.stop_all()
        close_local_twins()
        aws.stop()


def finish_stopped_run(store: Any, run_id: str, execution_status: str, cause: str = "") -> None:
    """A stopped execution runs no Catch, and a failed one may have failed to record its cause: tear down what
    the run started (in AWS the janitor does this for runs it finds CANCELLING) and record the final state."""
    from sizing.orchestrate.launchers import LocalLauncher
    from sizing.orchestrate.steps import local_twins

    local_twins().teardown(run_id)
    LocalLauncher.stop_run(run_id)
    run = store.get_run(run_id)
    if run.status == "CANCELLING":
        store.transition(run_id, "CANCELLED", expected_from="CANCELLING")
    elif not run.finished:
        error = f"execution {execution_status.lower()}" + (f": {cause}" if cause else "")
        store.transition(run_id, "FAILED", error=error)


@contextlib.contextmanager
def _cleanup_on_signals() -> Iterator[None]:
    """SIGTERM/SIGINT end the run's children (twins, load generators) before the process goes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        from sizing.orchestrate.launchers import LocalLauncher
        from sizing.orchestrate.steps import close_local_twins

        LocalLauncher.stop_all(timeout_s=3)
        close_local_twins()
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def quiet_stdio() -> contextlib.AbstractContextManager[Any]:
    return contextlib.redirect_stdout(io.StringIO())


# --- the embedded default as a service: `sizing serve` ---------------------------------------------------------
#: Runs `sizing serve` executes at once; the others wait QUEUED. One by default: a run load-tests its candidates
#: one at a time for the same reason (two load tests sharing this machine's cores distort each other).
DEFAULT_MAX_ACTIVE_RUNS = 1
#: Seconds between two looks at an execution's history (a state of a local run lasts a second or more).
WATCH_POLL_S = 0.5
#: Seconds `stop()` waits for cancelled runs to tear down before ending their children itself.
STOP_WAIT_S = 10.0


#: The candidate loop's own end states (statemachines/sizing_run.asl.json's Map).
CANDIDATE_ENDS = frozenset({"Measured", "CandidateFailed", "TeardownFailed"})


@dataclass
class RunProgressState:
    """What a run's execution has done so far, read from its history: the last state entered and, per
    measured candidate, its architecture, load levels and the last state it entered."""

    state: str | None = None
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note(self, event: dict[str, Any]) -> None:
        details = event.get("stateEnteredEventDetails") or {}
        name = details.get("name")
        if not name:
            return
        self.state = name
        try:
            data = json.loads(details.get("input") or "{}")
        except (TypeError, ValueError):
            return
        cand = data.get("candidate") if isinstance(data, dict) else None
        if not isinstance(cand, dict) or "candidate_id" not in cand:
            return
        entry = self.candidates.setdefault(
            str(cand["candidate_id"]),
            {
                "candidate_id": str(cand["candidate_id"]),
                "architecture": (cand.get("architecture") or {}).get("id"),
                "levels": list(cand.get("levels") or []),
            },
        )
        entry["state"] = name

    def close(self, run_status: str) -> None:
        """The run has ended: a candidate its execution left in the middle of its loop (provisioning, waiting,
        load-testing) ends as the run did -- `Cancelled` when the run was cancelled, else `Stopped` -- and its
        resources were torn down with the run's. A candidate that reached its own end keeps it."""
        ended = "Cancelled" if run_status in ("CANCELLING", "CANCELLED") else "Stopped"
        for entry in self.candidates.values():
            if entry.get("state") not in CANDIDATE_ENDS:
                entry["state"] = ended


class LocalRuns:
    """The embedded AWS of `sizing serve`: one moto server for the server's lifetime with the stack
    template.yaml declares (table, bus, step functions dispatched in-process, the real state machine), and a
    runs service whose runs execute on it exactly as `sizing run`'s do -- twins (or `endpoint_url`), real
    Locust as child processes. At most `max_active` runs execute at once; the others wait QUEUED and start, in
    order, as slots free. A watcher per run follows its execution, records its progress and, when it is
    cancelled or its execution stops, tears down what it started and records the final state."""

    def __init__(
        self,
        *,
        out_dir: Path,
        endpoint_url: str | None = None,
        step_s: float = STEP_S,
        warmup_s: float = WARMUP_S,
        max_active: int = DEFAULT_MAX_ACTIVE_RUNS,
        template_path: Path | None = None,
        extra_env: dict[str, str] | None = None,
        timeout_s: float = 1800,
    ) -> None:
        if max_active < 1:
            raise ValueError("max_active must be at least 1")
        self.out_dir = out_dir
        self.endpoint_url = endpoint_url
        self.max_active = max_active
        self.template_path = template_path
        self.timeout_s = timeout_s
        self._env = {
            "LOADTEST_STEP_S": str(step_s),
            "LOADTEST_WARMUP_S": str(warmup_s),
            "SIZING_OUT_DIR": str(out_dir),
            **({"SIZING_ENDPOINT": endpoint_url} if endpoint_url else {}),
            **(extra_env or {}),
        }
        self._aws = EmbeddedAws()
        self._lambdas: contextlib.ExitStack | None = None
        self._lock = threading.Lock()
        self._active: set[str] = set()
        self._queue: list[str] = []
        self._watchers: dict[str, threading.Thread] = {}
        self._progress: dict[str, RunProgressState] = {}
        self._stopping = False
        self.endpoint = ""
        self.session: Any = None
        self.ddb: Any = None
        self.sfn: Any = None
        self.stack: LocalStack | None = None
        self.store: Any = None
        self.service: Any = None
        #: called with (run_id, status) once a run this server executed ends, whatever ended it (succeeded,
        #: failed, cancelled, timed out): what EventBridge's SizingRunCompleted/Failed rules do when deployed
        self.on_finished: Callable[[str, str], None] | None = None

    def start(self) -> LocalRuns:
        from sizing.store import SizingStore

        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._aws.start(self._env)
        self.endpoint = self._aws.endpoint
        self.session = self._aws.session()
        self.stack = deploy_local(self.session, self.endpoint, self.template_path)
        self.ddb = self.session.client("dynamodb", endpoint_url=self.endpoint)
        self.sfn = self.session.client("stepfunctions", endpoint_url=self.endpoint)
        self.store = SizingStore(TABLE, client=self.ddb)
        self._lambdas = contextlib.ExitStack()
        self._lambdas.enter_context(inprocess_lambdas(self.stack.handlers, self.stack.timeouts))
        self.service = _QueuedRunsService(self)
        return self

    # --- admission ---------------------------------------------------------------------------------------
    def admit(self, run: Any, start: Callable[[Any], Any]) -> Any:
        """Start `run` (PENDING) now when a slot is free, else mark it QUEUED behind the others."""
        with self._lock:
            if self._stopping:
                self.store.transition(run.run_id, "FAILED", expected_from="PENDING", error="server stopping")
                raise Unavailable("the local server is stopping; no run is started")
            if len(self._active) >= self.max_active:
                queued = self.store.transition(run.run_id, "QUEUED", expected_from="PENDING")
                self._queue.append(run.run_id)
                return queued
            self._active.add(run.run_id)
        return self._launch(run, start)

    def _launch(self, run: Any, start: Callable[[Any], Any]) -> Any:
        try:
            started = start(run)
        except BaseException:
            self._release(run.run_id)
            raise
        self._progress[run.run_id] = RunProgressState()
        watcher = threading.Thread(
            target=self._watch, args=(started,), name=f"run-{run.run_id[:8]}", daemon=True
        )
        self._watchers[run.run_id] = watcher
        watcher.start()
        return started

    def dequeue(self, run_id: str) -> bool:
        """Take a queued run out of the queue (it is being cancelled); False when it is not queued (any more)."""
        with self._lock:
            if run_id in self._queue:
                self._queue.remove(run_id)
                return True
            return False

    def forget(self, run_id: str) -> None:
        """Drop what this server followed of a run (it was deleted)."""
        with self._lock:
            self._progress.pop(run_id, None)
            self._watchers.pop(run_id, None)

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next run to start; None when the run is not queued."""
        with self._lock:
            return self._queue.index(run_id) + 1 if run_id in self._queue else None

    def _release(self, run_id: str) -> None:
        """A run's slot is free: start the queued runs that now fit, in order."""
        with self._lock:
            self._active.discard(run_id)
            nexts = []
            while self._queue and len(self._active) < self.max_active and not self._stopping:
                nxt = self._queue.pop(0)
                self._active.add(nxt)
                nexts.append(nxt)
        for nxt in nexts:
            run = self.store.get_run(nxt)
            if run.status != "QUEUED":  # cancelled while it waited
                self._release(nxt)
                continue
            try:
                self._launch(run, self.service.start_queued)
            except Exception:  # recorded on the run (FAILED: not started); the next one may still start
                continue

    # --- following a run ---------------------------------------------------------------------------------
    def _watch(self, run: Any) -> None:
        run_id = run.run_id
        progress = self._progress[run_id]
        try:
            execution = watch_execution(
                self.sfn,
                run.execution_arn,
                lambda *_: None,
                poll_s=WATCH_POLL_S,
                timeout_s=self.timeout_s,
                cancelled=lambda: self._stopping or self.store.get_run(run_id).status == "CANCELLING",
                on_event=progress.note,
            )
            if execution["status"] in ("ABORTED", "TIMED_OUT", "FAILED"):
                cause = (
                    first_failure(self.sfn, run.execution_arn)[:FAILURE_CAUSE_CHARS]
                    if execution["status"] == "FAILED"
                    else ""
                )
                if self._stopping and self.store.get_run(run_id).status == "RUNNING":
                    self.store.transition(run_id, "CANCELLING", expected_from="RUNNING")
                progress.close(self.store.get_run(run_id).status)  # before the run reads as ended
                finish_stopped_run(self.store, run_id, execution["status"], cause)
        except Exception as exc:  # a fault of the watcher must not leave the run RUNNING for good
            with contextlib.suppress(Exception):
                finish_stopped_run(self.store, run_id, "FAILED", f"{type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(Exception):
                progress.close(self.store.get_run(run_id).status)
            self._release(run_id)
            self._finished(run_id)

    def _finished(self, run_id: str) -> None:
        """Tell `on_finished` how the run ended (its terminal state in the store)."""
        if self.on_finished is None:
            return
        try:
            status = self.store.get_run(run_id).status
            if status in TERMINAL:
                self.on_finished(run_id, status)
        except Exception as exc:  # a notification that fails must not take the server down
            logging.getLogger(__name__).warning("run %s: completion not notified: %s", run_id, exc)

    def progress(self, run_id: str) -> dict[str, Any] | None:
        """The run's state-machine progress (None when this server did not execute it)."""
        position = self.queue_position(run_id)
        if position is not None:
            return {"state": None, "queue_position": position, "candidates": []}
        p = self._progress.get(run_id)
        if p is None:
            return None
        return {"state": p.state, "queue_position": None, "candidates": list(p.candidates.values())}

    def wait(self, run_id: str, timeout_s: float) -> bool:
        """Wait until the run's watcher is done; False when it still runs after `timeout_s`."""
        watcher = self._watchers.get(run_id)
        if watcher is not None:
            watcher.join(timeout_s)
            return not watcher.is_alive()
        return True

    def stop(self) -> None:
        """Cancel what still runs (queued runs end CANCELLED, running ones are torn down), end every child
        process, and stop the embedded AWS."""
        from sizing.orchestrate.launchers import LocalLauncher
        from sizing.orchestrate.steps import close_local_twins

        with self._lock:
            self._stopping = True
            queued, self._queue = list(self._queue), []
        if self.store is not None:
            for run_id in queued:
                with contextlib.suppress(Exception):
                    self.store.transition(run_id, "CANCELLED", expected_from="QUEUED", error="server stopped")
        deadline = time.monotonic() + STOP_WAIT_S
        for watcher in list(self._watchers.values()):
            watcher.join(max(0.0, deadline - time.monotonic()))
        LocalLauncher.stop_all(timeout_s=3)
        close_local_twins()
        if self._lambdas is not None:
            self._lambdas.close()
            self._lambdas = None
        self._aws.stop()


class _QueuedRunsService(RunsService):
    """The runs service of `sizing serve`: the deployed rules (validation, store, execution), with admission
    through the local runner (a run waits QUEUED when the limit of runs at once is reached)."""

    def __init__(self, runner: LocalRuns) -> None:
        assert runner.stack is not None
        super().__init__(runner.store, runner.stack.state_machine_arn, sfn_client=runner.sfn)
        self.runner = runner

    def _start(self, run: Any) -> Any:
        return self.runner.admit(run, super()._start)

    def start_queued(self, run: Any) -> Any:
        return super()._start(run)

    def delete_run(self, run_id: str) -> Any:
        """The deployed rule, and what this server keeps of the run beside the store: its folder under the runs
        folder (load-test tasks, results) and the progress it followed."""
        deleted = super().delete_run(run_id)
        folder = self.runner.out_dir / run_id
        if folder.resolve().parent == self.runner.out_dir.resolve():
            shutil.rmtree(folder, ignore_errors=True)
        self.runner.forget(run_id)
        return deleted

    def cancel_run(self, run_id: str) -> Any:
        from sizing.base.errors import Conflict

        run = self.store.get_run(run_id)
        if run.status == "QUEUED" and self.runner.dequeue(run_id):
            try:
                cancelled = self.store.transition(
                    run_id, "CANCELLED", expected_from="QUEUED", error="cancelled"
                )
            except Conflict:
                pass  # started meanwhile: cancel it as a running run
            else:
                self.runner._finished(run_id)  # never started, so no watcher tells of its end: say it here
                return cancelled
        return super().cancel_run(run_id)
