"""The import graph of the `sizing` package, read from the source with `ast` (nothing is imported).

    .venv/bin/python benchmarks/imports.py [--all] [--package sizing]

Prints the import cycles among the package's modules -- from module-level imports (what runs at import; a cycle
there is an import-order bug waiting to happen) and, with in-function imports of the package's own modules
counted too, the cycles those imports hide -- and the in-function imports of own modules per module, with
those that bring no heavy library (`HEAVY`) the importing module does not already load: such an import defers
nothing worth deferring and belongs at the top. Imports under `if TYPE_CHECKING:` never run and are not edges.
`tests/unit/test_import_graph.py` asserts the module-level graph has no cycle, none hides behind an in-function
import, and every in-function import of an own module defers a heavy library.
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


#: Libraries whose import is worth deferring to the call that needs it: milliseconds to import each alone
#: (`python -X importtime -c "import X"`, cumulative, on the 2 shared cores of the development machine, 2026-12-02).
#: Anything under ~20 ms (json 3, difflib 2, statistics 8, markupsafe 8) is not worth an in-function import.
HEAVY = {
    "boto3": 843, "botocore": 32, "moto": 893, "locust": 1504, "gevent": 61, "numpy": 354, "pydantic": 65,
    "pydantic_settings": 503, "yaml": 25, "jinja2": 267, "aws_lambda_powertools": 68, "slack_sdk": 262,
    "prometheus_client": 212, "psutil": 104, "urllib3": 199, "werkzeug": 165, "celpy": 141, "asyncio": 88,
    "ssl": 50, "http": 67, "urllib": 71, "concurrent": 26,
}  # fmt: skip


@dataclass
class Graph:
    """Module -> modules of the package it imports: at module level (`top`), and inside functions (`inner`);
    the outside libraries (top-level names) each module imports at module level (`external`); every in-function
    import of own modules as (module, line, targets) (`inner_sites`)."""

    modules: set[str] = field(default_factory=set)
    top: dict[str, set[str]] = field(default_factory=dict)
    inner: dict[str, set[str]] = field(default_factory=dict)
    inner_count: Counter[str] = field(default_factory=Counter)
    external: dict[str, set[str]] = field(default_factory=dict)
    inner_sites: list[tuple[str, int, frozenset[str]]] = field(default_factory=list)

    def loads(self, module: str) -> tuple[set[str], set[str]]:
        """What importing `module` runs: the own modules and the outside libraries, through module-level imports."""
        seen: set[str] = set()
        libs: set[str] = set()
        stack = [module]
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            libs |= self.external.get(m, set())
            stack.extend(self.top.get(m, ()))
        return seen, libs

    def light_inner_imports(self) -> list[tuple[str, int, list[str]]]:
        """In-function imports of own modules that bring no `HEAVY` library the importing module lacks."""
        out = []
        for here, line, targets in self.inner_sites:
            _, have = self.loads(here)
            brought: set[str] = set()
            for t in targets:
                brought |= self.loads(t)[1]
            if not (brought - have) & set(HEAVY):
                out.append((here, line, sorted(targets)))
        return out

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


def _note_external(g: Graph, here: str, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.ImportFrom) and node.level:
        return
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    roots = {n.split(".")[0] for n in names} - {"sizing", "__future__", ""}
    if roots:
        g.external.setdefault(here, set()).update(roots)


def build(package_dir: Path = PACKAGE_DIR) -> Graph:
    g = Graph()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    g.modules = {module_name(p, package_dir) for p in files}
    for path in files:
        here = module_name(path, package_dir)
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        for node, in_function in _imports(tree.body, False):
            if not in_function:
                _note_external(g, here, node)
            targets = _targets(node, here, is_pkg, g.modules) - {here}
            if not targets:
                continue
            if in_function:
                g.inner.setdefault(here, set()).update(targets)
                g.inner_count[here] += 1
                g.inner_sites.append((here, node.lineno, frozenset(targets)))
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
    light = g.light_inner_imports()
    print(f"in-function imports of own modules that defer no heavy library (belong at the top): {len(light)}")
    for here, line, targets in light if args.all else light[:15]:
        print(f"  {here}:{line} -> {', '.join(targets)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
