"""The step time's factors fitted to an engine's own steps, as a client saw them.

A level's averages mix every kind of step: a one-stream level is mostly decode steps of one sequence, a Poisson
level at 0.8 of saturation steps of 20-40 sequences with a prompt in one of three. Fitted on averages, the per-step
and per-sequence costs trade against each other and against the efficiencies: against small-llama's own steps the
CPU family's level-fitted profile is 13-17% slow for one to seven running sequences and 11-13% fast for 32 or more
(the engine spends 1.07 ms a step on each sequence, the profile 0.39), and the error grows with the load.

`sizing.loadtest.steps.rebuild` gives the engine's steps back from a load test's request records. This fits the
profile's step factors (`STEP_FACTORS`: compute and bandwidth efficiency, the cost of a step and of each running
sequence in it) to those steps, one at a time, through the same `StepModel.iteration_time` the simulator runs.
Efficiencies stay at or below 1 of the datasheet figures. The per-request cost (arrival to scheduler, first chunk out) is in no step: it
is read from the first tokens of requests that arrived at an idle engine (`request_overhead`).

Fitted on tiny-llama's steps at one and four streams (two levels, 30 s of load), the profile predicted the engine
grids' other levels of all three model shapes about as well as the best level fit of the same budget, and more
evenly (TTFT 22%, TPOT 16-17%, throughput 9-12% median error); from a start that is off (a reference fitted without
the model), small-llama's short steps moved its throughput error from 12.7% to 4.5-6.4%, where one uniform stretch
fitted to the same levels' averages read 21% (docs/engine.md, "Steps the client saw").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..loadtest.metrics import RequestRecord
from ..loadtest.steps import EngineStep, idle_first_tokens_of
from .optimizer import nelder_mead
from .profile import STEP_FACTORS, Profile
from .step import StepModel

#: Weight of the pull towards the starting profile, per squared log of each factor's move: to one model's steps its
#: weights' read time and a step's own cost are one constant (both paid once a step), so the steps fix their sum and
#: not how it splits. Two runs of small-llama, fitted without a pull, split it as bandwidth 0.61 with 0.1 ms a step
#: and as 1.0 (the cap) with 32 ms, and predicted each other's steps within 3.6-4.9%; held at a start's bandwidth
#: instead, a start whose weights alone read slower than the engine's whole step (0.53, fitted without the model)
#: left the fit nothing to move but the other costs, to zero. The pull settles the split nearest the start and costs
#: a factor moved 2x 0.005, against a loss of 0.2-1 over the steps (`LOSS_SCALE`).
PRIOR_WEIGHT = 0.01
#: Fractions of the datasheet's figures: a fit may not go beyond them.
EFFICIENCIES = ("compute_eff", "bandwidth_eff")
#: Scale of the fit's robust loss, log(1 + (log(modelled/measured) / scale)^2): a step off by a few percent weighs
#: as in least squares, one off by 2x barely more than one off by 30%. A rebuilt step can be wrong -- a prompt
#: longer than the token budget prefilled over two steps shows in the second only; a step after a stall of the
#: client reads its gap -- and such steps read 3-8x their neighbours (small-llama: 1-2% of them).
LOSS_SCALE = 0.1
#: Nelder-Mead evaluations: four factors in log space settle within 150-250 (a few seconds over 3,000 steps).
FIT_EVALS = 400
#: Fewest timed steps a fit needs: the four factors from fewer would rest on a handful of each kind of step.
MIN_STEPS = 50


@dataclass(frozen=True)
class StepFit:
    """A profile fitted to an engine's steps and how well the steps say it holds."""

    profile: Profile
    steps: int  # timed steps fitted
    mdape_before: float  # median |modelled/measured - 1| with the starting profile
    mdape_after: float
    median_ratio: float  # modelled/measured after the fit


def modelled_s(sm: StepModel, s: EngineStep) -> float:
    """The step model's time for the step `s` rebuilt: its prefills each a prompt from an empty context."""
    if s.prefills:
        return sm.iteration_time(
            s.prefill_tokens, s.decode_seqs, s.context_tokens, s.prefill_pairs, s.prefills
        )
    return sm.iteration_time(0, s.decode_seqs, s.context_tokens)


def _ratios(model: Callable[[Profile], StepModel], prof: Profile, steps: Sequence[EngineStep]) -> np.ndarray:
    sm = model(prof)
    got = np.array([modelled_s(sm, s) for s in steps])
    want = np.array([s.duration_s for s in steps], dtype=float)
    return np.asarray(got / want)


def fit_steps(steps: Sequence[EngineStep], model: Callable[[Profile], StepModel], start: Profile) -> StepFit:
    """`start` with its `STEP_FACTORS` fitted to the timed `steps` (`model` builds the deployment's step model for a
    profile). Raises ValueError with fewer than `MIN_STEPS` timed steps."""
    return fit_step_groups([(model, steps)], start)


def fit_step_groups(
    groups: Sequence[tuple[Callable[[Profile], StepModel], Sequence[EngineStep]]], start: Profile
) -> StepFit:
    """`fit_steps` over the steps of several deployments of one hardware family (each group: its step model's
    builder and its steps): one set of factors for all of them. Raises ValueError with fewer than `MIN_STEPS` timed
    steps in all."""
    timed = [
        (model, [s for s in steps if s.duration_s is not None and s.duration_s > 0])
        for model, steps in groups
    ]
    timed = [(m, ts) for m, ts in timed if ts]
    n = sum(len(ts) for _, ts in timed)
    if n < MIN_STEPS:
        raise ValueError(f"{n} timed steps; a step fit needs {MIN_STEPS} or more")
    x0 = [math.log(getattr(start, f)) for f in STEP_FACTORS]

    def profile(x: Sequence[float]) -> Profile:
        vals: dict[str, Any] = {f: math.exp(v) for f, v in zip(STEP_FACTORS, x, strict=True)}
        for f in EFFICIENCIES:
            vals[f] = min(vals[f], 1.0)
        return replace(start, **vals)

    def ratios(prof: Profile) -> np.ndarray:
        return np.concatenate([_ratios(m, prof, ts) for m, ts in timed])

    weights = kind_weights([s for _, ts in timed for s in ts])

    def loss(x: list[float]) -> float:
        r = ratios(profile(x))
        pull = PRIOR_WEIGHT * sum((a - b) ** 2 for a, b in zip(x, x0, strict=True))
        return float(np.dot(weights, np.log1p((np.log(r) / LOSS_SCALE) ** 2))) + pull

    best = profile(nelder_mead(loss, x0, step=0.3, max_evals=FIT_EVALS))
    before, after = ratios(start), ratios(best)
    return StepFit(
        profile=best,
        steps=n,
        mdape_before=float(np.median(np.abs(before - 1))),
        mdape_after=float(np.median(np.abs(after - 1))),
        median_ratio=float(np.median(after)),
    )


def kind_weights(steps: Sequence[EngineStep]) -> np.ndarray:
    """Each step's weight in the fit, summing to 1: the steps that finish prompts and the decode-only ones weigh
    alike as two kinds (each kind's steps alike within it), where either is there. A run of one length at one and
    two streams keeps ~790 decode steps and ~8 that prefill: weighed one step one vote, the decode steps -- which a
    running sequence's cost and compute efficiency explain equally well at batch 1 and 2 -- set the compute
    efficiency (0.063 in one run, where its prefills said ~0.09), and the fitted model read the grid's first tokens
    98% off. Weighed by kind, five runs on the EPYC box fitted 0.088-0.094 (one step one vote: 0.063-0.104)
    (docs/engine.md, "The learning loop")."""
    prefills = np.array([s.prefills > 0 for s in steps], dtype=bool)
    n_pre = int(prefills.sum())
    n_dec = len(steps) - n_pre
    if not n_pre or not n_dec:
        return np.full(len(steps), 1.0 / max(len(steps), 1))
    return np.where(prefills, 0.5 / n_pre, 0.5 / n_dec)


def request_overhead(records: Sequence[RequestRecord], sm: StepModel) -> float | None:
    """The per-request cost the first tokens say (`idle_overhead`) over requests sent while no other was in flight
    (`sizing.loadtest.steps.idle_first_tokens_of`). None when no request arrived at an idle engine."""
    return idle_overhead([pair for _, pair in idle_first_tokens_of(records)], sm)


def idle_overhead(first_tokens: Sequence[tuple[float, int]], sm: StepModel) -> float | None:
    """The per-request cost: over (first token s, prompt tokens) of requests that reached an idle engine (so the
    first token is the request's own cost and its prompt's step alone), the median of the first token less the step
    model's time for that prompt's step. None when there are none."""
    alone = [ttft - sm.iteration_time(tokens, 0, 0.0) for ttft, tokens in first_tokens]
    return max(float(np.median(alone)), 0.0) if alone else None


#: Running sequences per bucket of decode-only steps, and of steps that also finish prompts.
DECODE_BUCKETS = ((1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 1 << 20))
MIXED_BUCKETS = ((0, 4), (4, 16), (16, 1 << 20))


def _bucket_name(lo: int, hi: int) -> str:
    if hi >= 1 << 20:
        return f"{lo}+ seqs"
    return "1 seq" if (lo, hi) == (1, 2) else (f"{lo} seqs" if hi == lo + 1 else f"{lo}-{hi - 1} seqs")


def by_kind(steps: Sequence[EngineStep], sm: StepModel, min_steps: int = 5) -> dict[str, Any]:
    """The timed `steps` against the step model `sm`, by kind of step: decode only, by running sequences; finishing
    one, two, or three or more prompts, by running sequences. Per kind (`min_steps` or more): the steps, the
    measured 10th/50th/90th percentile ms, the mean prompt, the modelled median ms and the median modelled/measured;
    over all timed steps the median ratio, its 10th-90th percentiles and the median error."""
    timed = [s for s in steps if s.duration_s]
    if not timed:
        return {"timed": 0, "rebuilt": len(steps), "kinds": []}
    meas = np.array([s.duration_s for s in timed], dtype=float) * 1e3
    model = np.array([modelled_s(sm, s) for s in timed]) * 1e3
    dec = np.array([s.decode_seqs for s in timed])
    pre = np.array([s.prefills for s in timed])
    toks = np.array([s.prefill_tokens for s in timed], dtype=float)
    kinds: list[tuple[str, np.ndarray]] = [
        (f"decode only, {_bucket_name(lo, hi)}", (pre == 0) & (dec >= lo) & (dec < hi))
        for lo, hi in DECODE_BUCKETS
    ]
    for n in (1, 2, 3):
        many = pre >= n if n == 3 else pre == n
        label = f"{n}{'+' if n == 3 else ''} prompt{'s' if n > 1 else ''}"
        kinds += [
            (f"{label}, {_bucket_name(lo, hi)}", many & (dec >= lo) & (dec < hi)) for lo, hi in MIXED_BUCKETS
        ]
    rows = []
    for name, mask in kinds:
        if int(mask.sum()) < min_steps:
            continue
        m, p = meas[mask], model[mask]
        prompt = float((toks[mask] / np.maximum(pre[mask], 1)).mean()) if pre[mask].any() else 0.0
        rows.append(
            {
                "kind": name,
                "steps": int(mask.sum()),
                "measured_ms": {
                    q: round(float(np.percentile(m, v)), 2)
                    for q, v in (("p10", 10), ("p50", 50), ("p90", 90))
                },
                "prompt_tokens": round(prompt, 1),
                "modelled_ms": round(float(np.median(p)), 2),
                "ratio": round(float(np.median(p / m)), 3),
            }
        )
    ratio = model / meas
    return {
        "timed": len(timed),
        "rebuilt": len(steps),
        "kinds": rows,
        "median_ratio": round(float(np.median(ratio)), 3),
        "ratio_p10_p90": [
            round(float(np.percentile(ratio, 10)), 3),
            round(float(np.percentile(ratio, 90)), 3),
        ],
        "mdape": round(float(np.median(np.abs(ratio - 1))), 4),
    }


__all__ = [
    "DECODE_BUCKETS",
    "FIT_EVALS",
    "LOSS_SCALE",
    "MIN_STEPS",
    "MIXED_BUCKETS",
    "PRIOR_WEIGHT",
    "STEP_FACTORS",
    "StepFit",
    "by_kind",
    "fit_step_groups",
    "fit_steps",
    "idle_overhead",
    "modelled_s",
    "request_overhead",
]
