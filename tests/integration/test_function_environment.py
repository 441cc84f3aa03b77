"""Every function is wired the same way (`sizing.base.wiring`): its environment is parsed into its settings before the
first event, so a deployment missing a variable fails at once, naming the variable, whatever the function."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.lambdas import load_function

pytestmark = pytest.mark.integration

EVENTS = Path(__file__).resolve().parents[2] / "events"

#: (CodeUri, module, handler, sample event) of every function whose wiring this project owns.
FUNCTIONS = [
    ("functions/api/", "app", "lambda_handler", "api_get_catalog_models"),
    ("functions/slack/", "slack_commands", "lambda_handler", "slack_command"),
    ("functions/slack/", "slack_interactions", "lambda_handler", "slack_interaction"),
    ("functions/slack/", "slack_worker", "lambda_handler", "slack_estimate_job"),
    ("functions/slack/", "slack_notifier", "lambda_handler", "slack_run_completed"),
    ("functions/model_release/", "app", "lambda_handler", "model_release_inline"),
    ("functions/release_fanout/", "app", "lambda_handler", "release_fanout_jobs"),
    ("functions/release_poller/", "app", "lambda_handler", "scheduler_poll"),
    ("functions/janitor/", "app", "lambda_handler", "janitor_scheduled"),
    ("functions/steps/", "app", "estimate", "api_post_runs"),
]


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container whose template forgot the table: no TABLE_NAME (nor anything that names it)."""
    for name in ("TABLE_NAME", "STATE_MACHINE_ARN", "EVENT_BUS_NAME", "SLACK_SECRET_ID"):
        monkeypatch.delenv(name, raising=False)
    return


@pytest.mark.parametrize(("code_uri", "module", "handler", "sample"), FUNCTIONS)
def test_a_function_without_its_table_fails_before_handling_the_event_naming_the_variable(
    bare_environment: None, code_uri: str, module: str, handler: str, sample: str
) -> None:
    # given the function as a fresh container loads it, in an environment without TABLE_NAME
    fn = load_function(code_uri, module)
    services = fn.services if hasattr(fn, "services") else fn.deps.services  # its own, or its feature's
    services.set(None)  # a fresh container: nothing built yet
    event: dict[str, Any] = json.loads((EVENTS / f"{sample}.json").read_text())
    try:
        # when its first event arrives
        with pytest.raises(InvalidInput) as refused:
            getattr(fn, handler)(event, None)
    finally:
        services.set(None)
    # then it is refused by the environment check, which names the missing variable
    assert "environment is incomplete" in refused.value.message
    assert "TABLE_NAME" in {p.field for p in refused.value.problems}
