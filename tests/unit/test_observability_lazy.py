"""The tracer is built on first use: importing a handler never imports the X-Ray SDK, a disabled tracer runs the
decorated function as written, and the API's routes keep the signatures their validation reads."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sizing.base import observability
from sizing.base.observability import LazyTracer, tracing_disabled

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_api_handler_imports_neither_x_ray_nor_the_openapi_models() -> None:
    # given a fresh interpreter with the API function's environment
    env = {
        **os.environ,
        "TABLE_NAME": "llm-sizing-test",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(ROOT / 'functions/api/app.py')!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "heavy = ('aws_xray_sdk', 'aws_lambda_powertools.event_handler.openapi.models', 'numpy')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    # when the handler module is imported
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    # then none of the heavy modules came with it (they load when a request needs them)
    assert out.stdout.strip() == ""


def test_a_disabled_tracer_runs_the_function_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    # given tracing switched off as the template's local runs and the tests switch it off
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    tracer = LazyTracer()

    @tracer.capture_method
    def double(x: int, *, by: int = 2) -> int:
        return x * by

    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict, context: object) -> dict:
        return {"seen": event["n"]}

    # when they are called
    # then they answer as the undecorated functions do, and no tracer (nor X-Ray) was built for them
    assert double(3) == 6 and double(3, by=3) == 9
    assert handler({"n": 1}, None) == {"seen": 1}
    assert tracer._tracer is None


def test_a_traced_route_keeps_its_signature_for_request_validation() -> None:
    # given a function decorated as the API's routes are
    tracer = LazyTracer()

    def route(run_id: str, limit: int = 10) -> dict:
        return {"run_id": run_id, "limit": limit}

    traced = tracer.capture_method(route)
    # then its name, documentation and parameters are the route's own (Powertools reads them to validate)
    assert traced.__name__ == "route"
    assert inspect.signature(traced) == inspect.signature(route)


def test_tracing_follows_powertools_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the environment of a Lambda function with tracing on
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "false")
    monkeypatch.setenv("LAMBDA_TASK_ROOT", "/var/task")
    for name in observability.EMULATOR_ENVS:
        monkeypatch.delenv(name, raising=False)
    # then tracing is on; switched off, outside Lambda or under SAM local it is off
    assert tracing_disabled() is False
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    assert tracing_disabled() is True
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "false")
    monkeypatch.setenv("AWS_SAM_LOCAL", "true")
    assert tracing_disabled() is True
    monkeypatch.delenv("AWS_SAM_LOCAL")
    monkeypatch.delenv("LAMBDA_TASK_ROOT")
    assert tracing_disabled() is True
