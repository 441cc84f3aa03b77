"""Calibration: fit a few efficiency factors per (accelerator family, engine) on measured rows, and measure the
error honestly with leave-one-source-out cross-validation.

Procedure (reproducible, no randomness beyond fixed simulation seeds):
1. Every row is simulated with its own deployment, request shape and load.
2. Per accelerator family, fit six factors (compute efficiency, bandwidth efficiency, per-step, per-sequence and
   per-request overhead, and the efficiency of mixture-of-experts models relative to dense ones -- held at its
   prior where no MoE row speaks to it) on all its rows, pooled over engines, in two stages: alone on a weak
   literature prior (`PRIOR`), then with the other families of its kind (GPU or Neuron) as the prior
   (`kind_prior`, widths from their spread: `kind_sigma`). Then per
   (family, engine) -- or per engine build measured apart from the deployed one (`ENGINE_BUILDS`) -- fit the
   same factors with the family fit as a stronger prior (partial pooling: an engine with few rows stays near its
   family, a family with few rows near its kind). Loss: soft-L1 on log(predicted/measured) per metric, weighted
   by row quality. Never per row.
3. Cross-validation: for each published source (a results file or page, the reference's `source` column), refit
   without its rows and predict them; then the same holding out whole studies (every source of one lab or
   repository), which is stricter. The tables report median absolute percentage error and the share within
   +-25% per metric and per family, beside a plain roofline. The stricter study-level error is the one shipped
   with each profile as the error a user should expect.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import yaml

from sizing.perf.calibration import ERROR_METRICS, FAMILY, TWIN_ORIGIN, family_of, profile_for
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import build_scheduler
from sizing.perf.memory import memory_fit
from sizing.perf.reference import LLMPERF_LAUNCH_GAP_S, REFERENCE_MODELS, SHAREGPT_SIGMA, CalRow
from sizing.perf.simulator import ClosedLoop, OpenLoop, saturating_concurrency, simulate
from sizing.perf.step import ROOFLINE, Profile, StepModel

#: Literature prior: prefill MFU ~50% and decode MBU 55-60% at batch 1 (Databricks, docs/serving-facts.md s2);
#: CPU/scheduling overhead of a few ms per step (vLLM V1: ~5 ms steps for 8B on H100 incl. GPU work, s2).
PRIOR = {
    "compute_eff": 0.5,
    "bandwidth_eff": 0.6,
    "step_overhead_s": 0.003,
    "request_overhead_s": 0.02,
    # sampling, detokenisation and streaming per running sequence per step: ~0.1 ms on current H100 stacks
    # (X071 -> X072 TPOT) to ~0.7 ms on 2024 A10G stacks (X001 -> X005); the prior sits between
    "seq_overhead_s": 0.0002,
    # no MoE penalty a priori: an MoE model runs at its active/touched parameters' roofline like a dense one
    "moe_eff": 1.0,
}
#: Prior widths in log space (compute eff, bandwidth eff, step, per-sequence and request overheads): a family may
#: move efficiencies ~2x and overheads ~4x from the prior; an engine stays nearer its family (~1.4x / ~2x).
#: (Tighter engine efficiencies with wider engine overheads cross-validated worse: TTFT 45-59% vs 38%.)
#: The MoE efficiency may move ~2x from 1 in a family and ~1.4x for an engine; rows of dense models leave it at its
#: prior.
FAMILY_SIGMA = (0.7, 0.5, 1.5, 1.5, 1.5, 0.7)
ENGINE_SIGMA = (0.35, 0.3, 0.8, 0.8, 0.8, 0.35)
#: Parameter bounds: efficiencies cannot exceed peak by much (1.2 leaves room for assumed datasheet figures,
#: e.g. A10G TFLOPS); overhead between 0.05 ms and 100 ms per step.
BOUNDS = ((0.02, 1.2), (0.05, 1.2), (5e-5, 0.1), (1e-4, 0.5), (1e-6, 0.005), (0.05, 1.5))
#: Soft-L1 scale on log errors: errors beyond ~25% count linearly, so one odd row cannot drag a fit.
LOSS_SCALE = 0.25
#: Metric weights in the loss: e2e duplicates TTFT + TPOT information, so it counts half.
METRIC_WEIGHT = {"ttft": 1.0, "tpot": 1.0, "throughput": 1.0, "e2e": 0.5}
#: Nelder-Mead evaluations per fit: family fits start from the prior (5 parameters converged to ~1% in ~110
#: evaluations; 6 with the MoE efficiency take ~20 more); engine fits start at their family's optimum and need fewer.
MAX_EVALS = 130
ENGINE_EVALS = 80
#: Requests simulated per reference row: closed loops need a few rounds of the concurrency; ShareGPT-shaped
#: rows need a few hundred draws for stable means.
MIN_REQUESTS_FIXED = 12
MIN_REQUESTS_SHAREGPT = 200
MAX_REQUESTS = 800
ROUNDS = 4
OPEN_LOOP_REQUESTS = 400
WITHIN = 0.25

METRICS = ("ttft", "tpot", "throughput", "e2e")
#: The engine build whose batch runs are statically batched (transformers-neuronx `sample()`: the batch's
#: prompts are encoded together and the first tokens come back together; AWS SDK throughput tables M020-M040).
STATIC_BATCH_BUILD = "transformers-neuronx"


@functools.cache
def reference_catalog() -> Any:
    """The product catalog plus the architectures of reference-only models (Llama-2, Yi, small Qwen)."""
    from sizing.catalog import load_catalog
    from sizing.catalog.models import Catalog, ModelSpec

    base = load_catalog()
    extra = [ModelSpec.model_validate(m) for m in yaml.safe_load(REFERENCE_MODELS.read_text())["models"]]
    return Catalog(
        list(base.accelerators.values()),
        list(base.instances.values()),
        list(base.models.values()) + extra,
        base.managed,
    )


def profile_key(row: CalRow) -> str:
    """The engine part of the profile a row calibrates: the engine, or `engine@build` for a build measured apart
    from the one the product deploys (`sizing.perf.reference.ENGINE_BUILDS`)."""
    return f"{row.engine}@{row.build}" if row.build else row.engine


def _drawn(mean: float, sigma: float | None) -> Any:
    """The lengths a client drew around `mean`: lognormal with `sigma` when the row states one, else fixed."""
    from sizing.workload import TokenDistribution

    return TokenDistribution.lognormal(mean, sigma) if sigma else TokenDistribution.fixed(round(mean))


def _long(mean: float, sigma: float | None) -> float:
    """A long draw: the 99th percentile of the lengths drawn with `sigma`, the mean itself when fixed."""
    return float(_drawn(mean, sigma).percentile("p99")) if sigma else mean


def row_config(row: CalRow) -> HardwareConfig:
    # the assumed context covers a long request: 3x a ShareGPT mean prompt, else the drawn lengths' long tail
    prompt = (
        row.input_tokens * 3 if row.token_dist == "sharegpt" else _long(row.input_tokens, row.input_sigma)
    )
    context = math.ceil(prompt + _long(row.output_tokens, row.output_sigma) * 2)
    return HardwareConfig(
        model_id=row.model,
        instance_type="",
        tensor_parallel=row.tp,
        quantization=row.quantization,
        engine=row.engine,
        max_model_len=row.max_model_len or context,
        gpu_memory_utilization=row.gpu_memory_utilization,
        max_num_seqs=row.max_num_seqs or _compiled_batch(row),
        accelerator_id=row.accelerator,
    )


def _compiled_batch(row: CalRow) -> int | None:
    """The batch a Neuron row's model was compiled for when the row does not state it: its load (the SDK's latency
    tables run batch 1 at one user; a closed loop of N users is served by a batch of N). GPU rows keep the
    engine's default."""
    if row.engine != "neuron" or row.load not in ("closed", "batch"):
        return None
    return max(1, round(row.load_value))


def measured(row: CalRow) -> dict[str, float]:
    out: dict[str, float] = {}
    if row.ttft_ms:
        out["ttft"] = row.ttft_ms
    if row.tpot_ms:
        out["tpot"] = row.tpot_ms
    if row.output_tokens_per_s:
        out["throughput"] = row.output_tokens_per_s
    elif row.requests_per_s:
        out["throughput"] = row.requests_per_s
    if row.e2e_s:
        out["e2e"] = row.e2e_s
    return out


def _dists(row: CalRow) -> tuple[Any, Any]:
    from sizing.workload import TokenDistribution

    if row.token_dist == "sharegpt":
        return (
            TokenDistribution.lognormal(row.input_tokens, SHAREGPT_SIGMA),
            TokenDistribution.lognormal(row.output_tokens, SHAREGPT_SIGMA),
        )
    return _drawn(row.input_tokens, row.input_sigma), _drawn(row.output_tokens, row.output_sigma)


def predict_row(row: CalRow, profile: Profile) -> dict[str, float]:
    """Simulate the row's deployment and load; the metrics the row measured."""
    cat = reference_catalog()
    cfg = row_config(row)
    sm = StepModel(cfg, memory_fit(cfg, cat), profile, cat)
    # an older engine build schedules as it did: the server ran with the model's own context unless the row says
    served_len = row.max_model_len or cfg.parts(cat).model.max_position_embeddings
    sm.schedule_as(build_scheduler(profile_key(row), served_len, row.engine_version))
    i_dist, o_dist = _dists(row)
    floor = MIN_REQUESTS_SHAREGPT if row.token_dist == "sharegpt" else MIN_REQUESTS_FIXED
    warmup = 0.1
    load: ClosedLoop | OpenLoop
    if row.load == "closed":
        c = max(1, round(row.load_value))
        if row.start == "waves":
            load = ClosedLoop(c, wave_gap_s=LLMPERF_LAUNCH_GAP_S)
        else:
            load = ClosedLoop(c, ramp_s=0.0 if row.start == "together" else None)
        n = min(MAX_REQUESTS, max(floor, ROUNDS * c))
    elif row.load in ("batch", "offline"):
        c = max(1, round(row.load_value))
        load, n, warmup = ClosedLoop(c, ramp_s=0.0), c, 0.0
    elif row.load == "saturate":
        c = max(1, sm.max_num_seqs)
        load, n = ClosedLoop(c), min(MAX_REQUESTS, max(floor, ROUNDS * c))
    else:
        load, n = OpenLoop(row.load_value), OPEN_LOOP_REQUESTS
    res = simulate(sm, load, i_dist, o_dist, n_requests=n, seed=0, warmup=warmup)
    out: dict[str, float] = {}
    want = measured(row)
    if "ttft" in want:
        out["ttft"] = res.ttft_ms.mean if row.ttft_stat == "mean" else res.ttft_ms.p50
        if row.build == STATIC_BATCH_BUILD and row.load == "batch":
            # static batching: one context encoding of the whole batch returns every first token together
            out["ttft"] = float(res.per_request["ttft_ms"].max())
    if "tpot" in want:
        out["tpot"] = res.tpot_ms.mean if row.tpot_stat != "itl_p50" else res.itl_ms.p50
    if "throughput" in want:
        out["throughput"] = res.output_tokens_per_s if row.output_tokens_per_s else res.requests_per_s
    if "e2e" in want:
        out["e2e"] = res.e2e_s.mean
    return _in_client_units(row, out, res.e2e_s.mean)


def _in_client_units(row: CalRow, out: dict[str, float], e2e_s: float) -> dict[str, float]:
    """Predicted figures in the units the row was measured in: a client that counted output tokens with another
    tokenizer (llmperf) reports throughput in its own tokens, and llmperf's "inter-token latency" is the whole
    request time over those tokens."""
    if row.client_output_tokens:
        if "throughput" in out and row.output_tokens_per_s:
            out["throughput"] *= row.client_output_tokens / row.output_tokens
        if "tpot" in out and row.tpot_stat == "e2e_per_token":
            out["tpot"] = e2e_s * 1e3 / row.client_output_tokens
    return out


def roofline_row(row: CalRow) -> dict[str, float]:
    """A plain roofline calculator: datasheet peaks, no overheads, no queueing, a batch equal to the load."""
    cat = reference_catalog()
    cfg = row_config(row)
    sm = StepModel(cfg, memory_fit(cfg, cat), ROOFLINE, cat)
    inp, outp = max(1, round(row.input_tokens)), max(1, round(row.output_tokens))
    ttft = sm.iteration_time(inp, 0, 0)
    if row.load in ("closed", "batch", "saturate"):
        b = max(1, min(round(row.load_value), sm.max_num_seqs))
    elif row.load == "offline":
        b = min(round(row.load_value), saturating_concurrency(sm, inp, outp))
    else:
        one = ttft + outp * sm.iteration_time(0, 1, inp)
        b = max(1, min(sm.max_num_seqs, round(row.load_value * one)))
    tpot = sm.iteration_time(0, b, b * (inp + outp // 2))
    e2e = ttft + (outp - 1) * tpot
    cycle = b * ttft + (outp - 1) * tpot
    tps = b * outp / cycle
    if row.load == "open":
        tps = min(tps, row.load_value * outp)
    want = measured(row)
    out = {"ttft": ttft * 1e3, "tpot": tpot * 1e3, "e2e": e2e}
    out["throughput"] = tps if row.output_tokens_per_s else tps / outp
    return _in_client_units(row, {k: v for k, v in out.items() if k in want}, e2e)


# --- fitting ---------------------------------------------------------------------------------------------------
def _soft_l1(r: float) -> float:
    s = LOSS_SCALE
    return 2 * s * s * (math.sqrt(1 + (r / s) ** 2) - 1)


def _profile(theta: Sequence[float], family: str, engine: str, basis: str) -> Profile:
    c, b, o, r, q, m = (min(max(math.exp(t), lo), hi) for t, (lo, hi) in zip(theta, BOUNDS, strict=True))
    return Profile(c, b, o, q, family, engine, basis, request_overhead_s=r, moe_eff=m)


def _theta(p: dict[str, float]) -> list[float]:
    return [
        math.log(p["compute_eff"]),
        math.log(p["bandwidth_eff"]),
        math.log(p["step_overhead_s"]),
        math.log(p["request_overhead_s"]),
        math.log(p["seq_overhead_s"]),
        math.log(p.get("moe_eff", 1.0)),
    ]


def row_loss(row: CalRow, profile: Profile) -> float:
    want = measured(row)
    try:
        got = predict_row(row, profile)
    except ValueError:
        return 10.0 * row.weight
    total = 0.0
    for k, v in want.items():
        p = got.get(k)
        if p is None or not p > 0 or not math.isfinite(p):
            total += 10.0
            continue
        total += METRIC_WEIGHT[k] * _soft_l1(math.log(p / v))
    return total * row.weight


def nelder_mead(
    f: Callable[[list[float]], float], x0: list[float], step: float = 0.3, max_evals: int = MAX_EVALS
) -> list[float]:
    """A plain Nelder-Mead minimiser (no scipy dependency): enough for a handful of smooth parameters."""
    n = len(x0)
    pts = [list(x0)] + [[x + (step if i == j else 0.0) for j, x in enumerate(x0)] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < 1e-6 * (1 + abs(vals[0])):
            break
        centroid = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        refl = [c + (c - w) for c, w in zip(centroid, pts[-1], strict=True)]
        fr = f(refl)
        evals += 1
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centroid, pts[-1], strict=True)]
            fe = f(exp)
            evals += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centroid, pts[-1], strict=True)]
            fc = f(con)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [b + 0.5 * (p - b) for b, p in zip(pts[0], pts[i], strict=True)]
                    vals[i] = f(pts[i])
                    evals += 1
    best = min(range(len(vals)), key=lambda i: vals[i])
    return pts[best]


#: Index of the MoE efficiency in a parameter vector (see `_theta`).
MOE = 5


def is_moe(row: CalRow) -> bool:
    return reference_catalog().models[row.model].moe is not None


def fit_group(
    rows: Sequence[CalRow],
    prior: list[float],
    sigma: Sequence[float],
    family: str,
    engine: str,
    max_evals: int = MAX_EVALS,
    start: list[float] | None = None,
) -> list[float]:
    """The parameters minimising the rows' loss plus the prior penalty. Without a mixture-of-experts row the MoE
    efficiency is not identified: it stays at its prior instead of drifting on a flat direction."""

    def objective(theta: list[float]) -> float:
        prof = _profile(theta, family, engine, "fit")
        penalty = sum(((t - p) / s) ** 2 for t, p, s in zip(theta, prior, sigma, strict=True)) * LOSS_SCALE**2
        return sum(row_loss(r, prof) for r in rows) + penalty

    x0 = list(start if start is not None else prior)
    step = 0.3 if max_evals >= MAX_EVALS else 0.15
    if any(is_moe(r) for r in rows):
        return nelder_mead(objective, x0, step=step, max_evals=max_evals)
    fixed = prior[MOE]
    dense = nelder_mead(lambda t: objective([*t, fixed]), x0[:MOE], step=step, max_evals=max_evals)
    return [*dense, fixed]


@dataclass
class FitResult:
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)


#: Key suffix of a family's first-stage fit (on the literature prior alone): the other families of its kind use
#: it as their prior in the second stage; never looked up for predictions.
ALONE = "(alone)"


def kind_of(family: str) -> str:
    """GPU families share software stacks (CUDA engines) and datasheet conventions; Neuron generations share the
    Neuron SDK."""
    return "neuron" if family.startswith("neuron") else "gpu"


#: Floor of the stage-2 prior widths (log space) when the other families agree closely: efficiencies may still
#: move ~20% and overheads ~1.6x on a family's own rows (measured chips do differ by that much).
KIND_SIGMA_FLOOR = (0.2, 0.2, 0.5, 0.5, 0.5, 0.35)
#: Families needed to estimate the spread between families; with fewer, the literature widths apply.
KIND_SPREAD_MIN_FAMILIES = 3


def _kin(family: str, profiles: dict[str, dict[str, Any]]) -> list[tuple[list[float], int]]:
    """(parameters, rows) of the first-stage fits of the *other* families of `family`'s kind."""
    return [
        (_theta(v), v["rows"])
        for k, v in profiles.items()
        if k.endswith("/" + ALONE)
        and k.split("/")[0] != family
        and kind_of(k.split("/")[0]) == kind_of(family)
    ]


def kind_sigma(family: str, profiles: dict[str, dict[str, Any]]) -> tuple[float, ...]:
    """Widths of the stage-2 prior: the spread (standard deviation in log space) of the other families' first-
    stage fits, floored by `KIND_SIGMA_FLOOR` and never wider than the literature widths (`FAMILY_SIGMA`) --
    empirical Bayes: the fleet says how far a family may plausibly sit from the rest."""
    thetas = [t for t, _n in _kin(family, profiles)]
    if len(thetas) < KIND_SPREAD_MIN_FAMILIES:
        return FAMILY_SIGMA
    return tuple(
        min(max(statistics.pstdev(t[i] for t in thetas), floor), wide)
        for i, (floor, wide) in enumerate(zip(KIND_SIGMA_FLOOR, FAMILY_SIGMA, strict=True))
    )


def kind_prior(family: str, profiles: dict[str, dict[str, Any]]) -> list[float]:
    """The prior of a family's fit: the row-weighted mean (in log space) of the first-stage fits of the *other*
    families of its kind -- what the rest of the fleet says about efficiencies and overheads -- or the literature
    prior when no other family of the kind has rows. Partial pooling across families: a family with few rows (L4)
    borrows strength from the others instead of from the literature alone; one with many rows barely moves."""
    kin = _kin(family, profiles)
    if not kin:
        return _theta(PRIOR)
    total = sum(n for _, n in kin)
    return [sum(t[i] * n for t, n in kin) / total for i in range(len(PRIOR))]


def fit_profiles(
    rows: Sequence[CalRow],
    only_families: Iterable[str] | None = None,
    base: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Fitted profiles keyed "family/engine", "family/*" (and "family/(alone)", the first stage). `only_families`
    refits just those (others copied from `base`).

    Stage 1 fits each family alone on the literature prior. Stage 2 refits each family with the other families
    of its kind as the prior (`kind_prior`), then each (family, engine) with its family as the prior. A family's
    stage 2 never sees its own rows twice, and a cross-validation fold that refits family F uses the other
    families' stage-1 fits, which never contained F's rows."""
    by_family: dict[str, list[CalRow]] = defaultdict(list)
    for r in rows:
        by_family[family_of(r.accelerator)].append(r)
    out: dict[str, dict[str, Any]] = {}
    wanted = set(only_families) if only_families is not None else set(by_family)
    if base:
        out.update({k: v for k, v in base.items() if k.split("/")[0] not in wanted})
    literature = _theta(PRIOR)
    alone: dict[str, list[float]] = {}
    for fam in sorted(wanted):
        frows = by_family.get(fam, [])
        if frows:
            alone[fam] = fit_group(frows, literature, FAMILY_SIGMA, fam, "*")
            out[f"{fam}/{ALONE}"] = _entry(alone[fam], len(frows), "family alone on the literature prior")
    for fam in sorted(alone):
        frows = by_family[fam]
        prior = kind_prior(fam, out)
        ftheta = fit_group(frows, prior, kind_sigma(fam, out), fam, "*", ENGINE_EVALS, start=alone[fam])
        out[f"{fam}/*"] = _entry(
            ftheta, len(frows), f"family pooled over engines, prior = other {kind_of(fam)} families"
        )
        by_engine: dict[str, list[CalRow]] = defaultdict(list)
        for r in frows:
            by_engine[profile_key(r)].append(r)
        for eng, erows in sorted(by_engine.items()):
            if len(by_engine) == 1:
                out[f"{fam}/{eng}"] = {
                    **out[f"{fam}/*"],
                    "basis": f"{fam} x {eng} (the family's only engine)",
                }
                continue
            etheta = fit_group(erows, ftheta, ENGINE_SIGMA, fam, eng, ENGINE_EVALS)
            out[f"{fam}/{eng}"] = _entry(etheta, len(erows), f"{fam} x {eng}, prior = {fam} pooled")
    _current_generation(out)
    return out


#: Engines whose product profile is the current generation, with the key of the earlier generation's rows
#: (`reference.ENGINE_BUILDS`): vLLM V1 against V0, TGI 3 against 2.x.
GENERATIONS = {"vllm": "vllm@v0", "tgi": "tgi@v2"}
#: What a generation moves: V1 removed CPU work between steps (docs/serving-facts.md s2), so the per-step and
#: per-sequence overheads (theta indices); the kernels, and so the efficiencies, are the same generation to generation.
GENERATION_PARAMS = (2, 4)


def generation_step(profiles: dict[str, dict[str, Any]], engine: str) -> tuple[list[float], list[str]]:
    """The log-change of the overheads from `engine`'s earlier generation to its current one: the mean over the
    families where both were fitted on their own rows (and those families)."""
    old = GENERATIONS[engine]
    fams = sorted(
        k.split("/")[0]
        for k, v in profiles.items()
        if k.endswith(f"/{engine}")
        and v.get("rows")
        and profiles.get(f"{k.split('/')[0]}/{old}", {}).get("rows")
    )
    step = [0.0] * len(BOUNDS)
    for fam in fams:
        new_t, old_t = _theta(profiles[f"{fam}/{engine}"]), _theta(profiles[f"{fam}/{old}"])
        for i in GENERATION_PARAMS:
            step[i] += (new_t[i] - old_t[i]) / len(fams)
    return step, fams


def _current_generation(out: dict[str, dict[str, Any]]) -> None:
    """A family measured only with an engine's earlier generation gets the engine's product profile from that fit
    moved by the generation step the other families measured (`generation_step`). Such entries have no rows of
    their own and are derived afresh on every (re)fit."""
    for engine, old in GENERATIONS.items():
        step, fams = generation_step(out, engine)
        for fam in sorted({k.split("/")[0] for k in out}):
            key = f"{fam}/{engine}"
            if key in out and out[key].get("rows"):
                continue
            out.pop(key, None)
            if f"{fam}/{old}" not in out:
                continue
            theta = [t + d for t, d in zip(_theta(out[f"{fam}/{old}"]), step, strict=True)]
            if fams:
                moved = ", ".join(
                    f"{n} x{math.exp(step[i]):.2f}"
                    for i, n in zip(GENERATION_PARAMS, ("step", "sequence"), strict=True)
                )
                how = f"moved to the current {engine} ({moved} overhead; from {', '.join(fams)})"
            else:
                how = f"as the current {engine} (no family measured both generations: overheads unchanged)"
            out[key] = _entry(theta, 0, f"{fam} x {old} {how}")


def _entry(theta: Sequence[float], n: int, basis: str) -> dict[str, Any]:
    p = _profile(theta, "", "", basis)
    return {
        "compute_eff": round(p.compute_eff, 4),
        "bandwidth_eff": round(p.bandwidth_eff, 4),
        "step_overhead_s": round(p.step_overhead_s, 6),
        "seq_overhead_s": round(p.seq_overhead_s, 7),
        "request_overhead_s": round(p.request_overhead_s, 6),
        "moe_eff": round(p.moe_eff, 4),
        "rows": n,
        "basis": basis,
    }


# --- cross-validation ---------------------------------------------------------------------------------------
@dataclass
class Prediction:
    row_id: str
    family: str
    engine: str
    metric: str
    measured: float
    predicted: float
    roofline: float | None
    saturated: bool

    @property
    def ape(self) -> float:
        return abs(self.predicted / self.measured - 1)

    @property
    def ape_roofline(self) -> float:
        return abs(self.roofline / self.measured - 1) if self.roofline else math.inf


#: Cross-validation units: `source` holds out one published source at a time (a results file or page at a
#: commit: the reference's `source` column); `study` holds out every
#: source of one lab or repository together -- stricter, since a study's sources share engine builds and setup.
CV_GROUPINGS = ("source", "study")


def cv_key(row: CalRow, grouping: str) -> str:
    if grouping not in CV_GROUPINGS:
        raise ValueError(f"unknown cross-validation grouping {grouping!r} (one of {', '.join(CV_GROUPINGS)})")
    return row.source if grouping == "source" else row.study


def _fold(
    rows: Sequence[CalRow], held_key: str, grouping: str, full: dict[str, dict[str, Any]]
) -> tuple[str, list[Prediction]]:
    """Refit without one group's rows (only the families it touches) and predict them."""
    held = [r for r in rows if cv_key(r, grouping) == held_key]
    fams = {family_of(r.accelerator) for r in held}
    train = [r for r in rows if cv_key(r, grouping) != held_key]
    profiles = fit_profiles(train, only_families=fams, base=full)
    data = {"version": "cv", "profiles": profiles, "global": dict(PRIOR)}
    note = f"  held out {held_key[:90]} ({len(held)} rows; refit {', '.join(sorted(fams))})"
    return note, predictions(held, data)


def predictions(
    rows: Sequence[CalRow],
    data: dict[str, Any],
    roofline: bool = True,
    request_overhead_s: float | None = None,
    metrics: Iterable[str] = METRICS,
) -> list[Prediction]:
    """Each row's measured `metrics` predicted with the profiles of `data` (optionally with another per-request
    overhead), beside the plain roofline's when `roofline`. Rows the model cannot simulate are left out."""
    wanted = set(metrics)
    preds: list[Prediction] = []
    for r in rows:
        prof = profile_for(r.accelerator, profile_key(r), data)
        if request_overhead_s is not None:
            prof = dataclasses.replace(prof, request_overhead_s=request_overhead_s)
        try:
            got = predict_row(r, prof)
            roof = roofline_row(r) if roofline else {}
        except ValueError:
            continue
        for k, v in measured(r).items():
            if k in got and k in wanted:
                preds.append(
                    Prediction(
                        r.row_id, family_of(r.accelerator), r.engine, k, v, got[k], roof.get(k), r.saturated
                    )
                )
    return preds


def cross_validate(
    rows: Sequence[CalRow],
    full: dict[str, dict[str, Any]],
    progress: Callable[[str], None] | None = None,
    grouping: str = "source",
    workers: int = 1,
) -> list[Prediction]:
    """Leave-one-group-out: each group's rows predicted by profiles fitted without that group (`grouping`:
    "source" or "study", see `CV_GROUPINGS`). Folds are independent; `workers` > 1 runs them in processes. The
    result does not depend on `workers` (folds are deterministic and collected in key order)."""
    keys = sorted({cv_key(r, grouping) for r in rows})
    preds: list[Prediction] = []

    def collect(results: Iterable[tuple[str, list[Prediction]]]) -> None:
        for note, fold in results:
            preds.extend(fold)
            if progress:
                progress(note)

    if workers > 1 and len(keys) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            collect(pool.map(_fold, repeat(rows), keys, repeat(grouping), repeat(full)))
    else:
        collect(map(_fold, repeat(rows), keys, repeat(grouping), repeat(full)))
    return preds


def cv_table(
    rows: Sequence[CalRow],
    full: dict[str, dict[str, Any]],
    grouping: str,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """One cross-validation's error table (`error_table`), named by its grouping, with every prediction."""
    preds = cross_validate(rows, full, progress, grouping=grouping, workers=workers)
    return {**error_table(preds), "grouping": grouping, "rows": prediction_rows(preds)}


def prediction_rows(preds: Sequence[Prediction]) -> list[dict[str, Any]]:
    """Every cross-validated prediction, for inspection (which rows the model gets wrong, and by how much)."""
    return [
        {
            "row_id": p.row_id,
            "family": p.family,
            "engine": p.engine,
            "metric": p.metric,
            "measured": round(p.measured, 4),
            "predicted": round(p.predicted, 4),
            "roofline": None if p.roofline is None else round(p.roofline, 4),
        }
        for p in preds
    ]


# --- what the reference data allow ---------------------------------------------------------------------------
#: Per-request overheads tried for each source by `ttft_floor` (s): none up to 0.3 s, the most any reference
#: source calls for (optimum-neuron's MoE rows, whose gap is not an overhead at all)
SOURCE_OVERHEAD_GRID = (0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)


@dataclass
class TtftFloor:
    #: every TTFT row predicted by the profiles fitted on every row
    in_sample: list[Prediction]
    #: the same, each source with the per-request overhead that suits its rows best
    own_overhead: list[Prediction]
    #: the overhead each source chose (s)
    overheads: dict[str, float]


def ttft_floor(
    rows: Sequence[CalRow], data: dict[str, Any], grid: Sequence[float] = SOURCE_OVERHEAD_GRID
) -> TtftFloor:
    """How much TTFT error the reference data leave to the model. In sample, rows are predicted by profiles fitted
    on them; cross-validation can only do worse. With its own overhead, each source also gets the one per-request
    cost (API server, client, network; from `grid`) that suits its rows best: the fixed cost a held-out source
    brings and no other source can tell. The drop from in-sample to own-overhead is what the sources' fixed costs
    disagree by; what remains is what the model's mechanisms miss."""
    ttft_rows = [r for r in rows if r.ttft_ms]
    in_sample = predictions(ttft_rows, data, roofline=False, metrics=("ttft",))
    by_source: dict[str, list[CalRow]] = defaultdict(list)
    for r in ttft_rows:
        by_source[r.source].append(r)
    own: list[Prediction] = []
    chosen: dict[str, float] = {}
    for source, srows in sorted(by_source.items()):
        best: tuple[float, float, list[Prediction]] | None = None
        for overhead in grid:
            preds = predictions(srows, data, roofline=False, request_overhead_s=overhead, metrics=("ttft",))
            if not preds:
                break
            score = statistics.median(p.ape for p in preds)
            if best is None or score < best[0]:
                best = (score, overhead, preds)
        if best is not None:
            own += best[2]
            chosen[source] = best[1]
    return TtftFloor(in_sample, own, chosen)


def error_table(preds: Sequence[Prediction]) -> dict[str, Any]:
    """MdAPE and share within +-25% per metric (TTFT, TPOT, saturated throughput, all throughput, e2e) and per
    family, for the calibrated model and the plain roofline."""

    def summary(items: list[Prediction]) -> dict[str, Any]:
        if not items:
            return {"n": 0}
        ape = [p.ape for p in items]
        roof = [p.ape_roofline for p in items]
        return {
            "n": len(items),
            "mdape": round(statistics.median(ape), 4),
            "within_25": round(sum(a <= WITHIN for a in ape) / len(ape), 4),
            "roofline_mdape": round(statistics.median(roof), 4),
            "roofline_within_25": round(sum(a <= WITHIN for a in roof) / len(roof), 4),
        }

    groups: dict[str, list[Prediction]] = {
        "ttft": [p for p in preds if p.metric == "ttft"],
        "tpot": [p for p in preds if p.metric == "tpot"],
        "saturated_throughput": [p for p in preds if p.metric == "throughput" and p.saturated],
        "throughput": [p for p in preds if p.metric == "throughput"],
        "e2e": [p for p in preds if p.metric == "e2e"],
    }
    by_metric = {k: summary(v) for k, v in groups.items()}
    by_family: dict[str, Any] = {}
    for fam in sorted({p.family for p in preds}):
        fp = [p for p in preds if p.family == fam]
        by_family[fam] = {"all": summary(fp)}
        for k, v in groups.items():
            sub = [p for p in v if p.family == fam]
            if sub:
                by_family[fam][k] = summary(sub)
    return {"by_metric": by_metric, "by_family": by_family, "overall": summary(list(preds))}


def inputs_digest(paths: Iterable[Any]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


# --- what a profile was fitted with ----------------------------------------------------------------------------
#: The fitting procedure's own source, hashed into a profile's version beside the reference inputs. The estimator's
#: modules (engines, memory, step, simulator, reference parsing) are not hashed as text: their behaviour is, through
#: `fingerprint`. A change that moves any reference row's prediction makes the shipped profile stale (its errors and
#: intervals were measured for another model); a refactor that moves none does not.
PROCEDURE_SOURCES = ("fit.py",)
#: Significant digits a fingerprint keeps, and the relative difference it tolerates when compared: far below any
#: modelling change (the smallest efficiency step a fit takes moves predictions by ~1e-3), far above the last-bit
#: noise of reordered floating-point sums.
FINGERPRINT_DIGITS = 7
FINGERPRINT_RTOL = 1e-5


def _sig(values: dict[str, float]) -> dict[str, float]:
    return {k: float(f"{v:.{FINGERPRINT_DIGITS}g}") for k, v in sorted(values.items())}


def fingerprint(rows: Sequence[CalRow], data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every row's measured figures (as parsed), its prediction with the profiles of `data` and the plain
    roofline's: what the estimator does on the reference data, keyed by row id."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        prof = profile_for(r.accelerator, profile_key(r), data)
        try:
            got, roof = predict_row(r, prof), roofline_row(r)
        except ValueError as exc:
            out[r.row_id] = {"measured": _sig(measured(r)), "error": str(exc)}
            continue
        out[r.row_id] = {"measured": _sig(measured(r)), "predicted": _sig(got), "roofline": _sig(roof)}
    return out


def fingerprint_changes(stored: dict[str, Any], current: dict[str, Any], limit: int = 10) -> list[str]:
    """Where the estimator's behaviour on the reference rows departs from a profile's fingerprint (at most
    `limit` lines; empty when it matches)."""
    changes: list[str] = []
    for rid in sorted(set(stored) | set(current)):
        a, b = stored.get(rid), current.get(rid)
        if a is None or b is None:
            changes.append(f"{rid}: {'new row' if a is None else 'row gone'}")
            continue
        for part in ("measured", "predicted", "roofline", "error"):
            x, y = a.get(part), b.get(part)
            if isinstance(x, dict) and isinstance(y, dict) and set(x) == set(y):
                changes += [
                    f"{rid} {part} {k}: {x[k]:.7g} -> {y[k]:.7g}"
                    for k in x
                    if not math.isclose(x[k], y[k], rel_tol=FINGERPRINT_RTOL, abs_tol=1e-12)
                ]
            elif x != y:
                changes.append(f"{rid} {part}: {x} -> {y}")
    return changes[:limit]


def version_digest(inputs_sha: str, prints: dict[str, Any]) -> str:
    """A profile's digest: its inputs' and procedure's hash with its fingerprint."""
    canonical = json.dumps(prints, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{inputs_sha}\n{canonical}".encode()).hexdigest()[:12]


__all__ = ["FAMILY", "PRIOR", "cross_validate", "error_table", "fit_profiles", "predict_row", "roofline_row"]


# --- the whole procedure -------------------------------------------------------------------------------------
#: 2: the version hashes the inputs, the procedure and the estimator's fingerprint (`fingerprint`).
PROFILE_FORMAT = 2


def calibration_rows(
    reference: Any, extra: Sequence[Any] = ()
) -> tuple[list[CalRow], list[tuple[str, str]], list[tuple[str, str]]]:
    """The rows a calibration fits on, those the parser or annotations excluded and those the model cannot use,
    each excluded one with its reason."""
    from sizing.perf.reference import parse_rows, read_rows

    rows, excluded = parse_rows(reference)
    for path in extra:
        rows += read_rows(path)
    unusable: list[tuple[str, str]] = []
    usable: list[CalRow] = []
    for r in rows:
        if r.origin == TWIN_ORIGIN:
            unusable.append((r.row_id, "measured on a local twin, which runs at the estimator's own pace"))
            continue
        try:
            cfg = row_config(r)
            fit = memory_fit(cfg, reference_catalog())
            if not fit.fits:
                unusable.append((r.row_id, f"does not fit in the memory model: {fit.reason}"))
                continue
        except (KeyError, ValueError) as exc:
            unusable.append((r.row_id, f"cannot be modelled: {exc}"))
            continue
        usable.append(r)
    return usable, excluded, unusable


def run_calibration(
    reference: Any,
    extra: Sequence[Any] = (),
    date: str = "",
    cv: bool = True,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Parse, fit, cross-validate; the content of `data/calibration.json` (deterministic for the same inputs)."""
    from sizing.perf.reference import ANNOTATIONS

    say = progress or (lambda _msg: None)
    usable, excluded, unusable = calibration_rows(reference, extra)
    say(
        f"{len(usable)} rows usable, {len(excluded)} excluded by the parser/annotations, {len(unusable)} unusable"
    )
    say("fitting profiles per family and per (family, engine) ...")
    profiles = fit_profiles(usable)
    table: dict[str, Any] = {}
    by_study: dict[str, Any] = {}
    if cv:
        say("leave-one-source-out cross-validation ...")
        table = cv_table(usable, profiles, "source", say, workers)
        say("leave-one-study-out cross-validation (stricter) ...")
        by_study = cv_table(usable, profiles, "study", say, workers)
        # the error a user should expect: the stricter study-level figure (an unseen lab, engine build and setup)
        for key, entry in profiles.items():
            fam = key.split("/")[0]
            fam_table = by_study["by_family"].get(fam, {})
            entry["expected_error"] = {m: fam_table[m]["mdape"] for m in ERROR_METRICS if m in fam_table}
    from pathlib import Path

    here = Path(__file__).parent
    inputs_sha = inputs_digest(
        [reference, ANNOTATIONS, REFERENCE_MODELS, *extra, *(here / f for f in PROCEDURE_SOURCES)]
    )
    prints = fingerprint(usable, {"profiles": profiles, "global": {**PRIOR}})
    digest = version_digest(inputs_sha, prints)
    return {
        "format": PROFILE_FORMAT,
        "version": f"{date or 'undated'}+{digest}",
        "date": date,
        "inputs_sha256_12": inputs_sha,
        "fingerprint": prints,
        "procedure": (__doc__ or "").strip().splitlines()[0],
        "prior": PRIOR,
        "global": {**PRIOR, "basis": "literature prior (no family data)"},
        "profiles": profiles,
        "rows": {"usable": len(usable), "excluded": excluded + unusable},
        "cross_validation": table,
        "cross_validation_by_study": by_study,
    }


CV_TITLES = {
    "source": "Leave-one-source-out",
    "study": "Leave-one-study-out (stricter: every source of a lab or repository held out together)",
}


def format_error_table(table: dict[str, Any]) -> str:
    """The error tables as text: per metric, then per family, calibrated beside plain roofline."""
    from sizing.commands.output import table as render

    def line(name: str, s: dict[str, Any]) -> list[Any]:
        if not s.get("n"):
            return [name, 0, "", "", "", ""]
        return [
            name,
            s["n"],
            f"{s['mdape']:.0%}",
            f"{s['within_25']:.0%}",
            f"{s['roofline_mdape']:.0%}",
            f"{s['roofline_within_25']:.0%}",
        ]

    head = ["", "n", "MdAPE", "within 25%", "roofline MdAPE", "roofline within 25%"]
    parts = [f"{CV_TITLES[table.get('grouping', 'source')]} error by metric:"]
    parts.append(
        render(head, [line(k, v) for k, v in table["by_metric"].items()] + [line("all", table["overall"])])
    )
    parts.append("")
    parts.append("By accelerator family (all metrics; then TTFT / TPOT / saturated throughput MdAPE):")
    rows = []
    for fam, d in table["by_family"].items():
        extra = " / ".join(
            f"{d[m]['mdape']:.0%}" if m in d else "-" for m in ("ttft", "tpot", "saturated_throughput")
        )
        rows.append([*line(fam, d["all"]), extra])
    parts.append(render([*head, "TTFT / TPOT / sat. thr."], rows))
    return "\n".join(parts)
