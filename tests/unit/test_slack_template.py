"""The Slack parts of template.yaml: Slack's two routes reach their functions without IAM auth (Slack cannot sign
SigV4), secrets are granted only to the functions that read them, the worker never retries (a retry would post
twice), and only Slack runs' completion events reach the notifier."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.store.schema import load_template


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return dict(load_template()["Resources"])


def _statements(fn: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in fn["Properties"].get("Policies", []):
        if isinstance(policy, dict) and "Statement" in policy:
            out += policy["Statement"]
    return out


@pytest.mark.parametrize(
    ("path", "function"),
    [("/slack/commands", "SlackCommandsFunction"), ("/slack/interactions", "SlackInteractionsFunction")],
)
def test_slack_routes_have_no_iam_auth_and_reach_their_function(
    resources: dict[str, Any], path: str, function: str
) -> None:
    route = resources["SizingApi"]["Properties"]["DefinitionBody"]["paths"][path]["post"]
    assert route["security"] == []
    assert f"${{{function}.Arn}}" in route["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    permission = next(
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Permission" and r["Properties"]["FunctionName"] == {"Ref": function}
    )
    assert permission["Properties"]["SourceArn"]["Fn::Sub"].endswith(f"/POST{path}")


def test_the_slack_secret_is_granted_to_the_functions_that_verify_or_post_and_not_to_the_worker(
    resources: dict[str, Any],
) -> None:
    def reads_secret(name: str) -> bool:
        return any(
            s.get("Action") == "secretsmanager:GetSecretValue" and s.get("Resource") == {"Ref": "SlackSecret"}
            for s in _statements(resources[name])
        )

    assert all(
        map(reads_secret, ("SlackCommandsFunction", "SlackInteractionsFunction", "SlackNotifierFunction"))
    )
    assert not reads_secret(
        "SlackWorkerFunction"
    )  # it answers through the response_url, which needs no token
    for name in ("SlackCommandsFunction", "SlackInteractionsFunction", "SlackNotifierFunction"):
        for statement in _statements(resources[name]):
            assert statement["Resource"] != "*", (name, statement)


def test_the_worker_is_never_retried_and_gives_up_when_the_response_url_expires(
    resources: dict[str, Any],
) -> None:
    config = resources["SlackWorkerFunction"]["Properties"]["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 0
    assert config["MaximumEventAgeInSeconds"] <= 30 * 60  # Slack's response_url lifetime


def test_only_slack_runs_completion_events_reach_the_notifier(resources: dict[str, Any]) -> None:
    rule = resources["SlackNotifierFunction"]["Properties"]["Events"]["RunFinished"]["Properties"]
    assert rule["EventBusName"] == {"Ref": "SizingEventBus"}
    assert rule["Pattern"]["detail-type"] == ["SizingRunCompleted", "SizingRunFailed"]
    assert rule["Pattern"]["detail"] == {"source": ["slack"]}
