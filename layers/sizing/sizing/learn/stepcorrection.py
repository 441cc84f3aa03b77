"""The refit's second kind of correction: the step time's factors, fitted to the measured server's own steps.

The closed-form correction (`sizing.learn.correction`) stretches prefill and decode by one scale each, learnt from
the levels' averages. A step is a fixed cost (the weights read, the engine's own work) plus a cost per running
sequence, and where the reference profile has their split wrong, one stretch learnt at the run's loads moves every
other load the wrong way: on the engine tier's small-llama, from a reference fitted without that model, the levels'
stretch (decode x1.16 at two requests a second) took the error at the grid's 14 other levels from TPOT 16.5% to
23.1% and throughput 12.7% to 21.3% (docs/engine.md, "The learning loop").

Every level a run measures keeps a sample of the engine's steps, rebuilt from its streamed chunks
(`sizing.loadtest.stepsample`), the capacity search's fuller levels included. Here the profile's step factors
(`sizing.perf.stepfit.STEP_FACTORS`: compute and bandwidth efficiency, at most 1, the cost of a step and of a running
sequence) are fitted to those steps from the reference profile, and the per-request cost to the first tokens at an
idle engine. The result is cross-validated exactly as the stretch is -- each measured closed-loop level predicted by
a fit without its own steps, by simulation -- and the refit keeps, per model, whichever of the two predicts the
team's held-out levels better (`sizing.learn.refit.with_steps`).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sizing.base.distributions import TokenDistribution
from sizing.learn.correction import METRICS, ReferenceRow, model_key
from sizing.learn.levels import LevelSteps, MeasuredLevel, simulate_closed
from sizing.perf.calibration import PROFILE_PATH, load_profiles, profile_for
from sizing.perf.calrows import NORMALISED, read_rows
from sizing.perf.fit import predict_row
from sizing.perf.profile import STEP_CORRECTION_FACTORS, Profile
from sizing.perf.step import StepModel
from sizing.perf.stepfit import MIN_STEPS, STEP_FACTORS, fit_step_groups, idle_overhead

#: Steps one fit reads at most, picked evenly from all the key's levels: a run's levels keep up to 400 steps each
#: (`sizing.loadtest.stepsample.STEPS_KEPT`), and a fit's time grows with its steps (~1.5 s per 1,000 steps on this
#: product's 2-core build box, `benchmarks/refit.py`); 1,200 settle the four factors within a few percent of a fit
#: on all of small-llama's 3,155 steps.
FIT_STEPS = 1200
#: Seconds of step fits a refit starts models within: the calibration function has 120 s (template.yaml), a model's
#: fits take a few seconds each (one on all its steps, one per closed-loop level held out), and the models a run just
#: measured come first; those past it keep the stretch until a later refit reaches them.
STEP_FIT_BUDGET_S = 60.0


@dataclass(frozen=True)
class FittedSteps:
    """A model's step factors fitted to its measured steps."""

    factors: dict[str, float]
    steps: int  # timed steps fitted
    levels: int  # levels they came from
    mdape_before: float  # the reference profile's median step error on them
    mdape_after: float


def reference_profile(accelerator: str, engine: str) -> Profile:
    """The reference profile alone (no team correction): what a step fit starts from."""
    return profile_for(accelerator, engine, load_profiles(str(PROFILE_PATH)))


def _evenly(items: list[Any], at_most: int) -> list[Any]:
    if len(items) <= at_most:
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, at_most)]


def _builder(cfg: Any, cat: Any) -> Callable[[Profile], StepModel]:
    return lambda prof: StepModel.for_config(cfg, profile=prof, catalog=cat)


def fit(items: Sequence[LevelSteps], cat: Any) -> FittedSteps | None:
    """The step factors of one (family, engine, model) fitted to the steps of `items` (levels of its runs) from the
    reference profile; None with fewer than `MIN_STEPS` timed steps."""
    usable = [it for it in items if it.sample.steps]
    if not usable:
        return None
    start = reference_profile(usable[0].accelerator, usable[0].engine)
    by_deployment: dict[str, tuple[Callable[[Profile], StepModel], list[Any], list[tuple[float, int]]]] = {}
    total = sum(len(it.sample.steps) for it in usable)
    for it in usable:
        cfg = it.steps_config(cat)
        key = repr(cfg)
        if key not in by_deployment:
            by_deployment[key] = (_builder(cfg, cat), [], [])
        _, steps, idle = by_deployment[key]
        # each level's share of the fit's steps, in proportion to what it kept
        share = max(1, math.ceil(FIT_STEPS * len(it.sample.steps) / total))
        steps.extend(_evenly(it.sample.engine_steps(), share))
        idle.extend((ms / 1e3, tokens) for ms, tokens in it.sample.idle_first_tokens)
    groups = [(builder, steps) for builder, steps, _ in by_deployment.values()]
    if sum(len(s) for _, s in groups) < MIN_STEPS:
        return None
    res = fit_step_groups(groups, start)
    factors = {f: float(getattr(res.profile, f)) for f in STEP_FACTORS}
    overheads = [
        o
        for builder, _, idle in by_deployment.values()
        if idle and (o := idle_overhead(idle, builder(res.profile))) is not None
    ]
    factors["request_overhead_s"] = (
        float(statistics.median(overheads)) if overheads else start.request_overhead_s
    )
    return FittedSteps(
        factors={k: round(v, 6) for k, v in factors.items()},
        steps=res.steps,
        levels=len(usable),
        mdape_before=round(res.mdape_before, 4),
        mdape_after=round(res.mdape_after, 4),
    )


def _drawn(mean: float, sigma: float | None) -> TokenDistribution:
    """The lengths a level's client drew around `mean`: lognormal with the workload's `sigma`, else fixed (as the
    reference rows' are read, `sizing.perf.fit`)."""
    return TokenDistribution.lognormal(mean, sigma) if sigma else TokenDistribution.fixed(round(mean))


def simulate_level(
    level: MeasuredLevel, profile: Profile, items: Sequence[LevelSteps], cat: Any
) -> dict[str, float]:
    """A closed-loop level re-simulated with `profile` on its deployment as the server reported it (the facts its
    steps item kept), its own drawn lengths: metric -> predicted (TTFT and TPOT means in ms, output tokens/s)."""
    facts = next((it.server_facts for it in items if it.measures(level)), None)
    cfg = level.config(cat, facts)
    sim = simulate_closed(
        StepModel.for_config(cfg, profile=profile, catalog=cat),
        level.level,
        level.lockstep_group,
        _drawn(level.input_tokens, level.input_sigma),
        _drawn(level.output_tokens, level.output_sigma),
        level.shared_prefix_tokens,
        level.warmup_s,
    )
    return {"ttft": sim.ttft_ms.mean, "tpot": sim.tpot_ms.mean, "throughput": sim.output_tokens_per_s}


@dataclass(frozen=True)
class StepCorrection:
    """A model's step correction and its cross-validation on the team's levels of that model."""

    key: str
    fitted: FittedSteps
    #: each held-out prediction: level id, metric, predicted (by a fit without that level's steps), measured
    cv_rows: list[dict[str, Any]]

    def entry(self, runs: int) -> dict[str, Any]:
        """The correction as a profile version stores it (`sizing.learn.correction`'s keys, with `steps`)."""
        return {
            "prefill_scale": 1.0,
            "decode_scale": 1.0,
            "steps": {
                **self.fitted.factors,
                "timed_steps": self.fitted.steps,
                "step_levels": self.fitted.levels,
                "step_error_before": self.fitted.mdape_before,
                "step_error_after": self.fitted.mdape_after,
            },
            "levels": len({r["level"] for r in self.cv_rows}),
            "runs": runs,
        }


def learn(
    levels: Sequence[MeasuredLevel],
    items: Sequence[LevelSteps],
    cat: Any,
    budget_s: float = STEP_FIT_BUDGET_S,
) -> tuple[dict[str, StepCorrection], list[str]]:
    """Per (family, engine, model) with enough steps: the step correction fitted to all its steps, and each of its
    closed-loop levels predicted by a fit without that level's steps (leave one level out, as the stretch's
    cross-validation). A key whose fit fails or cannot simulate a level is left to the stretch. Models are taken
    newest measurement first; none is started once `budget_s` has passed, and those left are named (the second
    element) and keep the stretch."""
    out: dict[str, StepCorrection] = {}
    by_key: dict[str, list[LevelSteps]] = {}
    for it in items:
        by_key.setdefault(model_key(it.family, it.engine, it.model), []).append(it)
    started = time.monotonic()
    left: list[str] = []
    for key in sorted(by_key, key=lambda k: max(it.recorded_at for it in by_key[k]), reverse=True):
        its = by_key[key]
        if time.monotonic() - started > budget_s:
            left.append(key)
            continue
        mine = [lv for lv in levels if model_key(lv.family, lv.engine, lv.model) == key]
        try:
            whole = fit(its, cat)
            if whole is None or not mine:
                continue
            rows: list[dict[str, Any]] = []
            for lv in mine:
                rest = fit([it for it in its if not it.measures(lv)], cat)
                if rest is None:
                    continue
                prof = reference_profile(lv.accelerator, lv.engine).with_step_factors(rest.factors)
                got = simulate_level(lv, prof, its, cat)
                for metric, (_, measured) in lv.figures().items():
                    p = got.get(metric)
                    if metric in METRICS and p is not None and math.isfinite(p) and p > 0:
                        rows.append(
                            {
                                "level": lv.level_id,
                                "metric": metric,
                                "predicted": round(p, 4),
                                "measured": measured,
                            }
                        )
        except (ValueError, KeyError, ArithmeticError):
            continue
        if rows:
            out[key] = StepCorrection(key, whole, rows)
    return out, left


def simulated(
    levels: Sequence[MeasuredLevel], items: Sequence[LevelSteps], corrections: dict[str, Any], cat: Any
) -> dict[tuple[str, str], float]:
    """(level id, metric) -> the level's prediction under the step correction `corrections` holds for its model
    (in sample: the adopted correction's figures, which a stretch's closed form does not give)."""
    out: dict[tuple[str, str], float] = {}
    for lv in levels:
        c = corrections.get(model_key(lv.family, lv.engine, lv.model)) or {}
        if not c.get("steps"):
            continue
        try:
            got = simulate_level(
                lv, reference_profile(lv.accelerator, lv.engine).with_step_factors(c["steps"]), items, cat
            )
        except (ValueError, KeyError, ArithmeticError):
            continue
        out.update({(lv.level_id, m): v for m, v in got.items() if math.isfinite(v) and v > 0})
    return out


@functools.cache
def _reference_rows() -> dict[str, Any]:
    return {r.row_id: r for r in read_rows(NORMALISED)}


def reference_prediction(row: ReferenceRow, correction: dict[str, Any]) -> float | None:
    """A reference row of a model the team's step correction covers, predicted with the correction's factors in
    place of the reference profile's (None: the row cannot be re-simulated; it keeps its own prediction)."""
    factors = tuple(sorted((f, float(correction["steps"][f])) for f in STEP_CORRECTION_FACTORS))
    v = _repredicted(row.row_id, factors).get(row.metric)
    return float(v) if v is not None and math.isfinite(v) and v > 0 else None


@functools.lru_cache(maxsize=256)
def _repredicted(row_id: str, factors: tuple[tuple[str, float], ...]) -> dict[str, float]:
    """Every metric of a reference row under a step correction's `factors`: simulated once, whichever of the row's
    metrics (and however many times the adoption rule) asks."""
    cal = _reference_rows().get(row_id)
    if cal is None:
        return {}
    try:
        return predict_row(
            cal, reference_profile(cal.accelerator, cal.engine).with_step_factors(dict(factors))
        )
    except (ValueError, KeyError, ArithmeticError):
        return {}


def key_error(rows: Sequence[dict[str, Any]]) -> float | None:
    """The median absolute error of held-out predictions (every metric together)."""
    apes = [abs(r["predicted"] / r["measured"] - 1) for r in rows if r["measured"]]
    return statistics.median(apes) if apes else None


__all__ = [
    "FIT_STEPS",
    "STEP_FIT_BUDGET_S",
    "FittedSteps",
    "StepCorrection",
    "fit",
    "key_error",
    "learn",
    "reference_prediction",
    "simulated",
]
