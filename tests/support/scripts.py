"""Scripts of the repository that tests read as modules (benchmarks/imports.py draws the import graph)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str) -> ModuleType:
    """The script at `relative` (from the repository root) as module `name`, loaded once per process."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def package_graph() -> Any:
    """The package's import graph (benchmarks/imports.py), read once per process: ~3 s, every source file parsed.
    Tests only read it."""
    return load_script("benchmarks/imports.py", "imports_graph").build()
