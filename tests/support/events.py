"""The sample events of events/, loaded by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str) -> dict[str, Any]:
    """A sample event from events/ by name (with or without .json); a fresh copy each time."""
    path = EVENTS / (name if name.endswith(".json") else f"{name}.json")
    return json.loads(path.read_text())
