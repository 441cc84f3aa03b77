"""The package's imports run downhill: no module-level import cycle among `sizing`'s modules, and no new cycle
hidden behind an in-function import (benchmarks/imports.py draws the graph from the source with `ast`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("imports_graph", ROOT / "benchmarks" / "imports.py")
assert _spec and _spec.loader
imports = importlib.util.module_from_spec(_spec)
sys.modules["imports_graph"] = imports
_spec.loader.exec_module(imports)

#: Cycles that in-function imports still hide, to be removed. None is left; no other may appear.
KNOWN_HIDDEN: list[list[str]] = []


def test_no_module_level_import_cycle_in_the_package() -> None:
    # given the package's import graph as its modules' top-level imports run
    graph = imports.build()
    # when its strongly connected components are taken
    found = imports.cycles(graph.edges(with_inner=False))
    # then no module waits on one that waits on it
    assert found == []


def test_in_function_imports_hide_no_cycle_beyond_the_known_ones() -> None:
    # given the graph with the in-function imports of the package's own modules counted as edges
    graph = imports.build()
    # when its cycles are taken
    found = imports.cycles(graph.edges(with_inner=True))
    # then each is one of those still to be removed (a removed one may go from the list)
    assert all(c in KNOWN_HIDDEN for c in found), found


def test_the_checker_sees_a_cycle_and_ignores_type_checking_imports(tmp_path: Path) -> None:
    # given a package where a imports b at module level, b imports a inside a function, and c imports a only
    # for type checking
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\nfrom pkg import b\n"
    )
    # when its graph is built
    graph = imports.build(pkg)
    # then the module-level graph has no cycle, the in-function edge closes one, and c's edge to a is not counted
    assert imports.cycles(graph.edges(with_inner=False)) == []
    assert imports.cycles(graph.edges(with_inner=True)) == [["pkg.a", "pkg.b"]]
    assert graph.top["pkg.c"] == {"pkg.b"}
    assert graph.inner_count["pkg.b"] == 1
