"""The example workloads (`examples/*.yaml`) and the planner's answer for each, computed once per test process.

Several unit modules check the planner's answers for the example workloads from different sides (manifests,
serving round trip, the served model, the example reports). Each estimate takes ~0.5-1 s on this machine; they are
deterministic, so one per process is enough. Callers get their own deep copy and may change it freely.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
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


#: What changes from one run of the same estimate to the next: when it was made, and how long the search took.
VOLATILE = (("generated_at",), ("search", "seconds"))
#: Significant digits a figure is compared to: every digit a reader sees, short of the last bits of a float (which a
#: different CPU's vector path may round otherwise).
DIGITS = 12


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def fingerprint(document: dict[str, Any]) -> dict[str, Any]:
    """An estimate's JSON as the example-estimates test compares it: the digest of the whole document (less what
    changes from run to run, its figures to `DIGITS` significant digits), and each ranked architecture's id, monthly
    cost and replicas, so a failing comparison says where it moved."""
    doc = copy.deepcopy(document)
    for path in VOLATILE:
        node = doc
        for key in path[:-1]:
            node = node.get(key) or {}
        node.pop(path[-1], None)
    canonical = json.dumps(_rounded(doc), sort_keys=True, separators=(",", ":"))
    return {
        "sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "architectures": [
            [a["id"], _rounded(a["cost"]["usd_per_month"]), (a.get("replicas") or {}).get("count")]
            for a in doc.get("architectures", [])
        ],
    }
