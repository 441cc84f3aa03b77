"""The documentation is in the repository: the workload-spec reference is generated from the model (a drift fails
here), and README, CLI help, the OpenAPI document and the code's own comments, docstrings and notes (layers/,
functions/) name only files in the repository (or public URLs)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from sizing.cli import COMMAND_MODULES, build_parser
from sizing.service.api import openapi_json
from sizing.specdoc import render

ROOT = Path(__file__).resolve().parents[2]
#: Top-level folders of the repository: a reference starting with one of them is a path into it.
REPO_DIRS = ("docs", "examples", "layers", "statemachines", "functions", "benchmarks", "events", "tests")
#: Path-like words: a relative path with a known extension, or a bare Markdown file name.
#: Names of the design notes kept beside the checkout, which a user of the product does not have.
OUTSIDE_NAMES = ("../shared", "notes/", "DESIGN.md", "tooling.md")
#: Python source whose comments, docstrings and string notes are checked.
CODE_DIRS = ("layers", "functions")
#: Tokens that carry prose: comments, and strings (docstrings and the notes an estimate prints).
PROSE_TOKENS = {tokenize.COMMENT, tokenize.STRING} | {
    getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING),
    getattr(tokenize, "TSTRING_MIDDLE", tokenize.STRING),
}
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


def prose_of(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and string in a Python file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type in PROSE_TOKENS]


def outside_references(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: word` for each reference in `path`'s prose to a file outside the repository."""
    found = []
    for line, text in prose_of(path):
        words = missing(text)
        words += [name for name in OUTSIDE_NAMES if name in text and not any(name in w for w in words)]
        found += [f"{path.relative_to(root)}:{line}: {w}" for w in words]
    return found


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


def test_code_comments_docstrings_and_notes_name_only_files_in_the_repository() -> None:
    # given every Python file of the product (the Lambda layer and the functions)
    files = [p for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*.py")) if ".aws-sam" not in p.parts]
    # when their comments, docstrings and strings are read; then none names a file outside the repository
    assert len(files) > 50
    assert [ref for p in files for ref in outside_references(p)] == []


def test_the_code_checker_finds_a_comment_citing_the_notes_next_door(tmp_path: Path) -> None:
    # given a module whose docstring and a comment cite the design notes, and a comment citing docs/ and a URL
    cited = tmp_path / "cites.py"
    cited.write_text(
        '"""See DESIGN.md and tooling.md."""\n\n#: vLLM defaults [notes/serving-facts.md s1]\nX = 1\n'
        "#: [docs/serving-facts.md s1, https://docs.vllm.ai/en/latest/index.md]\nY = 2\n"
    )
    # when it is checked
    found = outside_references(cited, root=tmp_path)
    # then the references outside the repository are named with their lines, and the others are not
    assert found == ["cites.py:1: DESIGN.md", "cites.py:1: tooling.md", "cites.py:3: notes/serving-facts.md"]


def test_the_checker_finds_a_file_outside_the_repository() -> None:
    # the rule itself: a reference to the design notes next door is caught, a public URL is not
    assert missing("see ../shared/DESIGN.md and notes/serving-facts.md") == [
        "../shared/DESIGN.md",
        "notes/serving-facts.md",
    ]
    assert missing("see https://docs.vllm.ai/en/latest/serving/engine_args.md") == []
