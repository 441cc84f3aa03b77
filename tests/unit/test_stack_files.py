"""Where the embedded stack's template comes from when `sizing run` starts outside a checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sizing.store.schema import TEMPLATE_ENV, find_template
from sizing_local.files import shipped_template, use_stack_files


def test_outside_a_checkout_the_template_the_package_carries_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a directory with no template.yaml in it or above it, and no $SIZING_TEMPLATE
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    # when the stack's files are looked for
    path = use_stack_files()
    # then the package's own template is chosen, and every later reader (handlers, tables) agrees on it
    assert path == shipped_template() and path is not None and path.is_file()
    assert os.environ[TEMPLATE_ENV] == str(path)
    assert find_template() == path


def test_inside_a_checkout_its_own_template_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a checkout-like folder with its own template.yaml, run from a folder below it
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)
    (tmp_path / "template.yaml").write_text("Resources: {}\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    # when the stack's files are looked for; then that checkout's template is used and nothing is set
    assert use_stack_files() == (tmp_path / "template.yaml").resolve()
    assert TEMPLATE_ENV not in os.environ
