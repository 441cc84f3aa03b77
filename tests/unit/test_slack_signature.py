"""Slack request signatures: only genuine, fresh, first-seen requests are acted on; everything else is a 401 and
nothing is started."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import pytest
from slack_sdk.signature import SignatureVerifier

from sizing.slack.bot import EstimateJob, SlackBot, SlackRequest, answer
from sizing.slack.client import SlackPoster
from sizing.slack.secrets import StaticSecrets
from sizing.slack.verify import MemoryReplayGuard

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_764_496_800.0


def sign(body: str, secret: str = SECRET, timestamp: float = NOW) -> dict[str, str]:
    """Headers as Slack sends them, signed by slack_sdk's own generator."""
    ts = str(int(timestamp))
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }


class Harness:
    """A bot whose estimate worker only records what it was handed (nothing leaves the process)."""

    def __init__(self, now: float = NOW) -> None:
        self.jobs: list[EstimateJob] = []
        self.bot = SlackBot(
            secrets=StaticSecrets(SECRET, "xoxb-test"),
            poster=SlackPoster(
                "http://127.0.0.1:9/api/", lambda: StaticSecrets(SECRET, "xoxb-test").bot_token()
            ),
            replay_guard=MemoryReplayGuard(clock=lambda: now),
            invoker=self.jobs.append,
            now=lambda: now,
        )

    def command(self, body: str, headers: dict[str, str]) -> tuple[int, dict[str, Any] | None]:
        out = answer(self.bot.command, SlackRequest(body=body, headers=headers))
        return out.status, out.body


@pytest.fixture
def command_body(event: Callable[[str], dict[str, Any]]) -> str:
    return str(event("slack_command")["body"])


def test_a_genuine_request_is_acknowledged_and_the_estimate_handed_off(command_body: str) -> None:
    # given a command signed with the app's signing secret just now
    h = Harness()
    # when it arrives
    status, body = h.command(command_body, sign(command_body))
    # then Slack gets an ephemeral acknowledgement, and the worker gets the workload and where to answer
    assert status == 200 and body is not None
    assert body["response_type"] == "ephemeral"
    assert "Sizing" in body["text"]
    assert len(h.jobs) == 1
    assert h.jobs[0].raw_spec["users"] == {"total": 10000}
    assert h.jobs[0].response_url == parse_qs(command_body)["response_url"][0]


Tamper = Callable[[str, dict[str, str]], tuple[str, dict[str, str]]]
REFUSED: dict[str, Tamper] = {
    "wrong secret": lambda body, _h: (body, sign(body, secret="not-the-app-secret")),
    "stale timestamp": lambda body, _h: (body, sign(body, timestamp=NOW - 5 * 60 - 1)),
    "timestamp from the future": lambda body, _h: (body, sign(body, timestamp=NOW + 5 * 60 + 1)),
    "body changed after signing": lambda body, h: (body.replace("10k", "90k"), h),
    "no signature header": lambda body, h: (body, {k: v for k, v in h.items() if k != "X-Slack-Signature"}),
    "no timestamp header": lambda body, h: (
        body,
        {k: v for k, v in h.items() if k != "X-Slack-Request-Timestamp"},
    ),
    "no headers at all": lambda body, _h: (body, {}),
    "timestamp not a number": lambda body, h: (body, {**h, "X-Slack-Request-Timestamp": "yesterday"}),
    "signature of another scheme": lambda body, h: (
        body,
        {**h, "X-Slack-Signature": "v1=" + h["X-Slack-Signature"][3:]},
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_forged_stale_or_incomplete_requests_are_refused_and_start_nothing(
    command_body: str, case: str
) -> None:
    # given a command that is not a fresh, genuine Slack request
    h = Harness()
    body, headers = REFUSED[case](command_body, sign(command_body))
    # when it arrives
    status, answer_body = h.command(body, headers)
    # then it is refused with 401, says nothing about the secret, and no estimate was started
    assert status == 401
    assert SECRET not in json.dumps(answer_body)
    assert h.jobs == []


def test_a_replayed_request_is_refused_the_second_time(command_body: str) -> None:
    # given a genuine command that was already handled once
    h = Harness()
    headers = sign(command_body)
    first, _ = h.command(command_body, headers)
    # when the very same signed request arrives again within the five minutes
    second, _ = h.command(command_body, headers)
    # then only the first started an estimate
    assert (first, second) == (200, 401)
    assert len(h.jobs) == 1


def test_headers_are_matched_whatever_their_case(command_body: str) -> None:
    # given API Gateway passing header names in lower case
    h = Harness()
    headers = {k.lower(): v for k, v in sign(command_body).items()}
    # when the command arrives
    status, _ = h.command(command_body, headers)
    # then it is accepted
    assert status == 200 and len(h.jobs) == 1


def test_an_interaction_with_a_bad_signature_starts_no_run(event: Callable[[str], dict[str, Any]]) -> None:
    # given a "Measure these" click whose signature was made with another secret
    started: list[Any] = []

    class Runs:
        def create_run(self, *args: Any, **kwargs: Any) -> Any:
            started.append(kwargs)
            raise AssertionError("no run may start")

    h = Harness()
    h.bot._runs = Runs  # type: ignore[assignment]
    body = str(event("slack_interaction")["body"])
    # when it arrives
    out = answer(h.bot.interaction, SlackRequest(body=body, headers=sign(body, secret="other")))
    # then it is refused and no run exists
    assert out.status == 401
    assert started == []


def test_the_real_clock_accepts_a_request_signed_now(command_body: str) -> None:
    # given the bot on the wall clock and a request signed this second
    jobs: list[EstimateJob] = []
    bot = SlackBot(
        secrets=StaticSecrets(SECRET, "xoxb-test"),
        poster=SlackPoster("http://127.0.0.1:9/api/", lambda: StaticSecrets(SECRET, "xoxb-test").bot_token()),
        replay_guard=MemoryReplayGuard(),
        invoker=jobs.append,
    )
    # when it arrives
    out = answer(
        bot.command, SlackRequest(body=command_body, headers=sign(command_body, timestamp=time.time()))
    )
    # then it is accepted
    assert out.status == 200 and len(jobs) == 1


def test_a_failing_replay_store_gets_an_apology_not_a_crash_and_starts_nothing(command_body: str) -> None:
    # given the replay guard's table throttling
    from botocore.exceptions import ClientError

    class Throttled:
        def first_time(self, signature: str, timestamp: int) -> bool:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")

    h = Harness()
    h.bot.replay_guard = Throttled()
    # when a genuine command arrives
    status, body = h.command(command_body, sign(command_body))
    # then the person is told to try again, no stack trace leaks, and nothing was started
    assert status == 200 and body is not None and body["response_type"] == "ephemeral"
    assert "try again" in body["text"] and "Traceback" not in json.dumps(body)
    assert h.jobs == []
