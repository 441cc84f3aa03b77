"""Do the measurements identify the linear phase's slowdown at the roofline's ridge? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/ridge.py
    .venv/bin/python benchmarks/ridge.py --steps benchmarks/results/engine-grid-c6a.large-fp32

The step model composes the linear layers' compute and weight-streaming times as (c^p + m^p)^(1/p), with
2^(1/p) = 1 + `ridge_slowdown` (`sizing.perf.steptime.ridge`; 0 is the roofline's hard max, which the shipped
profiles state). Per accelerator family this prints the in-sample loss of its rows (`sizing.perf.fit.row_loss`:
the calibration's own soft-L1 on log errors) under the shipped profile with the ridge slowdown set to each value of
a grid, the other factors as fitted, and how many of its closed-loop rows decode at a batch whose matmuls take
between half and twice their weights' time (the rows the term speaks to). A loss that barely moves over the grid
means the rows cannot tell the value: a fit would return its prior (docs/estimator.md, "The linear phase near the
ridge"). About two seconds.

`--steps GRID`: the engine's own steps identify it where level averages do not. For the kept steps of a first-party
grid (`GRID-steps.jsonl`, written by `benchmarks/engine.py measure`, with the grid's `GRID.csv` for its deployments),
per slowdown of the grid: the step factors (`sizing.perf.stepfit.STEP_FACTORS`) refitted to every model's steps
together, each model's median step error, decode and prefill steps apart, and each model's steps predicted from a fit
on the other model's alone. About 20 s a slowdown for the EPYC fp32 grid's 6,759 steps.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

#: Ridge slowdowns tried: the hard max, then up to no overlap at all (compute plus memory).
GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: A decode batch "near the ridge": its matmuls take between NEAR[0] and NEAR[1] times its weights' read.
NEAR = (0.5, 2.0)


#: Slowdowns the step scan tries (each a full refit of the step factors).
STEP_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", metavar="GRID", help="scan a first-party grid's kept engine steps instead")
    args = parser.parse_args()
    return steps_scan(Path(args.steps)) if args.steps else levels_scan()


def _grid_steps(grid: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(each model's deployment: config, memory fit and accelerator; each model's kept steps) of a grid's files."""
    from sizing.loadtest.stepsample import StepsSample
    from sizing.perf.calrows import read_rows
    from sizing.perf.fit import reference_catalog, row_config
    from sizing.perf.memory import memory_fit

    cat = reference_catalog()
    deployments: dict[str, Any] = {}
    for r in read_rows(grid.with_name(grid.name + ".csv")):
        if r.model not in deployments:
            cfg = row_config(r)
            deployments[r.model] = (cfg, memory_fit(cfg, cat), r.accelerator)
    steps: dict[str, list[Any]] = defaultdict(list)
    for line in grid.with_name(grid.name + "-steps.jsonl").read_text().splitlines():
        level = json.loads(line)
        if level.get("engine_steps"):
            steps[f"sizing-engine/{level['shape']}"] += StepsSample(**level["engine_steps"]).engine_steps()
    return deployments, dict(steps)


def steps_scan(grid: Path) -> int:
    from sizing.perf.calibration import profile_for
    from sizing.perf.fit import reference_catalog
    from sizing.perf.step import StepModel
    from sizing.perf.stepfit import fit_step_groups, modelled_s

    deployments, steps = _grid_steps(grid)
    models = sorted(m for m in steps if m in deployments)
    if not models:
        print(f"ridge: {grid}-steps.jsonl keeps no engine steps")
        return 2
    cat = reference_catalog()

    def builder(model: str, slowdown: float) -> Callable[[Any], Any]:
        cfg, fit, _ = deployments[model]
        return lambda prof: StepModel(cfg, fit, replace(prof, ridge_slowdown=slowdown), cat)

    def errors(prof: Any, model: str, slowdown: float) -> str:
        sm = builder(model, slowdown)(prof)
        timed = [s for s in steps[model] if s.duration_s]
        ratio = np.array([modelled_s(sm, s) / s.duration_s for s in timed])
        dec = np.array([s.prefills == 0 for s in timed])

        def err(mask: np.ndarray) -> str:
            r = ratio[mask]
            return f"{100 * np.median(np.abs(r - 1)):5.1f}% ({np.median(r):.2f}x)" if r.size else "-"

        return f"all {err(np.ones_like(dec))}, decode {err(dec)}, prefill {err(~dec)}"

    start = profile_for(deployments[models[0]][2], "vllm")
    print(f"{grid.name}: {', '.join(f'{m} {len(steps[m]):,}' for m in models)} kept steps; from the profile of"
          f" {start.family} x vllm; median step error (median modelled/measured)")  # fmt: skip
    for slowdown in STEP_GRID:
        fitted = fit_step_groups([(builder(m, slowdown), steps[m]) for m in models], start).profile
        print(f"ridge slowdown {slowdown:.2f}: " + ", ".join(f"{k} {getattr(fitted, k):.4g}" for k in
              ("compute_eff", "bandwidth_eff", "step_overhead_s", "seq_overhead_s")))  # fmt: skip
        for m in models:
            print(f"    {m:<26} {errors(fitted, m, slowdown)}")
        for train in models:
            alone = fit_step_groups([(builder(train, slowdown), steps[train])], start).profile
            for other in (m for m in models if m != train):
                print(f"    fitted on {train} alone, {other}: {errors(alone, other, slowdown)}")
    return 0


def levels_scan() -> int:
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
