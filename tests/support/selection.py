"""Which marked tests this session's `-m` expression can select, for modules whose collection itself is costly.

schemathesis builds every operation's cases when pytest collects a parametrized test (~3 s per xdist worker for
the deep API fuzz), and `-m` deselects only after collection: a slow-only parametrization that `make test` would
deselect is not built at all when the expression cannot select it. `tests/conftest.py` records the session's
expression in `pytest_configure`, which runs in every xdist worker with the session's options."""

from __future__ import annotations

from _pytest.mark.expression import Expression

#: the session's `-m` expression ("" selects everything); set by tests/conftest.py
markexpr = ""


def selects(*marks: str) -> bool:
    """Whether a test carrying exactly `marks` passes the session's `-m` expression."""
    if not markexpr.strip():
        return True
    held = set(marks)
    return Expression.compile(markexpr).evaluate(lambda name, /, **_kwargs: name in held)
