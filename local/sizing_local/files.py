"""Where the embedded stack's files are: template.yaml and, beside it, the state machine's definition and the
functions' code that it names.

`$SIZING_TEMPLATE` when set; else the `template.yaml` of the checkout the command runs in (the current directory or
one above it); else the copy an installed package ships (setup.py copies them into `sizing_local/stack_files/`);
else the checkout this package is installed from in editable mode. `use_stack_files` makes the choice once for
the process and its children (the handlers and load tests read `$SIZING_TEMPLATE` through `find_template`)."""

from __future__ import annotations

import os
from pathlib import Path

from sizing.base.errors import InvalidInput
from sizing.store.schema import TEMPLATE_ENV, TEMPLATE_NAME, find_template

#: the folder of this package that holds the shipped copies (setup.py's STACK_DIR)
STACK_DIR = "stack_files"
HERE = Path(__file__).resolve().parent


def shipped_template() -> Path | None:
    """The template this package carries: its package data when installed from a wheel, the checkout's when
    installed in editable mode from one; None when neither is there."""
    for candidate in (HERE / STACK_DIR / TEMPLATE_NAME, HERE.parent.parent / TEMPLATE_NAME):
        if candidate.is_file():
            return candidate
    return None


def use_stack_files() -> Path:
    """The template to deploy, set as `$SIZING_TEMPLATE` when it is the shipped one (so every reader of the
    process and its children agrees). InvalidInput when there is none anywhere."""
    try:
        return find_template()
    except InvalidInput:
        shipped = shipped_template()
        if shipped is None:
            raise
    os.environ[TEMPLATE_ENV] = str(shipped)
    return shipped
