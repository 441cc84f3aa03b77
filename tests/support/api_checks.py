"""The API's own schemathesis check, beside schemathesis' built-in ones: no answer carries a Python traceback.

Registered with schemathesis on import. The in-process fuzz (tests/reliability/test_reliability_api_fuzz.py)
imports it; the CLI runs against `sizing serve` (tests/integration/test_api_serve.py) load this file through
`SCHEMATHESIS_HOOKS`, so `--checks all` includes it there too."""

from __future__ import annotations

from typing import Any

import schemathesis


@schemathesis.check
def no_stack_trace(ctx: Any, response: Any, case: Any) -> bool | None:
    """No answer carries a Python traceback or a source path."""
    text = response.content.decode(errors="replace")
    if "Traceback (most recent call last)" in text or 'File "/' in text:
        raise AssertionError(f"{case.method} {case.path} answered a stack trace")
    return None
