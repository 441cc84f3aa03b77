"""The Slack bot tells a run's thread how the run ended, reading the run from the store (the in-memory fake):
a refused run's reason, in the thread it came from; a run that did not come from Slack is left alone."""

from __future__ import annotations

import pytest
from fakes.slack import RecordingPoster
from fakes.store import InMemoryStore

from sizing.slack.bot import SlackBot
from sizing.slack.secrets import StaticSecrets
from sizing.slack.verify import MemoryReplayGuard
from sizing.store import Run, SlackThread


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def poster() -> RecordingPoster:
    return RecordingPoster()


@pytest.fixture
def bot(store: InMemoryStore, poster: RecordingPoster) -> SlackBot:
    return SlackBot(
        secrets=StaticSecrets("signing-secret", "xoxb-test"),
        poster=poster,
        replay_guard=MemoryReplayGuard(),
        store=lambda: store,  # type: ignore[arg-type, return-value]
    )


def test_a_refused_run_is_reported_in_its_thread_with_the_reason(
    bot: SlackBot, store: InMemoryStore, poster: RecordingPoster
) -> None:
    # given a run started from a Slack thread, refused by the budget guard
    thread = SlackThread(channel="C1", thread_ts="1700000000.000100", user="U1")
    store.create_run(Run(run_id="r1", model="m", spec={}, top_k=1, source="slack", slack=thread))
    store.transition("r1", "REFUSED", error="over the budget of $5.00")
    # when the run's completion event arrives
    told = bot.run_completed({"run_id": "r1", "status": "REFUSED"})
    # then the thread reads that the run was refused, and why
    assert told is True
    (sent,) = poster.sent
    assert (sent.channel, sent.thread_ts) == ("C1", "1700000000.000100")
    assert "refused" in sent.text and "over the budget of $5.00" in str(sent.blocks)


def test_a_run_not_started_from_slack_is_left_alone(
    bot: SlackBot, store: InMemoryStore, poster: RecordingPoster
) -> None:
    # given a run started through the API
    store.create_run(Run(run_id="r2", model="m", spec={}, top_k=1))
    # when its completion event arrives; then nothing is posted
    assert bot.run_completed({"run_id": "r2", "status": "SUCCEEDED"}) is False
    assert bot.run_completed({"run_id": "never-stored", "status": "SUCCEEDED"}) is False
    assert poster.sent == []


def test_a_measured_run_that_drifted_from_its_estimate_says_so_in_its_thread(
    bot: SlackBot, store: InMemoryStore, poster: RecordingPoster
) -> None:
    # given a run from a Slack thread whose measurement left its estimate's stated interval
    thread = SlackThread(channel="C1", thread_ts="1700000000.000200", user="U1")
    store.create_run(Run(run_id="r3", model="m", spec={}, top_k=1, source="slack", slack=thread))
    store.transition("r3", "RUNNING")
    store.transition("r3", "SUCCEEDED")
    line = "TTFT p95 +41% over the estimate on g6e TP1 vLLM 0.11; calibration refit queued"
    store.put_ranking("r3", {"architectures": [], "learning": {"drift_lines": [line]}})
    # when the run's completion event arrives
    assert bot.run_completed({"run_id": "r3", "status": "SUCCEEDED"}) is True
    # then the thread's message carries the drift line
    (sent,) = poster.sent
    assert line in str(sent.blocks)


def test_a_measured_run_within_its_interval_posts_no_drift_line(
    bot: SlackBot, store: InMemoryStore, poster: RecordingPoster
) -> None:
    # given a run from Slack whose measurements stayed inside the stated intervals
    thread = SlackThread(channel="C1", thread_ts="1700000000.000300", user="U1")
    store.create_run(Run(run_id="r4", model="m", spec={}, top_k=1, source="slack", slack=thread))
    store.transition("r4", "RUNNING")
    store.transition("r4", "SUCCEEDED")
    store.put_ranking("r4", {"architectures": [], "learning": {"drift_lines": []}})
    # when its completion event arrives; then no warning is posted
    assert bot.run_completed({"run_id": "r4", "status": "SUCCEEDED"}) is True
    (sent,) = poster.sent
    assert ":warning:" not in str(sent.blocks)
