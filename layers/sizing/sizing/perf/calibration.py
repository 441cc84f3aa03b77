"""The shipped calibration profile: efficiency factors per (accelerator family, engine), loaded lazily once.

`sizing calibrate` regenerates `data/calibration.json` from the reference measurements (see
`sizing.perf.fit`). Look-ups fall back explicitly: (family, engine) -> (family, any engine) with a wider stated
error -> the nearest relative family -> the global profile; the fallback taken is named in `Profile.basis`. A
(family, engine) entry with no rows of its own was derived from the engine's earlier generation on the family
(`sizing.perf.fit.GENERATIONS`); it states its derivation and a wider error too. A metric no held-out row of the
family measured states the all-families error, widened (`_fleet_error`), so every prediction states one.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from sizing.perf.amplification import AMPLIFIED_METRICS, error_exponent
from sizing.perf.profile import Profile

#: The reference profile every estimate starts from: the shipped one, or the file `SIZING_REFERENCE_PROFILE` names
#: (the same form: what the product would say under another calibration, as `benchmarks/engine.py learning
#: --unseen-model` asks of a profile that never saw the model it measures)
REFERENCE_PROFILE_ENV = "SIZING_REFERENCE_PROFILE"
PROFILE_PATH = Path(
    os.environ.get(REFERENCE_PROFILE_ENV) or Path(__file__).parent / "data" / "calibration.json"
)
#: Origin of measured rows that came from a local twin: the twin serves at the pace the estimator predicts, so its
#: rows would calibrate the model against itself; calibration refuses them.
TWIN_ORIGIN = "twin"

#: Accelerator -> calibration family: chips of one architecture and memory technology share efficiencies.
FAMILY: dict[str, str] = {
    "t4": "t4",
    "a10g": "a10g",
    "l4": "l4",
    "l40s": "l40s",
    "a100-40gb": "a100",
    "a100-80gb": "a100",
    "a100-80gb-pcie": "a100",
    "h100": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "inferentia2": "neuron-v2",
    "trainium": "neuron-v2",
    "trainium2": "neuron-v3",
}
#: Nearest relative of a family with no measurements: same generation or memory technology.
RELATIVE: dict[str, str] = {
    "t4": "a10g",  # GDDR6, PCIe, inference part
    "a10g": "l4",
    "l4": "a10g",
    "l40s": "a10g",
    "a100": "hopper",
    "hopper": "a100",
    "blackwell": "hopper",
    "neuron-v3": "neuron-v2",
    "neuron-v2": "neuron-v3",
    # the other CPU vLLM's CPU backend serves here: fitted on its own fp32 rows; the Xeon's efficiencies on its own
    # (AVX2) peaks, error widened, only for an engine without them (docs/engine.md, "An EPYC Milan box")
    "epyc-milan": "xeon-spr",
    # the next EPYC: fitted on its own bf16 rows; Milan's efficiencies on its own (AVX-512) peaks, error widened, only
    # for an engine without them (docs/engine.md, "An EPYC Genoa box")
    "epyc-genoa": "epyc-milan",
}
#: An engine with no rows on a family borrows the family's pooled profile; its stated error widens by this
#: factor (assumed: engines on one chip differ by up to ~1.5x in published comparisons).
FALLBACK_ERROR_WIDENING = 1.5


#: CPU processors (data/cpus.yaml): a CPU instance's accelerator is `<processor>-<instance type>`, and every size of
#: every family on one processor shares its efficiencies (the sizes differ in cores and bandwidth share, which the
#: step model reads from the catalog).
CPU_PROCESSORS = ("xeon-spr", "epyc-milan", "epyc-genoa")


def family_of(accelerator_id: str) -> str:
    for processor in CPU_PROCESSORS:
        if accelerator_id.startswith(f"{processor}-"):
            return processor
    return FAMILY.get(accelerator_id, accelerator_id)


def kind_of(family: str) -> str:
    """GPU families share software stacks (CUDA engines) and datasheet conventions; Neuron generations share the
    Neuron SDK; CPUs run vLLM's CPU backend."""
    if family in CPU_PROCESSORS:
        return "cpu"
    return "neuron" if family.startswith("neuron") else "gpu"


@functools.cache
def load_profiles(path: str = str(PROFILE_PATH)) -> dict[str, Any]:
    """The calibration file as a dict (empty profiles when it has not been generated yet)."""
    p = Path(path)
    if not p.exists():
        return {"version": "none", "date": None, "profiles": {}, "global": None}
    data: dict[str, Any] = json.loads(p.read_text())
    return data


#: The metrics a profile states its expected error for.
ERROR_METRICS = ("ttft", "tpot", "throughput")


def _fleet_error(data: dict[str, Any]) -> dict[str, float]:
    """Per metric, the error over every family (leave-one-harness-out, else leave-one-study-out), widened: what a
    profile states for a metric no held-out row of its own family measured (e.g. TPOT on a family whose sources
    published none)."""
    table = (data.get("cross_validation_by_harness") or data.get("cross_validation_by_study") or {}).get(
        "by_metric", {}
    )
    return {
        m: round(table[m]["mdape"] * FALLBACK_ERROR_WIDENING, 3)
        for m in ERROR_METRICS
        if isinstance(table.get(m, {}).get("mdape"), int | float)
    }


def _profile(
    entry: dict[str, Any], family: str, engine: str, basis: str, version: str, widen: float = 1.0
) -> Profile:
    err = {
        k: (round(v * widen, 3) if isinstance(v, int | float) else v)
        for k, v in entry.get("expected_error", {}).items()
    }
    return Profile(
        compute_eff=entry["compute_eff"],
        bandwidth_eff=entry["bandwidth_eff"],
        step_overhead_s=entry["step_overhead_s"],
        seq_overhead_s=entry.get("seq_overhead_s", 0.0),
        request_overhead_s=entry.get("request_overhead_s", 0.0),
        moe_eff=entry.get("moe_eff", 1.0),
        ridge_slowdown=entry.get("ridge_slowdown", 0.0),
        family=family,
        engine=engine,
        basis=basis,
        version=version,
        expected_error=err,
    )


def profile_for(
    accelerator_id: str, engine: str, data: dict[str, Any] | None = None, *, model: str | None = None
) -> Profile:
    """The profile for an accelerator and engine, with the fallback taken named in `basis`; a metric its entry
    states no error for states the all-families one (`_fleet_error`). Without `data` (the shipped profile), the
    team's adopted correction for the family, engine and `model` (else pooled over the team's models) is applied
    on top (`sizing.learn`, docs/learning.md); explicit `data` is used as given."""
    if data is None:
        return with_team_correction(_shipped_profile(accelerator_id, engine), model)
    return _resolved(accelerator_id, engine, data)


def _resolved(accelerator_id: str, engine: str, data: dict[str, Any]) -> Profile:
    prof = _lookup(accelerator_id, engine, data)
    missing = {m: v for m, v in _fleet_error(data).items() if m not in prof.expected_error}
    return replace(prof, expected_error={**prof.expected_error, **missing}) if missing else prof


@functools.lru_cache(maxsize=512)
def _shipped_profile(accelerator_id: str, engine: str) -> Profile:
    """The shipped profile's answer for an accelerator and engine, resolved once per process (`load_profiles`
    reads the file once; the planner asks once per hardware option). Frozen, and no caller changes its
    expected_error, so the one instance is shared."""
    return _resolved(accelerator_id, engine, load_profiles())


def with_team_correction(prof: Profile, model: str | None) -> Profile:
    """`prof` with the adopted team correction of its family, engine and model applied (two time scales:
    `sizing.learn.correction`), its basis and version saying so; `prof` itself when none is adopted."""
    # deferred here and below: the learning loop's modules cost ~20 ms (-X importtime) of the cold starts that
    # import the planner and estimate nothing (the janitor, the steps other than estimate)
    from sizing.learn.profiles import active

    adopted = active()
    if not adopted or "@" in prof.engine:
        return prof
    from sizing.learn.correction import lookup

    hit = lookup(adopted.get("corrections") or {}, prof.family, prof.engine, model)
    if hit is None:
        return prof
    key, c = hit
    if c.get("steps"):
        st = c["steps"]
        return replace(
            prof.with_step_factors(st),
            basis=f"{prof.basis}; team step correction {key} (step factors fitted to {st.get('timed_steps', 0)}"
            f" engine steps of {st.get('step_levels', 0)} measured levels)",
            version=f"{prof.version}+team.{adopted['version']}",
        )
    sp, sd = float(c["prefill_scale"]), float(c["decode_scale"])
    return replace(
        prof.stretched(sp, sd),
        basis=f"{prof.basis}; team correction {key} (prefill x{sp:.3f}, decode x{sd:.3f}, {c.get('levels', 0)}"
        f" measured levels)",
        version=f"{prof.version}+team.{adopted['version']}",
    )


#: The marker of a team-calibrated profile version (`with_team_correction`).
TEAM_MARK = "+team."


def _lookup(accelerator_id: str, engine: str, data: dict[str, Any]) -> Profile:
    version = str(data.get("version", "none"))
    profiles: dict[str, Any] = data.get("profiles", {})
    fam = family_of(accelerator_id)
    key = f"{fam}/{engine}"
    if key in profiles and profiles[key].get("rows") == 0:
        # derived, not fitted: the engine's earlier generation on this family moved to the current one
        # (sizing.perf.fit.GENERATIONS); no row measured it, so the stated error widens as for a fallback
        return _profile(profiles[key], fam, engine, profiles[key]["basis"], version, FALLBACK_ERROR_WIDENING)
    if key in profiles:
        return _profile(profiles[key], fam, engine, f"calibrated on {fam} x {engine}", version)
    if f"{fam}/*" in profiles:
        return _profile(
            profiles[f"{fam}/*"],
            fam,
            engine,
            f"no {engine} measurements on {fam}: the {fam} profile pooled over engines, error widened",
            version,
            FALLBACK_ERROR_WIDENING,
        )
    rel = RELATIVE.get(fam)
    for k in (f"{rel}/{engine}", f"{rel}/*"):
        if rel and k in profiles:
            return _profile(
                profiles[k],
                fam,
                engine,
                f"no measurements on {fam}: nearest relative {k} used, error widened",
                version,
                FALLBACK_ERROR_WIDENING,
            )
    if data.get("global"):
        return _profile(
            data["global"],
            fam,
            engine,
            "no measurements on this family: global profile, error widened",
            version,
            FALLBACK_ERROR_WIDENING,
        )
    return Profile(family=fam, engine=engine)


def summary(profile: Profile) -> dict[str, Any]:
    """What a prediction states about its calibration: the profile's version, what it was fitted on (or the
    fallback taken) and the error to expect (cross-validated median absolute percentage error per metric)."""
    return {
        "version": profile.version,
        "family": profile.family,
        "engine": profile.engine,
        "basis": profile.basis,
        "expected_error": dict(profile.expected_error),
        # the version of the profile the estimate used (the shipped one, plus the team's adopted correction when
        # one applies) and what the figures rest on: `calibrated` (a team correction) or `modelled`
        "profile_version": profile.version,
        "estimate_basis": "calibrated" if TEAM_MARK in profile.version else "modelled",
    }


# --- intervals: the estimator's own cross-validated error, per metric ------------------------------------------
#: Percentiles of the cross-validated predicted/measured ratio an interval spans (the 80% interval).
INTERVAL_PERCENTILES = (0.10, 0.90)
#: Held-out predictions a (family, engine, metric) or (family, metric) group needs before its own percentiles are
#: stated; with fewer, the all-families percentiles are stated, widened. Below 20 rows a group's 10th and 90th
#: percentiles rest on one or two rows each; at 20 the cross-validated coverage of the stated interval is 76-81% per
#: metric (10 rows: 71-78%; `benchmarks/accuracy.py` prints it).
MIN_INTERVAL_ROWS = 20
#: Metrics an interval is stated for (cross-validation metric names).
INTERVAL_METRICS = ("ttft", "tpot", "throughput")


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile of sorted `values` (numpy's default method)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ratio_band(
    ratios: list[float], widen: float = 1.0, q: tuple[float, float] = INTERVAL_PERCENTILES
) -> tuple[float, float]:
    """The (low, high) quantiles of predicted/measured `ratios`; `widen` > 1 stretches both ends away from the
    median in log space."""
    import math

    lo, hi = _quantile(ratios, q[0]), _quantile(ratios, q[1])
    if widen != 1.0:
        mid = math.log(_quantile(ratios, 0.5))
        lo = math.exp(mid + (math.log(lo) - mid) * widen)
        hi = math.exp(mid + (math.log(hi) - mid) * widen)
    return lo, hi


#: Held-out predictions of one architecture class (dense or mixture-of-experts) across the families of one kind
#: (GPU or Neuron) needed before that class's own percentiles are stated, widened, when its family has too few: a
#: Neuron MoE model's error is not a dense model's (cross-validated, the dense-dominated family interval held 36%
#: of Neuron MoE measurements, 12% of their TPOT). At 10 rows the 10th and 90th percentiles rest on a row each;
#: the widening stands for the rest.
MIN_CLASS_ROWS = 10

#: Whether a family's (and engine's) own held-out rows set its interval when they are enough. Leave-one-harness-out
#: a family's rows come from two or three harnesses, so its own percentiles say little about the next one: the
#: intervals are stated per metric and architecture class over every family of the kind (GPU or Neuron), which
#: held closer to 80% for a harness held out of the band too (`benchmarks/accuracy.py` prints both).
FAMILY_INTERVALS = False

#: How far (log space, about the median) a stated interval reaches beyond the 10th-90th percentile of the held-out
#: ratios. Rows of a harness the fit never saw still lie further out than the other harnesses' rows: with each
#: row's band built without its own harness, the plain percentiles held 70-73% of GPU rows per metric; 1.3x holds
#: 77% (throughput), 80% (TPOT) and 82% (TTFT) (`benchmarks/accuracy.py`, profile 2026-12-06). Neuron has three
#: harnesses, and holding one out moves the rest too far for any width to hold 80% (42-49% TPOT and throughput at
#: 1.3x, 67% at 2x): its intervals are stated with the same widening and the shortfall said in docs/estimator.md.
INTERVAL_WIDENING = 1.3

#: One cross-validated prediction as the intervals read it: (family, engine, metric, predicted/measured, row id,
#: the model is a mixture of experts, its regime: `ttft_regime` for a TTFT, else None).
Ratio = tuple[str, str, str, float, str, bool, str | None]


# --- TTFT regimes: a TTFT that is mostly its own prefill errs less than one that is mostly waiting ---------------
#: TTFT regimes by the share of the predicted TTFT that is the prompt's own prefill (`prefill_share`), each with the
#: least share it takes; the rest of a TTFT is waiting (queueing behind other requests, the scheduler's steps, the
#: per-request cost of the server and client), which the sources measure with offsets the fit cannot know (their
#: best-fit per-request overheads range 0-300 ms). "prefill-bound": at least half is prefill, and the error is the
#: prefill efficiency's; "wait-bound": under a tenth is (deep queues, or a short prompt behind a large fixed cost),
#: and the error is the wait's -- a deep queue's wait is its length over the service rate and errs as throughput
#: does; "mixed" between, where the onset of queueing and the fixed cost are as large as the prefill and err most.
#: On GPU rows the half falls in a gap of the held-out shares (0.47 to 0.67), so the bins do not hang on the cut: the
#: half at 0.4 or 0.6, or the tenth at 0.08 or 0.15, held GPU TTFT at 76% and 3.2-3.4x wide as these do; Neuron's
#: shares have no gap (the half at 0.4 or 0.6: 79% or 73%, against 83%) (`benchmarks/accuracy.py`, docs/estimator.md).
TTFT_REGIMES: tuple[tuple[str, float], ...] = (("prefill-bound", 0.5), ("mixed", 0.1), ("wait-bound", 0.0))
#: Held-out TTFTs a regime needs within the rows that speak for a prediction (`_group`) before its own percentiles
#: are stated; with fewer, the band of every regime is stated, and its basis says so. As for
#: `MIN_CLASS_ROWS`, at 10 rows the 10th and 90th percentiles rest on a row each.
MIN_REGIME_ROWS = 10


def prefill_share(
    predicted_ttft_ms: float | None, roofline_prefill_ms: float | None, compute_eff: float | None
) -> float | None:
    """The share of a predicted TTFT that is the prompt's own prefill: the plain roofline's time for the prompt in
    one step (datasheet peak FLOP/s, no overheads) over the profile's compute efficiency, against the predicted
    TTFT. Known for a held-out prediction (its stored roofline, `crossval.prediction_rows`) and for a live one
    (`sizing.perf.predict`); None when any part is missing."""
    if not predicted_ttft_ms or not roofline_prefill_ms or not compute_eff:
        return None
    return roofline_prefill_ms / (compute_eff * predicted_ttft_ms)


def ttft_regime(share: float | None) -> str | None:
    """The TTFT regime (`TTFT_REGIMES`) of a prefill share; None without one."""
    if share is None:
        return None
    for name, least in TTFT_REGIMES:
        if share >= least:
            return name
    return TTFT_REGIMES[-1][0]


def _compute_eff(data: dict[str, Any], family: str, engine: str) -> float | None:
    """The compute efficiency the profile of `data` states for a family and engine (pooled over engines, else the
    global profile), as a held-out prediction's regime reads it."""
    profiles = data.get("profiles") or {}
    for key in (f"{family}/{engine}", f"{family}/*"):
        if key in profiles and profiles[key].get("compute_eff"):
            return float(profiles[key]["compute_eff"])
    glob = data.get("global") or {}
    return float(glob["compute_eff"]) if glob.get("compute_eff") else None


#: The cross-validation the stated intervals are built from: leave-one-harness-out, where every row of one client
#: harness or engine generation is predicted by a fit that never saw that harness (`crossval.harness_of`). Its
#: errors carry what a new source brings -- its harness's and setup's own offset -- not only the scatter of rows
#: within sources the fit knows; leave-one-source-out intervals held 52% of fresh TPOT measurements. A profile
#: without that table falls back to leave-one-source-out.
INTERVAL_CV = ("cross_validation_by_harness", "cross_validation")


def interval_cv(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The cross-validation table the intervals read (`INTERVAL_CV`) and its key."""
    for key in INTERVAL_CV:
        table = data.get(key) or {}
        if table.get("rows"):
            return key, table
    return INTERVAL_CV[-1], {}


def amplification_exponents(data: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Per (kind of accelerator, latency metric) how its held-out error grows with the amplification of its
    predictions (`sizing.perf.amplification.error_exponent`): the kind's own rows' where they are enough, else the
    median of the other kinds' own exponents for the metric, else 1 (all of it the step's)."""
    rows = [
        r
        for r in interval_cv(data)[1].get("rows", [])
        if r.get("measured") and r.get("predicted") and r["metric"] in AMPLIFIED_METRICS
    ]

    def pairs(metric: str, kind: str) -> list[tuple[float, float]]:
        return [
            (float(r.get("amplification") or 1.0), float(r["predicted"]) / float(r["measured"]))
            for r in rows
            if r["metric"] == metric and kind_of(r["family"]) == kind
        ]

    kinds = sorted({kind_of(r["family"]) for r in rows} | {"gpu", "neuron", "cpu"})
    out: dict[tuple[str, str], float] = {}
    for metric in AMPLIFIED_METRICS:
        own = {kind: error_exponent(pairs(metric, kind)) for kind in kinds}
        stated = [e for e in own.values() if e is not None]
        others = statistics.median(stated) if stated else 1.0
        for kind, e in own.items():
            out[(kind, metric)] = e if e is not None else others
    return out


def cv_ratios(
    data: dict[str, Any], per_unit: bool = False, exponents: dict[tuple[str, str], float] | None = None
) -> list[Ratio]:
    """Every held-out prediction of the interval metrics (`Ratio`) of the intervals' cross-validation
    (`INTERVAL_CV`). `per_unit`: a latency's predicted/measured ratio per unit of the amplification its prediction
    had (`sizing.perf.amplification`): the ratio to the power 1 / amplification^g, g the share of the error that
    grows with it for the row's kind and metric (`amplification_exponents`): its error as the step's, with the
    queue's multiplication taken out. A row stored without an amplification reads 1. `exponents`: those of `data`
    where the caller has them already."""
    rows = interval_cv(data)[1].get("rows", [])
    if per_unit and exponents is None:
        exponents = amplification_exponents(data)
    exponents = exponents or {}

    def ratio(r: dict[str, Any]) -> float:
        value = float(r["predicted"]) / float(r["measured"])
        amp = float(r.get("amplification") or 1.0) if per_unit else 1.0
        if amp <= 1.0:
            return value
        exponent = exponents.get((kind_of(r["family"]), r["metric"]), 1.0)
        return float(value ** (1.0 / amp**exponent))

    eff: dict[tuple[str, str], float | None] = {}

    def regime(r: dict[str, Any]) -> str | None:
        if r["metric"] != "ttft":
            return None
        key = (r["family"], r["engine"])
        if key not in eff:
            eff[key] = _compute_eff(data, *key)
        return ttft_regime(prefill_share(r["predicted"], r.get("roofline"), eff[key]))

    return [
        (
            r["family"],
            r["engine"],
            r["metric"],
            ratio(r),
            r["row_id"],
            bool(r.get("moe")),
            regime(r),
        )
        for r in rows
        if r.get("measured") and r.get("predicted") and r["metric"] in INTERVAL_METRICS
    ]


def _group(
    ratios: list[Ratio], family: str, engine: str, metric: str, moe: bool, regime: str | None = None
) -> tuple[list[float], float, str]:
    """The ratios that speak for one (family, engine, metric) and architecture class (dense or mixture of
    experts), the widening they get and why: the class's own rows on the family and engine when there are enough,
    else on the family over engines, else over every family of the family's kind (GPU or Neuron), widened; else
    both classes' rows on that kind, widened; else every prediction of the metric on the same side of the CPU line,
    widened (`FALLBACK_ERROR_WIDENING`). With a `regime` (a TTFT's,
    `ttft_regime`), only those rows' of that regime when they are `MIN_REGIME_ROWS` or more."""
    rows, widen, basis = _pool(ratios, family, engine, metric, moe)
    if regime is None:
        return [r for r, _g in rows], widen, basis
    own = [r for r, g in rows if g == regime]
    if len(own) >= MIN_REGIME_ROWS:
        return own, widen, f"{basis}, {regime} TTFTs"
    return [r for r, _g in rows], widen, f"{basis}, every TTFT regime (only {len(own)} {regime} rows)"


def _pool(
    ratios: list[Ratio], family: str, engine: str, metric: str, moe: bool
) -> tuple[list[tuple[float, str | None]], float, str]:
    """`_group`'s rows, each with its regime, before any regime is chosen. A family no held-out row measured (its
    profile a relative's, `RELATIVE`: an EPYC Milan on the Xeon's efficiencies, a B200 on Hopper's) gets its kind's
    band widened once more by `FALLBACK_ERROR_WIDENING`, as its profile's stated error is: the kind's rows hold the
    error of families that were measured, not that of carrying one family's fit to another chip."""
    rows, widen, basis = _kind_pool(ratios, family, engine, metric, moe)
    if not rows or any(f == family for f, *_rest in ratios):
        return rows, widen, basis
    why = f"{family} has no held-out rows: its profile is a relative's"
    return rows, widen * FALLBACK_ERROR_WIDENING, f"{basis}, widened x{FALLBACK_ERROR_WIDENING} ({why})"


def _kind_pool(
    ratios: list[Ratio], family: str, engine: str, metric: str, moe: bool
) -> tuple[list[tuple[float, str | None]], float, str]:
    """`_pool`'s rows before a family without rows of its own is widened."""
    cls = "MoE" if moe else "dense"
    same = [(f, e, (r, g)) for f, e, m, r, _id, x, g in ratios if m == metric and x == moe]
    fam = [r for f, _e, r in same if f == family]
    if FAMILY_INTERVALS:
        own = [r for f, e, r in same if f == family and e == engine]
        if len(own) >= MIN_INTERVAL_ROWS:
            return own, 1.0, f"{family} x {engine}, {cls} models"
        if len(fam) >= MIN_INTERVAL_ROWS:
            return fam, 1.0, f"{family}, all engines, {cls} models"
    kind = kind_of(family)
    kin = [r for f, _e, r in same if kind_of(f) == kind]
    if not FAMILY_INTERVALS and len(kin) >= MIN_INTERVAL_ROWS:
        return kin, 1.0, f"every {kind} family's {cls} models"
    if len(kin) >= MIN_CLASS_ROWS:
        why = (
            f"every {kind} family's {cls} models, widened x{FALLBACK_ERROR_WIDENING}"
            f" ({family} has {len(fam)} held-out {cls} rows)"
        )
        return kin, FALLBACK_ERROR_WIDENING, why
    # then both classes on the same kind: a GPU MoE model's error is closer to a GPU dense model's than to a Neuron
    # model's, whose harnesses disagree 4x (pooled over every accelerator, a Mixtral on an H100 had a TPOT interval
    # 26x wide, mostly Neuron's scatter, where the GPU rows of both classes span 1.8x widened)
    either = [(r, g) for f, _e, m, r, _id, _x, g in ratios if m == metric and kind_of(f) == kind]
    if len(either) >= MIN_INTERVAL_ROWS:
        why = (
            f"every {kind} family's models of both classes, widened x{FALLBACK_ERROR_WIDENING}"
            f" ({family} has {len(fam)} held-out {cls} rows, every {kind} family {len(kin)})"
        )
        return either, FALLBACK_ERROR_WIDENING, why
    # a CPU's rows (our own harness on tiny models) say nothing of an accelerator's error, nor an accelerator's of a
    # CPU's: the last resort pools the families on the same side of that line
    cpu = kind == "cpu"
    fleet = [(r, g) for f, _e, m, r, _id, _x, g in ratios if m == metric and (kind_of(f) == "cpu") == cpu]
    side = "CPU" if cpu else "accelerator"
    why = f"all {side} families, widened x{FALLBACK_ERROR_WIDENING} ({family} has {len(fam)} held-out {cls} rows)"
    return fleet, FALLBACK_ERROR_WIDENING, why


def band_for(
    ratios: list[Ratio],
    family: str,
    engine: str,
    metric: str,
    moe: bool = False,
    regime: str | None = None,
) -> dict[str, Any]:
    """The 10th-90th percentile ratio band of one (family, engine, metric) for a dense or a mixture-of-experts
    model (`_group` says which rows), and for a TTFT of one `regime` its rows' band, a waiting regime's slow end
    reaching at least as far as every TTFT's (`WAITING_REGIMES`)."""
    rows, widen, basis = _group(ratios, family, engine, metric, moe, regime)
    if not rows:
        return {}
    lo, hi = ratio_band(rows, widen * INTERVAL_WIDENING)
    if regime in WAITING_REGIMES:
        every, every_widen, _basis = _group(ratios, family, engine, metric, moe)
        every_lo = ratio_band(every, every_widen * INTERVAL_WIDENING)[0]
        if every_lo < lo:
            lo = every_lo
            basis += ", its slow end as far as every TTFT's"
    return {"ratio": [lo, hi], "rows": len(rows), "basis": basis}


#: TTFT regimes whose band's slow end (measured slower than predicted) reaches at least as far as the band of every
#: regime. Held out, the 13 wait-bound GPU TTFTs (most of them deep queues) were predicted closer than TTFTs at
#: large, but fresh sources measured TTFTs at 64-256 concurrent streams 50-57% slower than predicted, and step
#: simulators' queueing waits are known to fall short above 50% utilisation: a few held-out rows do not make a
#: waiting TTFT less likely to be slower than predicted than any TTFT.
WAITING_REGIMES = ("mixed", "wait-bound")


@functools.cache
# `path` keys the cache: another profile file is another set of bands
def _intervals(path: str) -> dict[tuple[str, str, bool], dict[str, Any]]:  # noqa: ARG001
    """Bands already computed from the shipped profile, by (family, engine, mixture of experts)."""
    return {}


#: The key of `interval_for`'s TTFT bands by regime.
REGIME_BANDS = "ttft_by_regime"


def interval_for(
    family: str, engine: str, data: dict[str, Any] | None = None, *, moe: bool = False
) -> dict[str, Any]:
    """Per metric, the 10th-90th percentile band of the cross-validated predicted/measured ratio for a family and
    engine and a dense (or, `moe`, a mixture-of-experts) model (`band_for`), from the shipped profile's
    held-out predictions (`INTERVAL_CV`); TTFT's also per regime, under `REGIME_BANDS`."""
    cache = _intervals(str(PROFILE_PATH)) if data is None else {}
    key = (family, engine, moe)
    if key in cache:
        return cache[key]
    src = data if data is not None else load_profiles()
    exponents = _shipped_exponents(str(PROFILE_PATH)) if data is None else amplification_exponents(src)
    ratios = cv_ratios(src)
    unit = cv_ratios(src, per_unit=True, exponents=exponents)
    kind = kind_of(family)
    bands: dict[str, Any] = {m: band_for(ratios, family, engine, m, moe) for m in INTERVAL_METRICS}
    bands = {m: b for m, b in bands.items() if b}
    for m in AMPLIFIED_METRICS:
        if m in bands:
            bands[m]["per_unit"] = band_for(unit, family, engine, m, moe)["ratio"]
            bands[m]["exponent"] = exponents.get((kind, m), 1.0)
    if "ttft" in bands:
        # a TTFT's band by its regime (`TTFT_REGIMES`); `stated_interval` picks one by the prediction's prefill share
        bands[REGIME_BANDS] = {
            name: {
                **band_for(ratios, family, engine, "ttft", moe, name),
                "per_unit": band_for(unit, family, engine, "ttft", moe, name)["ratio"],
                "exponent": exponents.get((kind, "ttft"), 1.0),
            }
            for name, _least in TTFT_REGIMES
        }
    how = "leave-one-harness-out" if interval_cv(src)[0] == INTERVAL_CV[0] else "leave-one-source-out"
    bands["basis"] = (
        f"80% interval: the 10th-90th percentile of the {how} predicted/measured ratio"
        f" (profile {src.get('version', 'none')})"
    )
    if data is None:
        cache[key] = bands
    return bands


def stated_interval(
    value: Any,
    metric: str,
    bands: dict[str, Any],
    of: str = "mean",
    *,
    prefill_share: float | None = None,
    amplification: float | None = None,
) -> dict[str, Any] | None:
    """The interval a measurement of `value` (a number, or a statistics dict read at `of`) is expected in: the
    prediction divided by the band's ratios, widened to contain the prediction itself. A TTFT given the share of it
    that is the prompt's own prefill (the function `prefill_share`) takes its regime's band (`TTFT_REGIMES`), and
    says which; without a share, or without bands by regime, the band of every regime. A latency given its
    `amplification` a (`sizing.perf.amplification`) takes the band per unit of amplification raised to a^g, g the
    share of its kind's held-out error that grows with amplification (`amplification_exponents`): the held-out error
    as the step's, multiplied as this prediction's queue multiplies it; without one, the band of every held-out
    prediction as it was."""
    regime = ttft_regime(prefill_share) if metric == "ttft" else None
    band = (bands.get(REGIME_BANDS) or {}).get(regime) if regime else None
    band = band or bands.get(metric)
    if not band:
        return None
    pred = float(value[of] if isinstance(value, dict) else value)
    lo_r, hi_r = band["ratio"]
    exponent = float(band.get("exponent", 1.0))
    amplified = amplification is not None and "per_unit" in band
    if amplified:
        lo_r, hi_r = (x ** (float(amplification or 1.0) ** exponent) for x in band["per_unit"])
    low, high = min(pred / hi_r, pred), max(pred / lo_r, pred)
    digits = 4 if pred < 10 else 1
    return {
        "of": of if isinstance(value, dict) else "value",
        "low": round(low, digits),
        "high": round(high, digits),
        "ratio_p10_p90": [round(lo_r, 3), round(hi_r, 3)],
        "rows": band["rows"],
        "basis": band["basis"],
        **({"regime": regime, "prefill_share": round(prefill_share, 3)} if regime and prefill_share else {}),
        **(
            {
                "amplification": round(float(amplification or 1.0), 2),
                "amplification_exponent": round(exponent, 2),
            }
            if amplified
            else {}
        ),
    }


def conservative_ratio(
    family: str,
    engine: str,
    metric: str,
    confidence: float,
    data: dict[str, Any] | None = None,
    *,
    moe: bool = False,
    regime: str | None = None,
    per_unit: bool = False,
) -> float | None:
    """The predicted/measured ratio the estimator's own error reaches at `confidence` on the pessimistic side of
    `metric` for a dense (or, `moe`, a mixture-of-experts) model: for throughput its `confidence` quantile
    (capacity over-predicted), for latencies its 1-`confidence` quantile (latency under-predicted); for a TTFT of
    one `regime` (`TTFT_REGIMES`), that regime's rows, as its stated interval reads them. `per_unit`: a latency's
    ratio per unit of amplification (`cv_ratios`), which a prediction amplified a times reads to the power a^g
    (`amplification_exponent`), as its stated interval does. None without cross-validated rows."""
    if data is None:
        ratios = cv_ratios(
            load_profiles(), per_unit, _shipped_exponents(str(PROFILE_PATH)) if per_unit else None
        )
    else:
        ratios = cv_ratios(data, per_unit)
    return ratio_at(ratios, family, engine, metric, confidence, moe=moe, regime=regime)


def ratio_at(
    ratios: list[Ratio],
    family: str,
    engine: str,
    metric: str,
    confidence: float,
    *,
    moe: bool = False,
    regime: str | None = None,
) -> float | None:
    """`conservative_ratio` read from the held-out `ratios` given (`cv_ratios`; a cross-validation's own, or some
    of them: benchmarks/accuracy.py reads the planner's factor from every harness but a row's)."""
    rows, widen, _basis = _group(ratios, family, engine, metric, moe, regime)
    if not rows:
        return None
    q = confidence if metric == "throughput" else 1 - confidence
    at = ratio_band(rows, widen * INTERVAL_WIDENING, (q, q))[0]
    if regime in WAITING_REGIMES and metric != "throughput":
        # as the stated band (`band_for`): a waiting TTFT's slow side reaches as far as every TTFT's
        every, every_widen, _basis = _group(ratios, family, engine, metric, moe)
        at = min(at, ratio_band(every, every_widen * INTERVAL_WIDENING, (q, q))[0])
    return at


def amplification_exponent(family: str, metric: str, data: dict[str, Any] | None = None) -> float:
    """g of `family`'s kind for a latency `metric` (`amplification_exponents`): its error at amplification a is its
    error per unit to the power a^g; 1 for a metric without one."""
    exponents = _shipped_exponents(str(PROFILE_PATH)) if data is None else amplification_exponents(data)
    return exponents.get((kind_of(family), metric), 1.0)


@functools.cache
# `path` keys the cache, as `_intervals`': another profile file, other exponents
def _shipped_exponents(path: str) -> dict[tuple[str, str], float]:  # noqa: ARG001
    """`amplification_exponents` of the shipped profile, read from its held-out rows once."""
    return amplification_exponents(load_profiles())


def error_rows(
    family: str, engine: str, metric: str, moe: bool = False, data: dict[str, Any] | None = None
) -> str:
    """Which held-out rows speak for `metric` of a family, engine and model class (`_group`'s basis), e.g. "every gpu
    family's dense models"; empty without cross-validated rows."""
    ratios = cv_ratios(data if data is not None else load_profiles())
    rows, _widen, basis = _group(ratios, family, engine, metric, moe)
    return basis if rows else ""
