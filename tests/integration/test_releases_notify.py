"""The default Slack poster against a local fake Slack Web API (pytest-httpserver on loopback)."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.releases.compare import Comparison
from sizing.releases.notify import ReleaseNote, SlackNotifier, WebClientSlackPoster
from sizing.releases.watches import NotifyTargets, ReleaseWatch
from sizing.service.errors import Unavailable
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
