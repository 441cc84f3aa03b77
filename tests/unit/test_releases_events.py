"""Reading ModelReleased events and watch patterns: what is accepted, and how a refusal names the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sizing.base.errors import InvalidInput
from sizing.releases.events import parse_model_released, parse_poll_request
from sizing.releases.watches import WatchRequest, matches

EVENTS = Path(__file__).resolve().parents[2] / "events"


def test_the_sample_releases_read_with_inline_and_url_configs(
    load_event: Callable[[str], dict[str, Any]],
) -> None:
    inline = parse_model_released(load_event("model_release_inline"))
    by_url = parse_model_released(load_event("model_release_url"))
    assert inline.model_id == by_url.model_id == "meta-llama/Llama-4-Scout-17B-16E"
    assert isinstance(inline.config, dict) and inline.config_url is None
    assert (
        by_url.config_url
        == "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E/resolve/main/config.json"
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_id": "not-an-org-slash-name"}, "detail.model_id"),
        ({"model_id": "meta-llama/Llama 4"}, "detail.model_id"),
        ({"config": ["not", "an", "object"]}, "detail.config"),
        ({"config": "file:///etc/passwd"}, "detail.config"),
        ({"source": ""}, "detail.source"),
        ({"surprise": True}, "detail.surprise"),
    ],
)
def test_a_bad_release_detail_is_refused_naming_the_field(
    load_event: Callable[[str], dict[str, Any]], change: dict[str, Any], field: str
) -> None:
    # given
    event = load_event("model_release_inline")
    event["detail"].update(change)
    # when
    with pytest.raises(InvalidInput) as err:
        parse_model_released(event)
    # then
    assert any(p.field.startswith(field) for p in err.value.problems), err.value.problems


def test_another_detail_type_is_not_taken_for_a_release(load_event: Callable[[str], dict[str, Any]]) -> None:
    event = load_event("model_release_inline")
    event["detail-type"] = "SizingRunCompleted"
    with pytest.raises(InvalidInput) as err:
        parse_model_released(event)
    assert err.value.problems[0].field == "detail-type"


def test_the_sample_schedule_event_reads(load_event: Callable[[str], dict[str, Any]]) -> None:
    assert parse_poll_request(load_event("scheduler_poll")).scheduled_time == "2025-04-05T19:00:00Z"


@pytest.mark.parametrize(
    ("pattern", "model_id", "expected"),
    [
        ("meta-llama/Llama-4-*", "meta-llama/Llama-4-Scout-17B-16E", True),
        ("meta-llama/Llama-4-*", "META-LLAMA/llama-4-maverick-17B-128E", True),
        ("meta-llama/Llama-4-*", "meta-llama/Llama-Guard-4-12B", False),
        ("meta-llama/Llama-4-*", "other-org/Llama-4-Scout-17B-16E", False),
        ("Qwen/Qwen3-*", "Qwen/Qwen3-Next-80B-A3B-Instruct", True),
        ("Qwen/Qwen3-?B", "Qwen/Qwen3-8B", True),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Base", False),
    ],
)
def test_patterns_match_release_ids(pattern: str, model_id: str, expected: bool) -> None:
    assert matches(pattern, model_id) is expected


@pytest.mark.parametrize(
    "pattern", ["*/Llama-4-*", "meta-llama", "meta-llama/", "meta llama/Llama-4-*", "a/b/c"]
)
def test_a_watch_pattern_must_name_its_organisation(pattern: str) -> None:
    with pytest.raises(ValidationError) as err:
        WatchRequest(name="w", spec={}, model_pattern=pattern)
    assert err.value.errors()[0]["loc"] == ("model_pattern",)


@pytest.mark.parametrize(
    ("change", "drop", "field"),
    [
        (None, None, "event"),
        ({}, "detail-type", "detail-type"),
        ({"account": 7}, None, "account"),
        ({}, "region", "region"),
        ({"time": "yesterday"}, None, "time"),
        ({"detail": "not an object"}, None, "detail"),
    ],
)
def test_a_hostile_envelope_is_refused_naming_its_field_in_plain_words(
    load_event: Callable[[str], dict[str, Any]], change: dict[str, Any] | None, drop: str | None, field: str
) -> None:
    # given the sample release with its envelope broken (or a list instead of an envelope)
    sample = load_event("model_release_inline")
    event: Any = ["not", "an", "object"] if change is None else {**sample, **change}
    if drop:
        del event[drop]
    # when it is read
    with pytest.raises(InvalidInput) as err:
        parse_model_released(event)
    # then it is not taken for an EventBridge event, the field is named, and no model class is
    assert err.value.message == "not an EventBridge event"
    assert [p.field for p in err.value.problems] == [field]
    assert not any("Envelope" in p.message or "pydantic" in p.message for p in err.value.problems)


def test_a_refused_release_still_names_the_model_it_announced(
    load_event: Callable[[str], dict[str, Any]],
) -> None:
    # given a release whose detail names its model but is otherwise wrong
    event = load_event("model_release_inline")
    event["detail"]["source"] = ""
    # when it is read
    with pytest.raises(InvalidInput) as err:
        parse_model_released(event)
    # then the refusal can say which model it was about
    assert err.value.details["model_id"] == "meta-llama/Llama-4-Scout-17B-16E"
    assert [p.field for p in err.value.problems] == ["detail.source"]
