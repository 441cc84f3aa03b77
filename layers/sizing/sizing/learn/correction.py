"""The refit: a small correction on top of the shipped reference profile, fitted on the team's measured levels.

Why not refit everything: `sizing calibrate` re-simulates every reference row hundreds of times (Nelder-Mead per
family and engine, then a fold per source and per study) -- about 8 minutes on two cores, far more than a refit
after a run should take. A team's runs rarely say anything about the efficiencies of other chips; what they say
is "on *this* hardware, with *this* model and engine build, the server runs k times slower (or faster) than the
estimate". So the refit fits, per (accelerator
family, engine, model) and pooled per (family, engine), two time scales:

- `prefill_scale` (from TTFT): prefill compute efficiency divided by it, per-request overhead multiplied by it;
- `decode_scale` (from TPOT and output throughput): bandwidth efficiency divided by it, per-step and
  per-sequence overheads multiplied by it.

A uniform slowdown of the server by k is then exactly scales of k (every step of the simulator, and so every
closed-loop figure, stretches by k). Each scale is the mean log residual log(measured/predicted) over the
levels of its key, shrunk towards 1 by `PRIOR_LEVELS` levels' worth of "the reference profile is right". The
residuals are against predictions made with the reference profile alone (stored on each level item), so
corrections never compound. The fit is closed-form: no simulation, milliseconds for thousands of levels
(`benchmarks/refit.py`).

Cross-validation on the team's rows is leave-one-level-out (each measured level predicted by a correction fitted
without it; one run of three levels already cross-validates). On the reference rows it reuses the shipped
profile's leave-one-source-out predictions: the correction is applied to those whose (family, engine, model) it
covers, and the error is recomputed -- the reference rows' own folds are unchanged, so this is exactly the
reference error the adopted profile would state.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: Levels' worth of prior weight on "the reference profile is right" (scale 1) for a (family, engine, model)
#: correction: one measured level moves the scale halfway towards what it measured, three levels three quarters
#: of the way (assumed: a single level can be a bad minute; a run's three levels agreeing is a finding).
PRIOR_LEVELS = 1.0
#: The pooled (family, engine) correction -- what other models on the same hardware get -- is shrunk harder
#: (assumed: a model's own slowdown transfers only partly to other models on the same chip).
PRIOR_LEVELS_POOLED = 3.0
#: Scales are clamped to [1/4, 4]: a server 4x off the model is a misconfiguration to look at, not a calibration
#: (the estimator's stated 80% intervals span at most ~0.4-2.6x predicted/measured, even widened for a family
#: with few held-out rows: docs/estimator.md, "Stated intervals").
MAX_SCALE = 4.0
#: The reference rows' cross-validated error may worsen by at most this much (1 percentage point of MdAPE) per
#: metric for a refit to be adopted (the issue's rule).
MAX_REFERENCE_WORSENING = 0.01
#: The team's cross-validated error must fall by more than this (MdAPE, absolute) for a refit to be adopted:
#: refits on a server at the estimate's own pace move it by a few tenths of a point (simulation noise), which is not
#: a correction worth adopting; a real offset moves it by several points (a 30%-slow server: 22.3% -> 8.3%).
MIN_TEAM_IMPROVEMENT = 0.01
#: Metrics a correction is fitted on and judged by (cross-validation metric names).
METRICS = ("ttft", "tpot", "throughput")
POOLED = "*"


def model_key(family: str, engine: str, model: str) -> str:
    return f"{family}/{engine}/{model}"


def pooled_key(family: str, engine: str) -> str:
    return f"{family}/{engine}/{POOLED}"


@dataclass(frozen=True)
class TeamRow:
    """One measured level as the refit sees it: what it was, predicted (reference profile) and measured."""

    level_id: str
    run_id: str
    family: str
    engine: str
    model: str
    #: metric -> (predicted by the reference profile, measured); latencies in ms, throughput in tokens/s
    figures: dict[str, tuple[float, float]]

    def residual(self, metric: str) -> float | None:
        """log(measured / predicted), signed so that positive is "slower than predicted" for every metric."""
        pair = self.figures.get(metric)
        if not pair or not pair[0] > 0 or not pair[1] > 0:
            return None
        pred, meas = pair
        r = math.log(meas / pred)
        return -r if metric == "throughput" else r


def _clamp(log_s: float) -> float:
    lim = math.log(MAX_SCALE)
    return max(-lim, min(lim, log_s))


def _parts(row: TeamRow) -> tuple[float | None, float | None]:
    """A level's prefill residual (TTFT) and decode residual (the mean of TPOT's and throughput's)."""
    rs = [r for r in (row.residual("tpot"), row.residual("throughput")) if r is not None]
    return row.residual("ttft"), (sum(rs) / len(rs) if rs else None)


@dataclass
class _Sums:
    """What a key's scales are computed from: sums and counts of the residuals, and the levels and runs."""

    p: float = 0.0
    np: int = 0
    d: float = 0.0
    nd: int = 0
    levels: int = 0

    def add(self, row: TeamRow, sign: int = 1) -> None:
        rp, rd = _parts(row)
        if rp is not None:
            self.p += sign * rp
            self.np += sign
        if rd is not None:
            self.d += sign * rd
            self.nd += sign
        self.levels += sign

    def without(self, row: TeamRow) -> _Sums:
        out = _Sums(self.p, self.np, self.d, self.nd, self.levels)
        out.add(row, -1)
        return out

    def scales(self, prior_levels: float, runs: int = 0) -> dict[str, Any]:
        log_d = _clamp(self.d / (self.nd + prior_levels)) if self.nd else 0.0
        # a key with no TTFT measured moves its prefill with its decode (the same server, the same slowdown)
        log_p = _clamp(self.p / (self.np + prior_levels)) if self.np else log_d
        return {
            "prefill_scale": round(math.exp(log_p), 5),
            "decode_scale": round(math.exp(log_d), 5),
            "levels": self.levels,
            "runs": runs,
        }


def _sums(rows: Sequence[TeamRow]) -> tuple[dict[str, _Sums], dict[str, set[str]]]:
    sums: dict[str, _Sums] = defaultdict(_Sums)
    runs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for key in (model_key(r.family, r.engine, r.model), pooled_key(r.family, r.engine)):
            sums[key].add(r)
            runs[key].add(r.run_id)
    return sums, runs


def _prior(key: str) -> float:
    return PRIOR_LEVELS_POOLED if key.endswith("/" + POOLED) else PRIOR_LEVELS


def screen(rows: Sequence[TeamRow]) -> tuple[list[TeamRow], list[str]]:
    """The levels a refit may learn from, and why each other one is refused: a level one of whose figures is more
    than MAX_SCALE off the reference prediction says the server is not the configuration predicted (another
    machine's figures filed under this hardware, a misconfigured engine), not that the estimator needs a small
    correction. Clamping such a level to MAX_SCALE would still drag every correction of its key towards it (a CPU
    server's figures filed under g4dn.xlarge read "+970%" and were refitted from)."""
    kept: list[TeamRow] = []
    refused: list[str] = []
    lim = math.log(MAX_SCALE)
    for row in rows:
        far = [
            (m, math.exp(abs(r)), "slower" if r > 0 else "faster")
            for m in METRICS
            if (r := row.residual(m)) is not None and abs(r) > lim
        ]
        if far:
            words = ", ".join(f"{m} {x:.1f}x {how}" for m, x, how in far)
            refused.append(
                f"refused level {row.level_id} (run {row.run_id}): {words} than predicted, beyond the {MAX_SCALE:g}x"
                " a calibration corrects: another configuration or machine, not a calibration"
            )
        else:
            kept.append(row)
    return kept, refused


def fit(rows: Sequence[TeamRow]) -> dict[str, dict[str, Any]]:
    """Corrections keyed `family/engine/model` and `family/engine/*` (pooled over the team's models)."""
    sums, runs = _sums(rows)
    return {k: v.scales(_prior(k), len(runs[k])) for k, v in sorted(sums.items())}


def lookup(
    corrections: dict[str, dict[str, Any]], family: str, engine: str, model: str | None
) -> tuple[str, dict[str, Any]] | None:
    """The correction that speaks for a (family, engine, model): the model's own, else the pooled one."""
    if model is not None and (c := corrections.get(model_key(family, engine, model))):
        return model_key(family, engine, model), c
    key = pooled_key(family, engine)
    return (key, corrections[key]) if key in corrections else None


def corrected(metric: str, predicted: float, correction: dict[str, Any] | None) -> float:
    """A reference-profile prediction of `metric` with the correction's scales applied (the closed-form effect of
    the scaled profile: TTFT with the prefill scale, TPOT with the decode scale, throughput divided by it)."""
    if not correction:
        return predicted
    if metric == "ttft":
        return predicted * float(correction["prefill_scale"])
    if metric == "tpot":
        return predicted * float(correction["decode_scale"])
    if metric == "throughput":
        return predicted / float(correction["decode_scale"])
    return predicted


def summary(apes: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        m: {"n": len(v), "mdape": round(statistics.median(v), 4)} for m, v in apes.items() if v
    }
    every = [a for v in apes.values() for a in v]
    out["overall"] = {"n": len(every), "mdape": round(statistics.median(every), 4) if every else None}
    return out


def team_error(
    rows: Sequence[TeamRow],
    corrections: dict[str, dict[str, Any]] | None,
    simulated: dict[tuple[str, str], float] | None = None,
) -> dict[str, Any]:
    """MdAPE per metric of the team's rows predicted with `corrections` (None: the reference profile alone);
    `simulated`: (level id, metric) -> the prediction of a level under a step correction, which has no closed
    form (`sizing.learn.stepcorrection.simulated`)."""
    apes: dict[str, list[float]] = {m: [] for m in METRICS}
    for row in rows:
        hit = lookup(corrections or {}, row.family, row.engine, row.model)
        for m in METRICS:
            pair = row.figures.get(m)
            if pair and pair[0] > 0 and pair[1] > 0:
                sim = (simulated or {}).get((row.level_id, m))
                p = sim if sim is not None else corrected(m, pair[0], hit[1] if hit else None)
                apes[m].append(abs(p / pair[1] - 1))
    return summary(apes)


def team_cv(rows: Sequence[TeamRow]) -> dict[str, Any]:
    """Leave-one-level-out: each level predicted by the correction fitted on every other level (the fit is sums
    per key, so each fold subtracts the level's own part: linear in the levels), with every held-out prediction
    (level, metric, predicted, measured)."""
    sums, _runs = _sums(rows)
    apes: dict[str, list[float]] = {m: [] for m in METRICS}
    preds: list[dict[str, Any]] = []
    for row in rows:
        hit: dict[str, Any] | None = None
        for key in (model_key(row.family, row.engine, row.model), pooled_key(row.family, row.engine)):
            rest = sums[key].without(row)
            if rest.levels > 0:
                hit = rest.scales(_prior(key))
                break
        for m in METRICS:
            pair = row.figures.get(m)
            if not pair or not pair[0] > 0 or not pair[1] > 0:
                continue
            p = corrected(m, pair[0], hit)
            apes[m].append(abs(p / pair[1] - 1))
            preds.append({"level": row.level_id, "metric": m, "predicted": round(p, 4), "measured": pair[1]})
    return {**summary(apes), "grouping": "level", "rows": preds}


@dataclass(frozen=True)
class ReferenceRow:
    """A reference row's shipped leave-one-source-out prediction, with what the correction keys on."""

    row_id: str
    family: str
    engine: str
    model: str
    metric: str
    predicted: float
    measured: float
    #: the row measured the engine build the product deploys (corrections apply to it) -- not an older build
    product_build: bool = True


def reference_rows(data: dict[str, Any], normalised: Iterable[dict[str, str]]) -> list[ReferenceRow]:
    """The shipped profile's leave-one-source-out predictions (`data["cross_validation"]["rows"]`; a profile that
    carries only its leave-one-harness-out table gives those) joined with the normalised reference rows (for each
    row's model and engine build)."""
    meta = {r["row_id"]: r for r in normalised}
    out: list[ReferenceRow] = []
    held = (data.get("cross_validation") or {}).get("rows") or (
        data.get("cross_validation_by_harness") or {}
    ).get("rows", [])
    for r in held:
        if r.get("metric") not in METRICS or not r.get("predicted") or not r.get("measured"):
            continue
        m = meta.get(r["row_id"], {})
        out.append(
            ReferenceRow(
                r["row_id"],
                r["family"],
                r["engine"],
                m.get("model", ""),
                r["metric"],
                float(r["predicted"]),
                float(r["measured"]),
                not m.get("build"),
            )
        )
    return out


#: How a reference row is predicted under a step correction (`sizing.learn.stepcorrection.reference_prediction`):
#: its factors replace the profile's, so no closed form gives the row's new figure; None keeps the row's own.
Repredict = Callable[[ReferenceRow, dict[str, Any]], float | None]


def reference_error(
    rows: Sequence[ReferenceRow],
    corrections: dict[str, dict[str, Any]] | None,
    repredict: Repredict | None = None,
) -> dict[str, Any]:
    """The reference rows' cross-validated MdAPE per metric with `corrections` applied where they speak (a step
    correction's rows re-predicted by `repredict`), and how many row predictions they changed."""
    apes: dict[str, list[float]] = {m: [] for m in METRICS}
    changed = 0
    for r in rows:
        hit = lookup(corrections or {}, r.family, r.engine, r.model) if r.product_build else None
        if hit is not None and hit[1].get("steps") and repredict is not None:
            p = repredict(r, hit[1]) or r.predicted
        else:
            p = corrected(r.metric, r.predicted, hit[1] if hit else None)
        changed += p != r.predicted
        apes[r.metric].append(abs(p / r.measured - 1))
    return {**summary(apes), "changed_predictions": changed}


def decide(
    team_before: dict[str, Any],
    team_after: dict[str, Any],
    ref_before: dict[str, Any],
    ref_after: dict[str, Any],
) -> tuple[bool, list[str]]:
    """The adoption rule: the team's cross-validated error improves, and the reference rows' error worsens by no
    more than `MAX_REFERENCE_WORSENING` on any metric. Returns (adopt, the reasons in words)."""
    reasons: list[str] = []
    before = (team_before.get("overall") or {}).get("mdape")
    after = (team_after.get("overall") or {}).get("mdape")
    # an improvement smaller than the noise of a refit on levels the estimate already predicts (a server at the
    # estimate's own pace reads 0.6% -> 0.4%) is not signal: it adopts nothing
    team_ok = before is not None and after is not None and after < before - MIN_TEAM_IMPROVEMENT
    if before is None or after is None:
        reasons.append("no measured level to cross-validate on")
    else:
        if team_ok:
            verb = "improves"
        elif after < before:
            verb = f"does not improve enough (by less than the {MIN_TEAM_IMPROVEMENT * 100:.0f} point a correction needs)"
        else:
            verb = "does not improve"
        reasons.append(f"team's cross-validated error {verb}: {before:.1%} -> {after:.1%}")
    ref_ok = True
    for m in METRICS:
        b = (ref_before.get(m) or {}).get("mdape")
        a = (ref_after.get(m) or {}).get("mdape")
        if b is None or a is None:
            continue
        if a - b > MAX_REFERENCE_WORSENING:
            ref_ok = False
            reasons.append(
                f"reference rows' {m} error worsens {b:.1%} -> {a:.1%} (more than"
                f" {MAX_REFERENCE_WORSENING * 100:.0f} point)"
            )
    if ref_ok:
        reasons.append(
            f"reference rows' error within {MAX_REFERENCE_WORSENING * 100:.0f} point on every metric"
            f" ({ref_after.get('changed_predictions', 0)} predictions changed)"
        )
    return team_ok and ref_ok, reasons


def adoptable(
    candidate: dict[str, dict[str, Any]],
    team_before: dict[str, Any],
    team_after: dict[str, Any],
    ref_rows: Sequence[ReferenceRow],
    ref_before: dict[str, Any],
    repredict: Repredict | None = None,
) -> tuple[dict[str, dict[str, Any]], bool, list[str], dict[str, Any]]:
    """What of `candidate` may be adopted: all of it when `decide` says so; else, where the pooled correction (what
    other models on the hardware would get) is what worsens the reference rows, the models' own corrections without
    it -- the team's error is the same either way, since each measured model looks its own correction up first.
    Returns (the corrections, adopt, the reasons in words, the reference error with them applied)."""
    ref_after = reference_error(ref_rows, candidate, repredict)
    adopt, reasons = decide(team_before, team_after, ref_before, ref_after)
    own = {k: v for k, v in candidate.items() if not k.endswith(f"/{POOLED}")}
    if adopt or not own or len(own) == len(candidate):
        return candidate, adopt, reasons, ref_after
    own_after = reference_error(ref_rows, own, repredict)
    own_adopt, own_reasons = decide(team_before, team_after, ref_before, own_after)
    if not own_adopt:
        return candidate, adopt, reasons, ref_after
    worse = [r for r in reasons if r.startswith("reference rows'")]
    return own, True, [*own_reasons, "the pooled correction for other models on this hardware left out: with it, "
                       + "; ".join(worse)], own_after  # fmt: skip
