"""docs/events.md against the release events' pydantic models: the schemas on the page are the models' own,
and the examples on it are events the models accept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sizing.releases.eventdoc import DETAILS, render, schema_block
from sizing.releases.events import ModelReleaseRejected, parse_model_released
from sizing.releases.fanout import WatchJob
from sizing.releases.notify import ReleaseNote

PAGE = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def _first_example(section: str) -> dict[str, Any]:
    text = PAGE.read_text()
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```json\n(.*?)\n```", body, re.S)
    assert block, f"no example under {section}"
    return json.loads(block.group(1))


@pytest.mark.parametrize("name", list(DETAILS))
def test_each_schema_on_the_page_is_the_models_own(name: str) -> None:
    # given the page, when the model's schema is generated, then the page shows it as it is now
    assert schema_block(name) in PAGE.read_text(), "regenerate with: python -m sizing.releases.eventdoc"


def test_the_page_ends_with_every_generated_schema() -> None:
    assert PAGE.read_text().rstrip().endswith(render().rstrip())


def test_the_examples_on_the_page_are_events_the_models_accept() -> None:
    # given the examples of the page, when each is read by its model, then none is refused
    released = _first_example("ModelReleased (in)")
    assert parse_model_released(released).model_id == released["detail"]["model_id"]
    ready = _first_example("SizingEstimateReady (out)")
    assert ready["detail-type"] == "SizingEstimateReady"
    ReleaseNote.model_validate(ready["detail"])
    rejected = _first_example("ModelReleaseRejected (out)")
    assert rejected["detail-type"] == "ModelReleaseRejected"
    ModelReleaseRejected.model_validate(rejected["detail"])
    WatchJob.model_validate(_first_example("The fan-out job (internal)"))
