"""Secrets come from Secrets Manager and never reach a log line or an error message: the Hugging Face token the
release poller reads (used against a Hub that fails in every way), scanned in everything logged at DEBUG, in
Powertools' JSON logs on stdout and in the errors raised."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from sizing.base.observability import logger as powertools_logger
from sizing.releases import deps
from sizing.releases.settings import ReleaseSettings

pytestmark = pytest.mark.integration

HF_TOKEN = "hf_R3l1abilityT3stT0kenValue0123456789"
REGION = "us-east-1"


class FailingHub:
    """A Hub that checks the token, then answers every way a Hub can fail."""

    def __init__(self, server: HTTPServer) -> None:
        self.authorizations: list[str] = []
        self.answers = iter(
            [(503, "busy"), (500, "oops"), (401, "bad token"), (200, "not json"), (404, "gone")]
        )
        server.expect_request("/api/models").respond_with_handler(self.handle)

    def handle(self, request: Request) -> Response:
        self.authorizations.append(request.headers.get("Authorization", ""))
        status, body = next(self.answers, (500, "oops"))
        return Response(body, status=status)


@pytest.fixture
def hub_env(httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[FailingHub]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name=REGION)
        arn = sm.create_secret(Name="llm-sizing/hf-token-test", SecretString=HF_TOKEN)["ARN"]
        settings = ReleaseSettings.model_validate(
            {"TABLE_NAME": "llm-sizing-test", "EVENT_BUS_NAME": "bus", "HF_HUB_URL": httpserver.url_for("/"),
             "HF_TOKEN_SECRET": arn}
        )  # fmt: skip
        deps.configure(settings)
        try:
            yield FailingHub(httpserver)
        finally:
            deps.configure()


def test_the_hub_token_is_used_but_never_logged_or_raised(hub_env, capsys, caplog):
    # given every logger at DEBUG (ours, Powertools', botocore's, urllib's)
    caplog.set_level(logging.DEBUG)
    powertools_logger.setLevel("DEBUG")
    errors: list[str] = []
    try:
        # when the poller's Hub client, built from the secret, meets a failing Hub several times
        hub = deps.hub()
        hub._sleep = lambda _s: None  # no real backoff in a test
        for _ in range(3):
            try:
                hub.list_models("meta-llama")
            except Exception as exc:  # every failure, whatever its class, is scanned below
                errors.append(f"{exc!s} {exc!r} {json.dumps(getattr(exc, 'details', {}), default=str)}")
                powertools_logger.exception("hub failed")
    finally:
        powertools_logger.setLevel("INFO")
    captured = capsys.readouterr()
    # then the token was sent to the Hub (so it was really in play) ...
    assert hub_env.authorizations and all(a == f"Bearer {HF_TOKEN}" for a in hub_env.authorizations)
    assert errors
    # ... and appears in no log line, no traceback and no error text
    text = captured.out + captured.err + caplog.text + " ".join(errors)
    assert "hub failed" in text  # the logs were captured
    assert HF_TOKEN not in text and HF_TOKEN[3:] not in text
