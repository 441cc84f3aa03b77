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


#: Closest field names offered for an unknown one (difflib's similarity cut-off: 0.6 is its default, which
#: catches dropped or swapped letters -- totl, ouput, contraints -- without suggesting unrelated names).
SUGGEST_CUTOFF = 0.6
#: Characters of a refused value quoted back in a message (enough to recognise it, bounded for junk input).
QUOTED_CHARS = 40


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTED_CHARS else text[: QUOTED_CHARS - 3] + "..."


def _is_branch(segment: str) -> bool:
    """A location segment naming a union member or validator (literal['a','b'], list[constrained-float],
    function-after[...]), not a field: pydantic's internals, never shown to a person."""
    return "[" in segment or segment.startswith("function-")


def _model_at(model: Any, path: list[str]) -> Any:
    """The pydantic model class at a field path of `model` (None when the path leaves the models)."""
    import types
    import typing

    from pydantic import BaseModel

    current = model
    for name in path:
        fields = getattr(current, "model_fields", None)
        if fields is None or name not in fields:
            return None
        annotation = fields[name].annotation
        candidates = [annotation]
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            candidates = list(typing.get_args(annotation))
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return None
    return current


def _aliases(model: Any) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def unknown_field_message(name: str, known: list[str]) -> str:
    """'unknown field; did you mean 'total'?' -- or the fields that are allowed there."""
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=SUGGEST_CUTOFF)
    if close:
        return f"unknown field; did you mean '{close[0]}'?"
    return "unknown field; the fields here are " + ", ".join(known)


#: What a field of each pydantic type-error kind must be, in the user's words.
_MUST_BE = {
    **dict.fromkeys(("float_parsing", "float_type"), "a number"),
    **dict.fromkeys(("int_parsing", "int_type", "int_from_float"), "a whole number"),
    **dict.fromkeys(("bool_parsing", "bool_type"), "true or false"),
    "string_type": "text",
    **dict.fromkeys(("list_type", "tuple_type", "set_type"), "a list"),
    **dict.fromkeys(("dict_type", "model_type", "model_attributes_type"), "a mapping of fields"),
}
#: Numeric bounds, by pydantic error kind.
_BOUNDS = {
    "greater_than": "greater than {gt}",
    "greater_than_equal": "at least {ge}",
    "less_than": "less than {lt}",
    "less_than_equal": "at most {le}",
}


def _one_of(ctx: dict[str, Any], given: Any, got: str) -> str:
    expected = str(ctx.get("expected", "")).replace("'", "")
    options = [o.strip() for o in expected.replace(" or ", ",").split(",") if o.strip()]
    hint = ""
    if isinstance(given, str):
        import difflib

        close = difflib.get_close_matches(given, options, n=1, cutoff=SUGGEST_CUTOFF)
        hint = f"; did you mean '{close[0]}'?" if close else ""
    return "must be one of " + ", ".join(f"'{o}'" for o in options) + got + hint


def _length(kind: str, ctx: dict[str, Any]) -> str | None:
    if kind == "too_short" and "min_length" in ctx:
        return f"needs at least {ctx['min_length']} item(s)"
    if kind == "too_long" and "max_length" in ctx:
        return f"holds at most {ctx['max_length']} item(s)"
    if kind == "string_too_short":
        return f"needs at least {ctx.get('min_length', 1)} character(s)"
    if kind == "string_too_long":
        return f"holds at most {ctx.get('max_length')} characters"
    return None


def _plain(err: dict[str, Any], quote: bool = True) -> str:
    """One pydantic error in the user's words: what the field must be, and (`quote`) what was given."""
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    given = err.get("input")
    got = f" (got {_quoted(given)})" if quote else ""
    msg = str(err.get("msg", "invalid"))
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if not quote:
        return msg
    if kind == "missing":
        return "required, and missing"
    if kind == "literal_error":
        return _one_of(ctx, given, got)
    if kind in _MUST_BE:
        return f"must be {_MUST_BE[kind]}{got}"
    if kind in _BOUNDS:
        numbers = {k: f"{v:g}" if isinstance(v, int | float) else v for k, v in ctx.items()}
        return "must be " + _BOUNDS[kind].format(**numbers) + got
    length = _length(kind, ctx)
    if length is not None:
        return length
    if msg.startswith("Input should be "):
        return "must be " + msg[len("Input should be ") :] + got
    return msg


def problems_from_pydantic(
    exc: Any, prefix: str = "", model: Any = None, *, quote: bool = False
) -> list[Problem]:
    """Turn a pydantic ValidationError into one Problem per error, with dotted field paths in the user's words:
    no union-member or validator names in paths, messages saying what the field must be and what was given,
    unknown fields with a did-you-mean from the fields of `model` (the validated model class) at that place.
    A union field with errors in several members shows the member the value evidently aimed at (the errors
    deepest inside it), or one message naming every accepted form. `quote` repeats the refused value (for a
    person's own input; never for environments or secrets)."""
    grouped: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    order: list[str] = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        fields = [p for p in loc if not _is_branch(p)]
        depth = len(loc) - max((i for i, p in enumerate(loc) if _is_branch(p)), default=len(loc))
        union_at = next((i for i, p in enumerate(loc) if _is_branch(p)), None)
        key = ".".join(loc[:union_at]) if union_at is not None else ".".join(fields)
        if key not in grouped:
            grouped[key] = []
            order.append(key)
        grouped[key].append((depth if union_at is not None else 0, {**err, "_fields": fields}))
    out: list[Problem] = []
    for key in order:
        errs = grouped[key]
        deepest = max(d for d, _ in errs)
        chosen = [e for d, e in errs if d == deepest]
        union = any(_is_branch(str(p)) for _, e in errs for p in e.get("loc", ()))
        if union and deepest <= 1 and len(chosen) > 1:
            # the value fits no member: one message with every accepted form
            path = ".".join(x for x in (prefix, key) if x)
            plain = [_plain(e, quote) for e in chosen]
            forms = ", or ".join(p.split(" (got ")[0].removeprefix("must be ") for p in plain)
            hint = next((p.split("; did you mean ")[1] for p in plain if "; did you mean " in p), "")
            message = f"must be {forms}" + (f" (got {_quoted(chosen[0].get('input'))})" if quote else "")
            out.append(Problem(path, message + (f"; did you mean {hint}" if hint else "")))
            continue
        for e in chosen:
            fields = e["_fields"]
            path = ".".join(x for x in (prefix, ".".join(fields)) if x)
            if e.get("type") == "extra_forbidden":
                owner = _model_at(model, fields[:-1]) if model is not None else None
                message = (
                    unknown_field_message(fields[-1], _aliases(owner))
                    if owner is not None and fields
                    else "unknown field (not part of the spec; check the spelling)"
                )
                out.append(Problem(path, message))
            else:
                out.append(Problem(path, _plain(e, quote)))
    return out


# --- errors of the transports and of dependencies (mapped to HTTP once, in sizing.service.api.errors) ---------
class PayloadTooLarge(SizingError):
    """The request body exceeds what any valid request needs (HTTP 413)."""


class MethodNotAllowed(SizingError):
    """A known path asked with a method it does not answer (HTTP 405, with `Allow`)."""


class Unavailable(SizingError):
    """A dependency (Step Functions) failed or is not configured; the request may be retried (HTTP 503)."""
