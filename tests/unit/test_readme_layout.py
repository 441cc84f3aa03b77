"""The README's layout section names every subpackage and root module of the domain package, and nothing else: a
newcomer reading it sees the tree as it is."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "sizing" / "sizing"


def _layout_section(readme: str) -> str:
    start = readme.index("\n## Layout\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end != -1 else len(readme)]


def _named(section: str) -> set[str]:
    """`sizing/x/` and `sizing/x.py` named in the section's table (its first column)."""
    return set(re.findall(r"^\| `sizing/([\w]+/|[\w]+\.py)` \|", section, re.M))


def _tree() -> set[str]:
    packages = {f"{d.name}/" for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()}
    modules = {f.name for f in PACKAGE.glob("*.py") if f.name != "__init__.py"}
    return packages | modules


def test_the_readme_layout_names_the_package_tree() -> None:
    # given the README's layout section and the domain package on disk
    section = _layout_section((ROOT / "README.md").read_text())
    # when the subpackages and root modules it names are read
    named = _named(section)
    # then they are exactly the tree's: none missing, none that no longer exists
    tree = _tree()
    assert named == tree, {
        "missing from the README": sorted(tree - named),
        "not in the tree": sorted(named - tree),
    }


def test_the_layout_reader_sees_packages_and_modules() -> None:
    # given a layout section with one package row, one module row and a row of another column's text
    section = "\n## Layout\n| where | what |\n|---|---|\n| `sizing/plan/` | x |\n| `sizing/cli.py` | y |\n| z | `sizing/no/` |\n"
    # when its names are read
    named = _named(_layout_section(section))
    # then only the first column's names count
    assert named == {"plan/", "cli.py"}
