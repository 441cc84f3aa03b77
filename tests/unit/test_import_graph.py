"""The package's imports run downhill: no module-level import cycle among `sizing`'s modules, and no new cycle
hidden behind an in-function import (benchmarks/imports.py draws the graph from the source with `ast`)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from support.scripts import load_script, package_graph

imports = load_script("benchmarks/imports.py", "imports_graph")


@pytest.fixture(name="package_graph")
def package_graph_fixture() -> Any:
    """The package's import graph, read once per test process (shared with the vocabulary's test)."""
    return package_graph()


#: Cycles that in-function imports still hide, to be removed. None is left; no other may appear.
KNOWN_HIDDEN: list[list[str]] = []


def test_no_module_level_import_cycle_in_the_package(package_graph: Any) -> None:
    # given the package's import graph as its modules' top-level imports run
    graph = package_graph
    # when its strongly connected components are taken
    found = imports.cycles(graph.edges(with_inner=False))
    # then no module waits on one that waits on it
    assert found == []


def test_in_function_imports_hide_no_cycle_beyond_the_known_ones(package_graph: Any) -> None:
    # given the graph with the in-function imports of the package's own modules counted as edges
    graph = package_graph
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


_RENDER = (
    "~15 ms (sizing.perf.config) of the cold starts that read or render an architecture and simulate nothing"
)
_PLANNER = "~20-50 ms of the cold starts that import the planner and estimate nothing (janitor, steps)"
_SLACK = (
    "~50-100 ms of the Slack cold starts that read no catalog and start no run (acknowledgement, notifier)"
)

#: In-function imports of own modules that bring no heavy library, left in a file being edited (hoisted after):
#: (importing module, module imported) -> why it is still there.
KNOWN_LIGHT: dict[tuple[str, str], str] = {}

#: In-function imports of own modules that bring no heavy library yet defer a measured share of a Lambda cold
#: start on the paths that do not need them (the package's own import work: pydantic models built, profiles
#: read; `python -X importtime` on the entry point, figures from the 2 shared development cores). Each site
#: says so in a comment. (importing module, module imported) -> what deferring it saves.
DEFERRED_FOR_COLD_START: dict[tuple[str, str], str] = {
    ("sizing.deploy.architecture", "sizing.perf.config"): _RENDER,
    ("sizing.deploy.rendering", "sizing.perf.config"): _RENDER,
    (
        "sizing.learn.drift",
        "sizing.learn.correction",
    ): "~8 ms of the Slack bot's cold start (it imports drift)",
    (
        "sizing.learn.drift",
        "sizing.perf.calibration",
    ): "~8 ms of the Slack bot's cold start (it imports drift)",
    (
        "sizing.orchestrate.steps",
        "sizing.orchestrate.merge",
    ): "~40 ms of each step's cold start but collect's",
    ("sizing.orchestrate.steps", "sizing.learn.loop"): "~40 ms of each step's cold start but collect's",
    ("sizing.orchestrate.steps", "sizing.plan.search"): "~75 ms of each step's cold start but estimate's",
    ("sizing.perf.calibration", "sizing.learn.profiles"): _PLANNER,
    ("sizing.perf.calibration", "sizing.learn.correction"): _PLANNER,
    ("sizing.plan.measured", "sizing.learn.correction"): _PLANNER,
    ("sizing.plan.measured", "sizing.learn.profiles"): _PLANNER,
    ("sizing.service.api.routers.calibration", "sizing.learn.profiles"): "~20 ms of the API's cold start",
    ("sizing.service.api.routers.calibration", "sizing.learn.refit"): "~20 ms of the API's cold start",
    ("sizing.slack.bot", "sizing.catalog"): _SLACK,
    ("sizing.slack.deps", "sizing.releases.catalog"): _SLACK,
    ("sizing.slack.deps", "sizing.service.runs"): _SLACK,
    ("sizing.workload.spec", "sizing.catalog.regions"): _SLACK,
    ("sizing.workload.parse", "sizing.catalog"): _SLACK,
    ("sizing.workload.derived", "sizing.catalog"): _SLACK,
}


def test_in_function_imports_of_own_modules_defer_something(package_graph: Any) -> None:
    # given the in-function imports of the package's own modules that bring no heavy library the importing
    # module lacks, each named by its module and the deepest module it imports
    light = package_graph.light_inner_imports()
    found = {(here, max(targets, key=len)) for here, _line, targets in light}
    # when those neither left in a file being edited nor deferring a measured part of a cold start are taken
    unexplained = found - KNOWN_LIGHT.keys() - DEFERRED_FOR_COLD_START.keys()
    # then there is none: every other such import sits at the top of its module
    assert unexplained == set(), sorted(unexplained)


#: The base layer is the package `sizing.base` (errors, the vocabulary, token-length distributions and token counting,
#: observability, the wiring of services, environment settings, the AWS adapters and the table's key scheme, the
#: lifeline of child processes, the serving configuration, plain-text presentation and the strict models' base).
#: Features import it; it imports nothing above it.
BASE_PACKAGE = "sizing.base"


def _base(graph: Any) -> frozenset[str]:
    return frozenset(m for m in graph.modules if m == BASE_PACKAGE or m.startswith(BASE_PACKAGE + "."))


def test_the_base_layer_imports_nothing_above_it(package_graph: Any) -> None:
    # given the package's import graph, in-function imports counted
    graph = package_graph
    edges = graph.edges(with_inner=True)
    # when the base modules' imports of the package are taken (the packages they sit in aside)
    base = _base(graph)
    assert "sizing.base.errors" in base and "sizing.base.table" in base
    upward = {m: sorted(edges.get(m, set()) - base - {"sizing"}) for m in base}
    # then they import only each other
    assert {m: up for m, up in upward.items() if up} == {}


def _private_imports(package_dir: Path) -> list[tuple[str, str, str]]:
    """(importing module, module imported, name) of every import of a private name (`_x`, not `__x__`) from another
    of the package's modules, in-function imports included."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(package_dir.rglob("*.py")):
        here = imports.module_name(path, package_dir)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] != package_dir.name:
                continue
            found.extend(
                (here, node.module, a.name)
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            )
    return found


def _package_of(module: str) -> str:
    return module.rsplit(".", 1)[0]


def test_no_module_imports_a_private_name_from_outside_its_own_subpackage() -> None:
    # given every import of a private name from one of the package's modules
    found = _private_imports(imports.PACKAGE_DIR)
    # when those whose importer sits outside the imported module's subpackage are taken (the planner's phases
    # share their working data within sizing.plan; merge, the CLI and the API read its public names)
    crossing = [(here, there, name) for here, there, name in found if _package_of(here) != _package_of(there)]
    # then there is none
    assert crossing == []


def test_the_private_name_check_sees_an_import_across_subpackages(tmp_path: Path) -> None:
    # given a package whose module b.y imports a private name from a.x, and a.z imports one from its sibling a.x
    pkg = tmp_path / "pkg"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("_hidden = 1\n")
    (pkg / "a" / "z.py").write_text("from pkg.a.x import _hidden\n")
    (pkg / "b" / "y.py").write_text("def f():\n    from pkg.a.x import _hidden, __doc__\n")
    # when its private imports are read
    found = _private_imports(pkg)
    # then both are seen, and only b.y's crosses a subpackage
    assert sorted(found) == [("pkg.a.z", "pkg.a.x", "_hidden"), ("pkg.b.y", "pkg.a.x", "_hidden")]
    assert [f for f in found if _package_of(f[0]) != _package_of(f[1])] == [("pkg.b.y", "pkg.a.x", "_hidden")]
