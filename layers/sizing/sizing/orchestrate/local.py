"""The embedded default: the sizing run on one machine with no AWS account.

moto (in-process server) is the AWS: its Step Functions engine executes the *same* ASL file with the
substitutions template.yaml declares, Lambda tasks are dispatched in-process to the handlers template.yaml names
(`functions/steps/app.py`), DynamoDB and EventBridge are moto's. Candidates are provisioned as local twins (or the
`--endpoint` given) and measured by real Locust in child processes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sizing.store.schema import DEFAULT_TEMPLATE, REPO_ROOT, load_template

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
    "MAP_MAX_CONCURRENCY": "1",
    "HEARTBEAT_S": "120",
    "LOADTEST_TIMEOUT_S": "900",
    "LOADTEST_WORKERS": "0",
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


def deploy_local(session: Any, endpoint: str, template_path: Path = DEFAULT_TEMPLATE) -> LocalStack:
    """Create, on the embedded AWS, what template.yaml declares for a sizing run: the table, the event bus, one
    Lambda function per step (dispatched in-process) and the state machine from its DefinitionUri with its
    DefinitionSubstitutions resolved."""
    from sizing.store import create_table

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
    asl = (REPO_ROOT / props["DefinitionUri"]).read_text()
    arn = sfn.create_state_machine(
        name=f"llm-sizing-run-local-{uuid.uuid4().hex[:6]}",
        definition=_substitute(asl, values),
        roleArn=role_arn,
    )["stateMachineArn"]
    return LocalStack(endpoint, arn, handlers, values, timeouts)


class EmbeddedAws:
    """moto's server in this process, configured to execute state machines; environment pointed at it."""

    def __init__(self) -> None:
        self._server: Any = None
        self.endpoint = ""
        self._saved: dict[str, str | None] = {}

    def start(self, extra_env: dict[str, str] | None = None) -> EmbeddedAws:
        import logging
        import urllib.request

        from moto.server import ThreadedMotoServer

        for noisy in ("werkzeug", "moto"):  # the embedded AWS's request log and its engine's traces
            logging.getLogger(noisy).setLevel(logging.CRITICAL)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
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


def watch_execution(
    sfn: Any,
    execution_arn: str,
    on_state: Callable[[str, str], None],
    poll_s: float = 0.5,
    timeout_s: float = 3600,
    cancelled: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Poll the execution; call on_state(event_type, state_name) for every state entered or failed. Returns
    at once (status ABORTED) when `cancelled()` says the run was cancelled: moto's engine does not interrupt a
    Map iteration on StopExecution as AWS does, so the runner stops waiting and tears down itself."""
    seen = 0
    deadline = time.monotonic() + timeout_s
    while True:
        if cancelled():
            return {**sfn.describe_execution(executionArn=execution_arn), "status": "ABORTED"}
        history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        for ev in history[seen:]:
            details = ev.get("stateEnteredEventDetails") or {}
            if details.get("name"):
                on_state("entered", details["name"])
            for key in ("taskFailedEventDetails", "executionFailedEventDetails"):
                if key in ev:
                    on_state("failed", f"{ev[key].get('error', '')}: {ev[key].get('cause', '')[:300]}")
        seen = len(history)
        desc = sfn.describe_execution(executionArn=execution_arn)
        if desc["status"] in TERMINAL_EXECUTION:
            return dict(desc)
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
    out_dir: Path,
    step_s: float = 8.0,
    warmup_s: float = 2.0,
    budget_usd: float | None = None,
    on_state: Callable[[str, str], None] | None = None,
    template_path: Path = DEFAULT_TEMPLATE,
    timeout_s: float = 1800,
    extra_env: dict[str, str] | None = None,
    on_started: Callable[[Any, Any], None] | None = None,
) -> LocalRunResult:
    """Start the embedded AWS, run one sizing run through the real state machine, tear everything down."""
    from sizing.orchestrate.launchers import LocalLauncher
    from sizing.orchestrate.steps import close_local_twins
    from sizing.service.runs import RunsService
    from sizing.store import SizingStore

    out_dir.mkdir(parents=True, exist_ok=True)
    extra = {
        "LOADTEST_STEP_S": str(step_s),
        "LOADTEST_WARMUP_S": str(warmup_s),
        "SIZING_OUT_DIR": str(out_dir),
    }
    if endpoint_url:
        extra["SIZING_ENDPOINT"] = endpoint_url
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
                cause = first_failure(sfn, run.execution_arn) if execution["status"] == "FAILED" else ""
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


def first_failure(sfn: Any, execution_arn: str) -> str:
    """The first task failure of an execution as `Error: cause` (the root cause; later ones are its echoes)."""
    history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    for ev in history:
        for key, details in ev.items():
            if key.endswith("FailedEventDetails") and key != "executionFailedEventDetails":
                return f"{details.get('error', '')}: {details.get('cause', '')}"[:FAILURE_CAUSE_CHARS]
    return ""


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
