"""Load a Lambda function's module from its folder, as the Lambda runtime does: `functions/<name>/` is a code
folder (template.yaml's CodeUri), not a package, so it is loaded by path -- never by editing sys.path. Used by
the embedded default's in-process dispatch and by the handlers' tests."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from sizing.store.schema import repo_root

#: Prefix of the names loaded function modules carry in sys.modules (one module per code folder and file).
MODULE_PREFIX = "_sizing_fn_"


def load_function(code_uri: str, module: str = "app") -> ModuleType:
    """The module `module`.py of the function whose CodeUri is `code_uri` (e.g. "functions/api/"), loaded once
    per process like one Lambda container."""
    key = f"{MODULE_PREFIX}{code_uri.strip('/').replace('/', '_')}_{module}"
    loaded = sys.modules.get(key)
    if loaded is not None:
        return loaded
    path = repo_root() / code_uri / f"{module}.py"
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[key] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[key]
        raise
    return loaded


def loaded_functions() -> list[ModuleType]:
    """Every function module loaded so far."""
    return [m for k, m in list(sys.modules.items()) if k.startswith(MODULE_PREFIX)]
