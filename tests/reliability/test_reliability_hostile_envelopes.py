"""Hostile events at the event-driven doors: whatever EventBridge (or someone publishing on the bus) delivers to
the release function or the calibration function, and whatever a state hands a sizing-run step, the answer is the
parsed payload or an InvalidInput naming fields in plain words: never another exception, never a model class or
pydantic's own wording."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizing.base.errors import InvalidInput
from sizing.lambdas import load_function
from sizing.orchestrate import contracts
from sizing.releases.events import ModelReleased, parse_model_released

EVENTS = Path(__file__).resolve().parents[2] / "events"
#: Examples per property: enough to break every envelope and detail key several ways while the file stays within
#: a few seconds on this 2-core machine.
EXAMPLES = 200
#: What a field's problem never shows: pydantic's type wording, or the name of a model class.
LEAKS = ("instance of", "pydantic", "Envelope", "RunCompleted", "Candidate", "Endpoint", "Settings")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _sample(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text())


def _broken(sample: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The sample with some of its keys (envelope or detail) replaced by junk or dropped, or junk outright."""
    keys = st.sampled_from(sorted(sample) + [f"detail.{k}" for k in sample["detail"]] + ["surprise"])

    def apply(changes: list[tuple[str, Any, bool]]) -> dict[str, Any]:
        event = json.loads(json.dumps(sample))
        for key, value, drop in changes:
            where, _, inner = key.partition(".")
            target, name = (
                (event["detail"], inner)
                if inner and isinstance(event.get("detail"), dict)
                else (event, where)
            )
            if drop:
                target.pop(name, None)
            else:
                target[name] = value
        return event

    return st.one_of(JSON, st.lists(st.tuples(keys, JSON, st.booleans()), min_size=1, max_size=3).map(apply))


#: The end of a problem that quotes what was sent ("must be text (got 'Endpoint')").
QUOTED_INPUT = re.compile(r" \(got (.*)\)$", re.DOTALL)


def _own_words(message: str) -> str:
    """A problem's message without the value it quotes, where that value is a literal (the sender's own words,
    which may be anything, a class's name among them); a quoted object's repr stays, and is checked."""
    m = QUOTED_INPUT.search(message)
    if m:
        try:
            ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            return message
        return message[: m.start()]
    return message


def _plain(err: InvalidInput) -> None:
    assert err.message and all(p.field is not None for p in err.problems)
    shown = " ".join(_own_words(p.message) for p in err.problems)
    assert not any(leak in shown for leak in LEAKS), shown


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_broken(_sample("model_release_inline")))
def test_a_hostile_release_event_is_read_or_refused_in_plain_words(event: Any) -> None:
    try:
        assert isinstance(parse_model_released(event), ModelReleased)
    except InvalidInput as err:
        _plain(err)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_broken(_sample("calibration_run_measured")))
def test_a_hostile_completion_event_is_read_or_refused_in_plain_words(event: Any) -> None:
    fn = load_function("functions/calibration/")
    try:
        fn.parse_run_completed(event)
    except InvalidInput as err:
        _plain(err)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {"run_id": JSON, "candidate": JSON, "endpoint": JSON, "attempts": JSON, "settings": JSON}
        ),
    )
)
def test_a_hostile_state_input_is_read_or_refused_in_plain_words(event: Any) -> None:
    try:
        contracts.step_input(contracts.CheckReadyInput, event)
    except InvalidInput as err:
        _plain(err)
