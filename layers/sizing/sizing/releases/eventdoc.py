"""The JSON Schemas of the release events' details, generated from their pydantic models, as docs/events.md
shows them. `python -m sizing.releases.eventdoc` prints the schema sections to paste there (a test checks the
page still matches the models)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from sizing.releases.events import (
    MODEL_RELEASE_REJECTED,
    MODEL_RELEASED,
    SIZING_ESTIMATE_READY,
    ModelReleased,
    ModelReleaseRejected,
)
from sizing.releases.fanout import WatchJob
from sizing.releases.notify import ReleaseNote

#: detail-type → the model of its `detail`, in the order the page lists them. `WatchJob` is the fan-out
#: queue's message body: internal, but documented for whoever redrives the dead-letter queue.
DETAILS: dict[str, type[BaseModel]] = {
    MODEL_RELEASED: ModelReleased,
    SIZING_ESTIMATE_READY: ReleaseNote,
    MODEL_RELEASE_REJECTED: ModelReleaseRejected,
    "WatchJob": WatchJob,
}


def schema(name: str) -> dict[str, Any]:
    return DETAILS[name].model_json_schema()


def schema_block(name: str) -> str:
    """The fenced JSON block of one detail's schema, as it appears on the page."""
    return "```json\n" + json.dumps(schema(name), indent=2) + "\n```"


def render() -> str:
    return "\n\n".join(f"### {name} schema\n\n{schema_block(name)}" for name in DETAILS) + "\n"


if __name__ == "__main__":
    print(render(), end="")
