"""Do the measurements identify the linear phase's slowdown at the roofline's ridge? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/ridge.py

The step model composes the linear layers' compute and weight-streaming times as (c^p + m^p)^(1/p), with
2^(1/p) = 1 + `ridge_slowdown` (`sizing.perf.steptime.ridge`; 0 is the roofline's hard max, which the shipped
profiles state). Per accelerator family this prints the in-sample loss of its rows (`sizing.perf.fit.row_loss`:
the calibration's own soft-L1 on log errors) under the shipped profile with the ridge slowdown set to each value of
a grid, the other factors as fitted, and how many of its closed-loop rows decode at a batch whose matmuls take
between half and twice their weights' time (the rows the term speaks to). A loss that barely moves over the grid
means the rows cannot tell the value: a fit would return its prior (docs/estimator.md, "The linear phase near the
ridge"). About two seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

#: Ridge slowdowns tried: the hard max, then up to no overlap at all (compute plus memory).
GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: A decode batch "near the ridge": its matmuls take between NEAR[0] and NEAR[1] times its weights' read.
NEAR = (0.5, 2.0)


def main() -> int:
    from sizing.perf.calibration import PROFILE_PATH, family_of, load_profiles, profile_for
    from sizing.perf.calrows import LOADTEST_ROWS_NAME
    from sizing.perf.fit import profile_key, reference_catalog, row_config, row_loss
    from sizing.perf.memory import memory_fit
    from sizing.perf.procedure import calibration_rows
    from sizing.perf.reference import DEFAULT_REFERENCE
    from sizing.perf.step import StepModel

    shipped = load_profiles()
    loadtest = PROFILE_PATH.parent / LOADTEST_ROWS_NAME
    rows, _, _ = calibration_rows(DEFAULT_REFERENCE, [loadtest] if loadtest.exists() else [])
    by_family = defaultdict(list)
    for r in rows:
        by_family[family_of(r.accelerator)].append(r)
    print(
        "In-sample loss of each family's rows against the ridge slowdown (shipped profile, other factors as fitted):"
    )
    print(f"{'family':<10} {'rows':>4} {'near':>4}  " + " ".join(f"{s:>6}" for s in GRID) + "  best")
    for fam, frows in sorted(by_family.items()):
        near = 0
        for r in frows:
            if r.load not in ("closed", "batch"):
                continue
            cfg = row_config(r)
            cat = reference_catalog()
            sm = StepModel(
                cfg, memory_fit(cfg, cat), profile_for(r.accelerator, profile_key(r), shipped), cat
            )
            step = sm.timing()
            d = max(1, min(round(r.load_value), sm.max_num_seqs))
            near += NEAR[0] <= step.c_tok * d / step.weights_time(d) <= NEAR[1]
        losses = []
        for s in GRID:
            total = 0.0
            for r in frows:
                prof = replace(profile_for(r.accelerator, profile_key(r), shipped), ridge_slowdown=s)
                total += row_loss(r, prof)
            losses.append(total)
        best = GRID[min(range(len(GRID)), key=losses.__getitem__)]
        print(f"{fam:<10} {len(frows):>4} {near:>4}  " + " ".join(f"{v:6.3f}" for v in losses) + f"  {best}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
