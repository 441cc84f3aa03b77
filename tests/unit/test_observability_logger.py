"""Log lines belong to their invocation: no line carries another invocation's run_id or function name."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from fakes.lambda_context import lambda_context

from sizing.base.observability import InvocationLogger


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_a_run_id_and_function_name_do_not_outlive_their_invocation() -> None:
    # given two handlers sharing one logger, as the functions of one process do (and `sizing serve`'s dispatch)
    out = io.StringIO()
    logger = InvocationLogger(service="test", logger_handler=logging.StreamHandler(out))

    @logger.inject_lambda_context(correlation_id_path="run_id")
    def start_run(event: dict[str, Any], context: Any) -> None:
        logger.append_keys(run_id=event["run_id"])
        logger.info("run started")

    @logger.inject_lambda_context
    def notify(event: dict[str, Any], context: Any) -> None:
        logger.info("notified")

    # when the first runs, a line is logged between invocations, then the second runs
    start_run({"run_id": "r-1"}, lambda_context("api", 30))
    logger.info("between invocations")
    notify({}, lambda_context("slack-notifier", 30))
    started, between, notified = _lines(out)
    # then only the first invocation's own line carries its run_id, correlation id and function name
    assert (started["run_id"], started["correlation_id"], started["function_name"]) == ("r-1", "r-1", "api")
    for line in (between, notified):
        assert "run_id" not in line and line.get("correlation_id") is None
    assert "function_name" not in between
    assert notified["function_name"] == "slack-notifier"
