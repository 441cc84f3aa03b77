"""The run's completion events, one declaration for who sends them (the state machine's Notify* states, the janitor
closing a run whose execution ended) and who reads them (the Slack thread, the calibration refit): EventBridge
`SizingRunCompleted` / `SizingRunFailed` from source `llm-sizing`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sizing.base.strict import Open

#: As statemachines/sizing_run.asl.json's Notify* states send them.
EVENT_SOURCE = "llm-sizing"
RUN_COMPLETED = "SizingRunCompleted"
RUN_FAILED = "SizingRunFailed"


class RunCompletedDetail(Open):
    """The detail of a completion event as its readers take it: the run id, which is all they need (the rest is
    read from the store), and the final status and error where the sender states them. Other fields the
    orchestration adds (the ranking, its learning block) are the EventBridge rules' to match: kept, unread."""

    run_id: str = Field(min_length=1, max_length=128)
    status: str | None = None
    reason: str | None = None
    #: a string, or Step Functions' {"Error", "Cause"}
    error: Any = None
