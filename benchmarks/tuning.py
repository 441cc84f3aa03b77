"""What the runtime-parameter search buys: the cheapest answer per example workload with the engine's defaults
and with the search, and what the search cost. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/tuning.py

Targets (issue "What we estimate is what we deploy"): the tuned answer is at least as cheap as the default one on
every example, and cheaper on at least two; the full-catalog estimate stays <= 1.5 s whole process
(benchmarks/speed.py prints that).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _top(result: dict[str, Any]) -> tuple[str, float] | None:
    archs = [a for a in result["architectures"] if a["deployment"] != "bedrock"]
    if not archs:
        return None
    a = archs[0]
    return a["id"], float(a["cost"]["usd_per_month"])


def main() -> int:
    from sizing.plan import estimate
    from sizing.plan.capacity import clear_caches
    from sizing.workload.parse import load_spec

    print(
        f"{'workload':<22}{'default $/month':>16}{'tuned $/month':>15}{'saving':>8}{'s default':>10}{'s tuned':>9}"
    )
    cheaper = 0
    dearer = 0
    notes = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        spec = load_spec(path)
        estimate(spec)  # warm imports and the catalog
        clear_caches()
        t0 = time.perf_counter()
        default = estimate(spec, tune=False).document()
        t1 = time.perf_counter()
        clear_caches()
        tuned = estimate(spec).document()
        t2 = time.perf_counter()
        d, t = _top(default), _top(tuned)
        if d is None or t is None:
            print(f"{path.stem:<22}{'no EKS/SageMaker answer':>39}")
            continue
        saving = 100 * (1 - t[1] / d[1])
        cheaper += saving > 0.005
        dearer += saving < -0.005
        print(f"{path.stem:<22}{d[1]:>16,.0f}{t[1]:>15,.0f}{saving:>7.1f}%{t1 - t0:>10.2f}{t2 - t1:>9.2f}")
        top = next(a for a in tuned["architectures"] if a["deployment"] != "bedrock")
        notes.append(f"  {path.stem}: {top['id']} -- {top['tuning']['summary']}")
    print("\n".join(notes))
    print(f"tuned cheaper on {cheaper} workloads, dearer on {dearer} (target: cheaper on >= 2, dearer on 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
