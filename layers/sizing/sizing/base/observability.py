"""Logger, tracer and metrics, created once for every handler (Powertools reads service name, namespace and log
level from the environment set in template.yaml).

The tracer is built on its first traced call, not at import: Powertools' `Tracer()` imports the X-Ray SDK (and
botocore's session with it) even when tracing is disabled, about half of the API handler's cold import
(`python -X importtime`, benchmarks/api.py). Where tracing is disabled (`POWERTOOLS_TRACE_DISABLED`, or outside
Lambda, Powertools' own rule) the SDK is never imported and the decorated functions run as written."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

F = TypeVar("F", bound=Callable[..., Any])

#: Powertools' switch and the variables its Tracer reads to tell Lambda from an emulator (the names of
#: aws_lambda_powertools.shared.constants; https://docs.powertools.aws.dev/lambda/python/latest/core/tracer/):
#: tracing is off when the switch is true, outside Lambda (no task root) and under SAM local or Chalice local.
TRACE_DISABLED_ENV = "POWERTOOLS_TRACE_DISABLED"
LAMBDA_TASK_ROOT_ENV = "LAMBDA_TASK_ROOT"
EMULATOR_ENVS = ("AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE")
#: Values Powertools reads as true (aws_lambda_powertools.shared.functions.strtobool).
TRUTHY = ("1", "y", "yes", "t", "true", "on")


def tracing_disabled() -> bool:
    """Powertools' rule for a disabled tracer, read from the environment now."""
    if os.getenv(TRACE_DISABLED_ENV, "false").strip().lower() in TRUTHY:
        return True
    return not os.getenv(LAMBDA_TASK_ROOT_ENV) or any(os.getenv(e) for e in EMULATOR_ENVS)


class LazyTracer:
    """Powertools' `Tracer`, built on first use. `capture_lambda_handler` and `capture_method` decorate at
    import as usual; the first call builds the tracer (or, with tracing disabled, runs the function undecorated
    from then on). Any other attribute builds the tracer and is Powertools' own."""

    def __init__(self) -> None:
        self._tracer: Tracer | None = None
        self._lock = threading.Lock()

    def get(self) -> Tracer:
        with self._lock:
            if self._tracer is None:
                from aws_lambda_powertools import Tracer

                self._tracer = Tracer()
            return self._tracer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)

    def capture_lambda_handler(self, lambda_handler: F | None = None, **options: Any) -> Any:
        if lambda_handler is None:
            return functools.partial(self.capture_lambda_handler, **options)
        return self._deferred(lambda_handler, "capture_lambda_handler", options)

    def capture_method(self, method: F | None = None, **options: Any) -> Any:
        if method is None:
            return functools.partial(self.capture_method, **options)
        if not _plain(method):
            # coroutines, generators and context managers: Powertools wraps each kind its own way
            return self.get().capture_method(method, **options)
        return self._deferred(method, "capture_method", options)

    def _deferred(self, fn: F, how: str, options: dict[str, Any]) -> F:
        chosen: list[Callable[..., Any]] = []

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if not chosen:
                chosen.append(fn if tracing_disabled() else getattr(self.get(), how)(fn, **options))
            return chosen[0](*args, **kwargs)

        return traced  # type: ignore[return-value]


def _plain(fn: Callable[..., Any]) -> bool:
    return not (
        inspect.iscoroutinefunction(fn)
        or inspect.isgeneratorfunction(fn)
        or inspect.isasyncgenfunction(fn)
        or hasattr(fn, "__wrapped__")  # already decorated (contextmanager and the like)
    )


logger = Logger()
tracer = LazyTracer()
metrics = Metrics()

#: botocore writes whole response bodies at DEBUG (a GetSecretValue answer with its SecretString: a Slack token,
#: a Hugging Face token) and whole request bodies (a secret being written). Whatever level a function's logs are
#: turned to, these loggers stop at INFO.
SECRET_BEARING_LOGGERS = ("botocore.parsers", "botocore.endpoint")
for _name in SECRET_BEARING_LOGGERS:
    logging.getLogger(_name).setLevel(logging.INFO)
