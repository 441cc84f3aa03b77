"""The default Slack poster against a local fake Slack Web API (pytest-httpserver on loopback)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sizing.base.errors import Unavailable
from sizing.releases import deps
from sizing.releases.compare import Comparison
from sizing.releases.notify import ArchitectureSummary, ReleaseNote, SlackNotifier, WebClientSlackPoster
from sizing.releases.settings import ReleaseSettings
from sizing.releases.watches import NotifyTargets, ReleaseWatch
from sizing.store import SlackThread

pytestmark = pytest.mark.integration

HEADLINE = "Llama-4-Scout-17B-16E on g6e.12xlarge: 38% cheaper than your current best at the same SLOs"


def a_watch(channel: str, thread_ts: str | None = None) -> ReleaseWatch:
    return ReleaseWatch(
        watch_id="w1",
        name="support chat",
        spec={"model": "meta-llama/Llama-3.1-70B"},
        model_pattern="meta-llama/Llama-4-*",
        current_model="meta-llama/Llama-3.1-70B",
        measure=True,
        top_k=3,
        notify=NotifyTargets(slack_channel=channel),
        created_at="2025-03-01T00:00:00.000000Z",
        source="slack",
        slack=SlackThread(channel=channel, thread_ts=thread_ts),
    )


def a_note(run_id: str | None = "run42") -> ReleaseNote:
    comparison = Comparison(
        released_model="meta-llama/Llama-4-Scout-17B-16E",
        current_model="meta-llama/Llama-3.1-70B",
        verdict="cheaper",
        headline=HEADLINE,
    )
    return ReleaseNote(
        watch_id="w1",
        watch_name="support chat",
        model_id="meta-llama/Llama-4-Scout-17B-16E",
        headline=HEADLINE,
        comparison=comparison,
        run_id=run_id,
        run_status="RUNNING",
    )


def test_the_default_poster_sends_the_headline_to_the_watchs_channel_and_thread(httpserver: Any) -> None:
    # given a fake Slack accepting chat.postMessage
    httpserver.expect_request("/api/chat.postMessage", method="POST").respond_with_json(
        {"ok": True, "channel": "C0SIZING01", "ts": "1743888000.000200"}
    )
    poster = WebClientSlackPoster(lambda: "xoxb-test-token", base_url=httpserver.url_for("/api/"))
    # when a release note is posted for a watch made from a Slack thread
    SlackNotifier(poster).notify(a_watch("C0SIZING01", thread_ts="1743800000.000100"), a_note())
    # then Slack got the headline and the run, in that thread, with the bot token
    ((request, _),) = httpserver.log
    sent = request.form.to_dict() if request.form else request.get_json()
    assert sent["channel"] == "C0SIZING01" and sent["thread_ts"] == "1743800000.000100"
    assert HEADLINE in sent["text"] and "run42" in sent["text"]
    assert request.headers["Authorization"] == "Bearer xoxb-test-token"


def test_a_slack_refusal_becomes_unavailable_not_a_crash(httpserver: Any) -> None:
    # given a Slack that refuses (the bot is not in the channel)
    httpserver.expect_request("/api/chat.postMessage").respond_with_json(
        {"ok": False, "error": "not_in_channel"}
    )
    poster = WebClientSlackPoster(lambda: "xoxb-test-token", base_url=httpserver.url_for("/api/"))
    # when / then
    with pytest.raises(Unavailable, match="Slack did not take the message"):
        SlackNotifier(poster).notify(a_watch("C0SIZING01"), a_note(run_id=None))


def test_the_token_is_read_only_when_a_message_is_sent() -> None:
    # given a poster whose token source would fail
    def no_token() -> str:
        raise AssertionError("the secret was read")

    # when it is built and never used, then the secret is never read
    WebClientSlackPoster(no_token)


def test_the_message_is_block_kit_with_the_verdict_the_best_architectures_and_the_run(
    httpserver: Any,
) -> None:
    # given a fake Slack, and a note with the best architectures on the new model
    httpserver.expect_request("/api/chat.postMessage", method="POST").respond_with_json(
        {"ok": True, "channel": "C0SIZING01", "ts": "1743888000.000300"}
    )
    poster = WebClientSlackPoster(lambda: "xoxb-test-token", base_url=httpserver.url_for("/api/"))
    note = a_note().model_copy(
        update={
            "top_architectures": [
                ArchitectureSummary(
                    deployment="eks",
                    instance_type="g6e.12xlarge",
                    usd_per_month=6210.5,
                    meets_slo=True,
                )
            ],
            "config_digest": "3f9a1c0e7b5d2a48",
        }
    )
    # when it is posted
    SlackNotifier(poster).notify(a_watch("C0SIZING01"), note)
    # then Slack got Block Kit: a header naming the model, the verdict, the architecture with its cost, the run
    ((request, _),) = httpserver.log
    sent = request.form.to_dict() if request.form else request.get_json()
    blocks = json.loads(sent["blocks"]) if isinstance(sent["blocks"], str) else sent["blocks"]
    assert blocks[0]["type"] == "header"
    assert "meta-llama/Llama-4-Scout-17B-16E" in blocks[0]["text"]["text"]
    shown = json.dumps(blocks)
    assert HEADLINE in shown and "g6e.12xlarge: $6,210/month, meets the SLOs" in shown
    assert "run42" in shown and "3f9a1c0e7b5d2a48" in shown


def test_release_notes_use_the_bots_secret_and_slack_api_url(httpserver: Any, monkeypatch: Any) -> None:
    # given the Slack bot's secret in Secrets Manager and SLACK_API_URL pointing at a fake Slack
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    httpserver.expect_request("/api/chat.postMessage", method="POST").respond_with_json(
        {"ok": True, "channel": "C0SIZING01", "ts": "1743888000.000400"}
    )
    with mock_aws():
        secret = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
            Name="llm-sizing-slack",
            SecretString=json.dumps({"signing_secret": "s3cr3t", "bot_token": "xoxb-from-the-bots-secret"}),
        )["ARN"]
        settings = ReleaseSettings(
            TABLE_NAME="llm-sizing-test",
            EVENT_BUS_NAME="llm-sizing-test",
            SLACK_SECRET_ID=secret,
            SLACK_API_URL=httpserver.url_for("/api/"),
        )
        with deps.services.override(deps.build(settings)):
            (slack,) = [n for n in deps.notifiers() if n.name == "slack"]
            # when a release note goes out
            slack.notify(a_watch("C0SIZING01"), a_note())
    # then it reached the configured Slack API with the bot's token
    ((request, _),) = httpserver.log
    assert request.headers["Authorization"] == "Bearer xoxb-from-the-bots-secret"
