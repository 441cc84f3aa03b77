"""Decorator for the Slack functions: parse the environment before the first event, so a missing variable
fails the cold start loudly instead of the first request that needs it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from sizing.slack import deps

F = TypeVar("F", bound=Callable[..., Any])


def init_environment(handler: F) -> F:
    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        deps.settings()
        return handler(event, context)

    return wrapper  # type: ignore[return-value]
