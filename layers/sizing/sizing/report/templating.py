"""The report's Jinja2 environment: the templates under `templates/` (shipped as package data), autoescaped, and
strict about a value a template names but the page does not pass (an error, never an empty string).

`sizing.report.page` builds it once per process, on first use. Python computes the values (`sizing.report.page`); the templates hold the
markup. Only markup that is already safe reaches a template as `markupsafe.Markup`: the SVG charts that
`sizing.report.svg` draws (every text in them escaped there) and the base64 data URIs of the downloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape


def make_environment(
    filters: Mapping[str, Callable[..., str]], tests: Mapping[str, Callable[[Any], bool]]
) -> Environment:
    """The environment of the report's templates, with the `filters` and `tests` its templates use."""
    env = Environment(
        loader=PackageLoader("sizing.report", "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.filters.update(filters)
    env.tests.update(tests)
    # `tojson` (the result embedded in the page): compact, in the result's own key order, a non-JSON value as text
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":"), "default": str}
    return env
