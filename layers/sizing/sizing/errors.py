"""Domain errors. Each names the field at fault and says what is wrong, so the CLI (exit 2), the API (4xx JSON)
and Slack can show it to a person unchanged. Mapped to transport codes in one place per adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """One thing wrong with an input: where (`field`, a dotted path) and what (`message`)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class SizingError(Exception):
    """Base of every error the product reports to a user."""

    message: str
    problems: list[Problem] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    code: str = "invalid_input"

    def __str__(self) -> str:
        if not self.problems:
            return self.message
        lines = [self.message] + [f"  - {p}" for p in self.problems if p.message != self.message]
        return "\n".join(lines)


class InvalidInput(SizingError):
    """The input is malformed or impossible (HTTP 422, CLI exit 2)."""


class NotFound(SizingError):
    """A named thing (model, instance, run) does not exist (HTTP 404 for resources, 422 inside a body)."""

    def __init__(self, message: str, *, field_name: str = "", suggestions: list[str] | None = None) -> None:
        details: dict[str, Any] = {"suggestions": suggestions or []}
        super().__init__(message, [Problem(field_name, message)] if field_name else [], details, "not_found")


class Conflict(SizingError):
    """A state transition that is not allowed (HTTP 409)."""


def problems_from_pydantic(exc: Any, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ValidationError into one Problem per error, with dotted field paths."""
    out: list[Problem] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("function-after"))
        path = ".".join(x for x in (prefix, loc) if x)
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (not part of the spec; check the spelling)"
        out.append(Problem(path, msg))
    return out
