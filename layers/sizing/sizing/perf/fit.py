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
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from sizing.base.distributions import TokenDistribution
from sizing.base.spawn import simulated_ramp_s
from sizing.catalog import load_catalog
from sizing.catalog.models import Catalog
from sizing.catalog.records import ModelSpec
from sizing.perf.calibration import family_of, kind_of
from sizing.perf.calrows import CalRow
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import build_scheduler
from sizing.perf.memory import memory_fit
from sizing.perf.optimizer import nelder_mead
from sizing.perf.reference import LLMPERF_LAUNCH_GAP_S, REFERENCE_MODELS, SHAREGPT_SIGMA
from sizing.perf.simulator import (
    ClosedLoop,
    OpenLoop,
    SimResult,
    Windows,
    saturating_concurrency,
    simulate,
    simulate_windows,
)
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


#: Parameter bounds. No efficiency exceeds the datasheet: compute and bandwidth at most 1 of the chip's peak, and
#: a MoE model's expert work at most as efficient as its dense layers (`step.StepModel`). A fit that wants more
#: is compensating for a mechanism the model lacks: the 1.2 bounds of earlier profiles let Hopper read weights at
#: 1.04 of its 3.35 TB/s and MoE experts at 1.28 x that (an uncounted input embedding table, decode batches padded
#: to the compiled batch on Neuron: `step.unread_embedding_params`, `steptime.decode_batch_buckets`). Overheads
#: between 0.05 ms and 100 ms per step.
BOUNDS = ((0.02, 1.0), (0.05, 1.0), (5e-5, 0.1), (1e-4, 0.5), (1e-6, 0.005), (0.05, 1.0))


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
        kv_cache_tokens=row.kv_cache_tokens,
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
    if row.token_dist == "sharegpt":
        return (
            TokenDistribution.lognormal(row.input_tokens, SHAREGPT_SIGMA),
            TokenDistribution.lognormal(row.output_tokens, SHAREGPT_SIGMA),
        )
    return _drawn(row.input_tokens, row.input_sigma), _drawn(row.output_tokens, row.output_sigma)


def predict_row(row: CalRow, profile: Profile, in_groups: bool = False) -> dict[str, float]:
    """Simulate the row's deployment and load; the metrics the row measured (`in_groups`: as `simulate_row`)."""
    res = simulate_row(row, profile, in_groups=in_groups)
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


def _row_model(row: CalRow, profile: Profile, prefix_tokens: int = 0) -> StepModel:
    """The step model of the row's deployment under `profile`, scheduling as the row's engine build did."""
    cat = reference_catalog()
    cfg = row_config(row)
    if prefix_tokens:
        cfg = dataclasses.replace(cfg, enable_prefix_caching=True)
    sm = StepModel(cfg, memory_fit(cfg, cat), profile, cat)
    # an older engine build schedules as it did: the server ran with the model's own context unless the row says
    served_len = row.max_model_len or cfg.parts(cat).model.max_position_embeddings
    sm.schedule_as(build_scheduler(profile_key(row), served_len, row.engine_version))
    return sm


def row_windows(row: CalRow, profile: Profile, prefix_tokens: int = 0) -> Windows | None:
    """A Poisson level of this product's load test simulated as its window reads (`CalRow.window_s`): the mean
    over windows enough to settle it and the spread one window is drawn from. None for any other row."""
    if row.load != "open" or row.window_s is None or row.warmup_s is None:
        return None
    i_dist, o_dist = _dists(row)
    return simulate_windows(
        _row_model(row, profile, prefix_tokens), row.load_value, row.warmup_s, row.window_s, i_dist, o_dist,
        prefix_tokens=prefix_tokens,
    )  # fmt: skip


def simulate_row(row: CalRow, profile: Profile, prefix_tokens: int = 0, in_groups: bool = False) -> SimResult:
    """The simulated run of the row's deployment and load (`prefix_tokens`: prompt tokens every request shares,
    served from the engine's prefix cache). A Poisson level of this product's load test is read as its window
    read it (`row_windows`), where one steady run of OPEN_LOOP_REQUESTS read a level near saturation as if its
    queue had grown for minutes (docs/engine.md, "A Poisson window is one draw").

    `in_groups`: a closed loop that states its lock-step groups (`CalRow.lockstep_group`) is simulated in them, not
    every user at once (`start: together`). The calibration does not: the groups' dynamics are the engine's
    (docs/engine.md, "Lock-step"), but fitted so the CPU family read held-out models worse (TTFT 22% -> 29%), its
    per-request cost doubled to stand in for the API server's lag that the simulator lacks."""
    windows = row_windows(row, profile, prefix_tokens)
    if windows is not None:
        return windows.pooled
    sm = _row_model(row, profile, prefix_tokens)
    i_dist, o_dist = _dists(row)
    floor = MIN_REQUESTS_SHAREGPT if row.token_dist == "sharegpt" else MIN_REQUESTS_FIXED
    warmup = 0.1
    load: ClosedLoop | OpenLoop
    if row.load == "closed":
        c = max(1, round(row.load_value))
        if row.start == "waves":
            load = ClosedLoop(c, wave_gap_s=LLMPERF_LAUNCH_GAP_S)
        elif in_groups and row.lockstep_group:
            # the groups this product's load test measured: all 16 users of 128/32 on one EPYC core at once read
            # TTFT 11.4 s and TPOT 178 ms with the engine's own step times, in its groups of 5 7.4 s and 302 ms,
            # against 6.9 s and 312 measured (docs/engine.md, "Lock-step")
            load = ClosedLoop(c, group=min(c, row.lockstep_group), steady=row.origin == "loadtest")
        elif row.origin == "loadtest" and (
            ramp := simulated_ramp_s(c, row.warmup_s, row.lockstep_group or 1)
        ):
            # users started as the load test started them: over part of the level's warm-up, at least one a
            # second; the estimator's default spreads them over a whole request, where they never overlap. A loop
            # whose users fell into lock-step groups (`start: together`) is sent all at once below, as before
            load = ClosedLoop(c, ramp_s=ramp, steady=True)
        else:
            # this product's own load tests read throughput in a window after their warm-up, when every user
            # is in (`ClosedLoop.steady`); published benchmarks over their whole runs
            load = ClosedLoop(
                c, ramp_s=0.0 if row.start == "together" else None, steady=row.origin == "loadtest"
            )
        n = min(MAX_REQUESTS, max(floor, ROUNDS * c))
    elif row.load in ("batch", "offline"):
        c = max(1, round(row.load_value))
        load, n, warmup = ClosedLoop(c, ramp_s=0.0), c, 0.0
    elif row.load == "saturate":
        c = max(1, sm.max_num_seqs)
        load, n = ClosedLoop(c), min(MAX_REQUESTS, max(floor, ROUNDS * c))
    else:
        load, n = OpenLoop(row.load_value), OPEN_LOOP_REQUESTS
    return simulate(
        sm, load, i_dist, o_dist, n_requests=n, seed=0, warmup=warmup, prefix_tokens=prefix_tokens
    )


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
