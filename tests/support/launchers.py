"""A load-test launcher for tests of the run's steps: it keeps each task it is asked to start and starts nothing."""

from __future__ import annotations

from typing import Any


class KeepsTask:
    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []

    def start(self, task: dict[str, Any]) -> dict[str, Any]:
        self.tasks.append(task)
        return {"launched": "kept"}
