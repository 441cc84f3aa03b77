"""The documentation is in the repository: the workload-spec reference is generated from the model (a drift fails
here), and README, CLI help and the OpenAPI document name only files in the repository (or public URLs)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from sizing.cli import COMMAND_MODULES, build_parser
from sizing.service.api import openapi_json
from sizing.specdoc import render

ROOT = Path(__file__).resolve().parents[2]
#: Top-level folders of the repository: a reference starting with one of them is a path into it.
REPO_DIRS = ("docs", "examples", "layers", "statemachines", "functions", "benchmarks", "events", "tests")
#: Path-like words: a relative path with a known extension, or a bare Markdown file name.
PATH_WORD = re.compile(r"(?<![\w/:.-])((?:\.\./|[\w.-]+/)*[\w.-]+\.(?:md|ya?ml|json|py|csv|asl\.json))\b")


def referenced_paths(text: str) -> list[str]:
    """Words of `text` that name a file of the repository (URLs left out)."""
    text = re.sub(r"https?://\S+", "", text)
    found = []
    for word in PATH_WORD.findall(text):
        if word.startswith("../") or word.split("/")[0] in REPO_DIRS or word.endswith(".md"):
            found.append(word)
    return found


def inside(word: str) -> bool:
    """The file is in the repository (a path climbing out of it never is, whatever lies there)."""
    return not word.startswith("../") and ((ROOT / word).exists() or (ROOT / "docs" / word).exists())


def missing(text: str) -> list[str]:
    return [w for w in referenced_paths(text) if not inside(w)]


def cli_help() -> str:
    out = io.StringIO()
    for name in COMMAND_MODULES:
        parser = build_parser([name])
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            parser.parse_args([name, "--help"])
    return out.getvalue()


def test_the_workload_spec_reference_is_the_models_own() -> None:
    # given the committed reference; when it is generated again from the model; then nothing changed
    assert (ROOT / "docs" / "workload-spec.md").read_text() == render(), (
        "docs/workload-spec.md drifted: run `python -m sizing.specdoc > docs/workload-spec.md`"
    )


def test_the_readme_names_only_files_in_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    assert "../shared" not in text
    assert missing(text) == []


def test_cli_help_names_only_files_in_the_repository() -> None:
    text = cli_help()
    assert "DESIGN.md" not in text and missing(text) == []


def test_the_openapi_document_names_only_files_in_the_repository() -> None:
    text = json.dumps(json.loads(openapi_json()))
    assert "DESIGN.md" not in text and "notes/" not in text
    assert missing(text) == []


def test_the_checker_finds_a_file_outside_the_repository() -> None:
    # the rule itself: a reference to the design notes next door is caught, a public URL is not
    assert missing("see ../shared/DESIGN.md and notes/serving-facts.md") == [
        "../shared/DESIGN.md",
        "notes/serving-facts.md",
    ]
    assert missing("see https://docs.vllm.ai/en/latest/serving/engine_args.md") == []
