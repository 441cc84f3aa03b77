"""The import graph of the `sizing` package, read from the source with `ast` (nothing is imported).

    .venv/bin/python benchmarks/imports.py [--all] [--package sizing]

Prints the import cycles among the package's modules -- from module-level imports (what runs at import; a cycle
there is an import-order bug waiting to happen) and, with in-function imports of the package's own modules
counted too, the cycles those imports hide -- and the in-function imports of own modules per module.
Imports under `if TYPE_CHECKING:` never run and are not edges. `tests/unit/test_import_graph.py` asserts the
module-level graph has no cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "layers" / "sizing" / "sizing"


@dataclass
class Graph:
    """Module -> modules of the package it imports: at module level (`top`), and inside functions (`inner`)."""

    modules: set[str] = field(default_factory=set)
    top: dict[str, set[str]] = field(default_factory=dict)
    inner: dict[str, set[str]] = field(default_factory=dict)
    inner_count: Counter[str] = field(default_factory=Counter)

    def edges(self, with_inner: bool) -> dict[str, set[str]]:
        out = {m: set(self.top.get(m, ())) for m in self.modules}
        if with_inner:
            for m, targets in self.inner.items():
                out[m] |= targets
        return out


def module_name(path: Path, package_dir: Path) -> str:
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(body: list[ast.stmt], in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement under `body`, with whether it runs inside a function; TYPE_CHECKING blocks skipped."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.orelse, in_function)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _imports(node.body if isinstance(node.body, list) else [], True)
        else:
            for child_body in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, child_body, None)
                if isinstance(children, list):
                    stmts = [c for c in children if isinstance(c, ast.stmt)]
                    handlers = [h for c in children if isinstance(c, ast.ExceptHandler) for h in c.body]
                    yield from _imports(stmts + handlers, in_function)


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_pkg: bool, modules: set[str]) -> set[str]:
    """The package's modules an import statement loads. `from P import m` loads submodule m (and P's __init__
    only for a name that is not a submodule); loading a submodule also runs the __init__ of every package above
    it, except the packages above the importing module itself, which are already being imported (the usual
    `sizing.plan.search` importing `sizing.plan.capacity` is no cycle through `sizing.plan`)."""
    named: set[str] = set()
    if isinstance(node, ast.Import):
        named = {a.name for a in node.names}
    else:
        base = node.module or ""
        if node.level:
            parts = here.split(".") if is_pkg else here.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        for a in node.names:
            named.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    mine = {".".join(here.split(".")[:i]) for i in range(1, here.count(".") + 1)}
    if is_pkg:
        mine.add(here)
    out: set[str] = set()
    for name in named:
        parts = name.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()  # an attribute, not a module
        if not parts:
            continue
        full = ".".join(parts)
        out.add(full)
        out |= {".".join(parts[:i]) for i in range(1, len(parts))} - mine
    return out


def build(package_dir: Path = PACKAGE_DIR) -> Graph:
    g = Graph()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    g.modules = {module_name(p, package_dir) for p in files}
    for path in files:
        here = module_name(path, package_dir)
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        for node, in_function in _imports(tree.body, False):
            targets = _targets(node, here, is_pkg, g.modules) - {here}
            if not targets:
                continue
            if in_function:
                g.inner.setdefault(here, set()).update(targets)
                g.inner_count[here] += 1
            else:
                g.top.setdefault(here, set()).update(targets)
    return g


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted; sorted by first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def in_package(g: Graph, prefixes: tuple[str, ...]) -> Graph:
    """The graph restricted to modules under `prefixes` (e.g. the core: sizing.perf, sizing.plan, ...)."""
    keep = {m for m in g.modules if m.startswith(prefixes)}
    return Graph(
        modules=keep,
        top={m: t & keep for m, t in g.top.items() if m in keep},
        inner={m: t & keep for m, t in g.inner.items() if m in keep},
        inner_count=Counter({m: c for m, c in g.inner_count.items() if m in keep}),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--all", action="store_true", help="list every module's in-function imports of own modules"
    )
    args = ap.parse_args()
    g = build()
    top = cycles(g.edges(with_inner=False))
    hidden = cycles(g.edges(with_inner=True))
    print(f"modules: {len(g.modules)}")
    print(f"import cycles at module level: {len(top)}")
    for c in top:
        print("  " + " <-> ".join(c))
    print(f"cycles once in-function imports of own modules count: {len(hidden)}")
    for c in hidden:
        print(f"  {len(c)} modules: " + ", ".join(c[:12]) + (" ..." if len(c) > 12 else ""))
    total = sum(g.inner_count.values())
    print(f"in-function imports of own modules: {total} in {len(g.inner_count)} modules")
    shown = g.inner_count.most_common(None if args.all else 15)
    for m, n in shown:
        print(f"  {n:4d}  {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
