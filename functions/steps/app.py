"""Step functions of the sizing run: one handler per state of statemachines/sizing_run.asl.json.

Each handler carries the house decorator stack and calls exactly one `sizing.orchestrate.steps` function; the
parts (store, provisioners, load-test launcher, catalog) are built once per container from the environment
(`services`, a `sizing.base.wiring.Wiring`: tests give their own with `services.override(...)`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.observability import logger, metrics, tracer
from sizing.base.wiring import Wiring, init_environment
from sizing.orchestrate import steps

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


services: Wiring[steps.Services] = Wiring(steps.build_services)


def state_handler(step: Callable[[dict[str, Any], steps.Services], dict[str, Any]]) -> Handler:
    """The Lambda handler of one state: run `step`, which reads its input as its typed contract (`step_input`:
    a missing or malformed key is InvalidInput naming it)."""

    @init_environment(services)
    @logger.inject_lambda_context(correlation_id_path="run_id")
    @metrics.log_metrics
    @tracer.capture_lambda_handler
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        metrics.add_metric(name=f"{name}_invocations", unit=MetricUnit.Count, value=1)
        return step(event, services())

    name = step.__name__.removesuffix("_step")
    handle.__name__ = handle.__qualname__ = name
    return handle


estimate = state_handler(steps.estimate_step)
provision = state_handler(steps.provision_step)
check_ready = state_handler(steps.check_ready_step)
start_loadtest = state_handler(steps.start_loadtest_step)
teardown = state_handler(steps.teardown_step)
collect = state_handler(steps.collect_step)
fail_run = state_handler(steps.fail_run_step)
