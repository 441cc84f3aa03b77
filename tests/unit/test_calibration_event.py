"""The calibration function reads its trigger, a `SizingRunCompleted` event, through Powertools' EventBridge
envelope: the run it names is read, and a delivery that is not such an event is refused naming the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.lambdas import load_function


def test_the_completion_event_names_its_run(load_event: Callable[[str], dict[str, Any]]) -> None:
    # given the sample completion of a measured run
    fn = load_function("functions/calibration/")
    # when it is read
    completed = fn.parse_run_completed(load_event("calibration_run_measured"))
    # then the run and the rest of its detail are there
    assert completed.detail.run_id == "0f8e1c2d3b4a59687766554433221100"
    assert completed.detail_type == "SizingRunCompleted"
    assert completed.detail.model_extra["ranking"]["learning"]["measured_levels"] == 3


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"detail": None}, "detail"),
        ({"region": 7}, "region"),
        ({"detail": {"run_id": ["x"]}}, "detail.run_id"),
    ],
)
def test_a_delivery_that_is_no_completion_event_is_refused_naming_the_field(
    load_event: Callable[[str], dict[str, Any]], change: dict[str, Any], field: str
) -> None:
    # given the sample with one field broken
    fn = load_function("functions/calibration/")
    event = {**load_event("calibration_run_measured"), **change}
    # when it is read
    with pytest.raises(InvalidInput) as err:
        fn.parse_run_completed(event)
    # then the field is named in plain words
    assert [p.field for p in err.value.problems] == [field]
    assert not any("RunCompleted" in p.message for p in err.value.problems)
