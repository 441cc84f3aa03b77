"""The example workloads (`examples/*.yaml`) and the planner's answer for each, computed once per test process.

Several unit modules check the planner's answers for the example workloads from different sides (manifests,
serving round trip, the served model, the example reports). Each estimate takes ~0.5-1 s on this machine; they are
deterministic, so one per process is enough. Callers get their own deep copy and may change it freely.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def example_path(stem: str) -> Path:
    return ROOT / "examples" / f"{stem}.yaml"


@functools.cache
def _estimated(stem: str) -> dict[str, Any]:
    from sizing.plan import estimate
    from sizing.workload.parse import load_spec

    return estimate(load_spec(example_path(stem))).document()


def example_estimate(stem: str) -> dict[str, Any]:
    """The planner's answer for `examples/<stem>.yaml` (a copy of the one computed in this process)."""
    return copy.deepcopy(_estimated(stem))
