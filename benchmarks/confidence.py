"""What `slo.confidence` costs a buyer: the cheapest answer per example workload without a confidence and at each
confidence asked, with the allowance it read at the busiest hour and the estimate's time. Prints figures; asserts
nothing.

    .venv/bin/python benchmarks/confidence.py [--confidence 0.8 0.9]

What to read (docs/estimator.md, "Sizing at a confidence"): a higher confidence never answers cheaper; the factors
each answer states at its busiest hour (TTFT, TPOT and e2e, and how much the queue multiplies a step error there).
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cheapest(result: dict[str, Any]) -> dict[str, Any] | None:
    archs = [a for a in result["architectures"] if a["deployment"] != "bedrock"]
    return archs[0] if archs else None


def _read_at_load(headroom: dict[str, Any]) -> str:
    """The factors an answer was sized with at its busiest hour (`headroom.allowance`; "" without a confidence)."""
    a = headroom.get("allowance")
    if not a:
        return ""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "e2e"}
    out = " ".join(f"{names[m]} x{f:.2f}" for m, f in a["latency"].items())
    return out + " (queue " + " ".join(f"{m.upper()} x{x:.2f}" for m, x in a["amplification"].items()) + ")"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--confidence", type=float, nargs="+", default=[0.8, 0.9])
    args = ap.parse_args()
    import yaml

    from sizing.plan import estimate
    from sizing.plan.capacity import clear_caches
    from sizing.results import rank_cost
    from sizing.workload.parse import parse_spec

    print(
        f"{'workload':<21}{'conf':>5}  {'cheapest':<42}{'peak':>5}{'$/month':>11}{'rps/rep':>9}{'s':>6}"
        "  allowance at the busiest hour"
    )
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        for conf in (None, *args.confidence):
            spec = copy.deepcopy(raw)
            if conf is not None:
                spec["slo"]["confidence"] = conf
            clear_caches()
            t0 = time.perf_counter()
            result = estimate(parse_spec(spec)).document()
            took = time.perf_counter() - t0
            a = _cheapest(result)
            label = "-" if conf is None else f"{conf:g}"
            if a is None:
                print(
                    f"{path.stem:<21}{label:>5}  {'none meets the SLO':<42}{'':>5}{'':>11}{'':>9}{took:>6.2f}"
                )
                continue
            print(
                f"{path.stem:<21}{label:>5}  {a['id']:<42}{a['replicas']['peak']:>5}{rank_cost(a):>11,.0f}"
                f"{a['per_replica']['rps_slo_limit']:>9.3g}{took:>6.2f}  {_read_at_load(a['headroom'])}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
