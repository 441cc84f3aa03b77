"""Point prediction: one deployment, one fixed request shape, one load -> latency and throughput (docs/estimator.md
has its stated intervals)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput, Problem
from sizing.learn.matching import answer
from sizing.learn.profiles import active
from sizing.perf.amplification import amplifications, slower_steps
from sizing.perf.calibration import interval_for, prefill_share, profile_for, stated_interval, summary
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import engine_image
from sizing.perf.memory import MemoryFit, kv_dtype_bytes, memory_fit
from sizing.perf.simulator import (
    ClosedLoop,
    OpenLoop,
    SimResult,
    cached_share,
    saturating_concurrency,
    simulate,
)
from sizing.perf.step import ROOFLINE, StepModel

if TYPE_CHECKING:
    from sizing.catalog import Catalog

#: Requests simulated per prediction: enough for stable p99s (20 samples beyond p99) in tens of milliseconds.
N_REQUESTS = 2000
#: Closed-loop runs simulate at least this many rounds of the concurrency so a steady state exists.
ROUNDS = 4
#: Largest concurrency simulated as given; beyond it the replica is long saturated and only the queue grows.
MAX_SIMULATED_CONCURRENCY = 4096


def _check_load(
    input_tokens: int, output_tokens: int, concurrency: int | None, rate: float | None
) -> int | None:
    """The request shape and load checked; the concurrency simulated (1 when neither it nor a rate is given)."""
    if input_tokens < 1 or output_tokens < 1:
        raise InvalidInput(
            "input and output tokens must be at least 1",
            [Problem("input_tokens" if input_tokens < 1 else "output_tokens", "must be >= 1")],
        )
    if concurrency is not None and rate is not None:
        raise InvalidInput(
            "give concurrency or rate, not both", [Problem("concurrency", "and rate both given")]
        )
    if concurrency is not None and concurrency < 1:
        raise InvalidInput(
            f"concurrency must be at least 1, got {concurrency}", [Problem("concurrency", ">= 1")]
        )
    if rate is not None and not rate > 0:
        raise InvalidInput(f"rate must be positive, got {rate}", [Problem("rate", "> 0")])
    if concurrency is None and rate is None:
        return 1
    return concurrency


def _check_prefix(shared_prefix_tokens: int, input_tokens: int) -> None:
    """A shared prefix is a part of the prompt: 0 or more tokens, fewer than the prompt has."""
    if not shared_prefix_tokens:
        return
    from sizing.workload.spec import shared_prefix_problem

    problem = (
        f"must be 0 or more tokens, got {shared_prefix_tokens}"
        if shared_prefix_tokens < 0
        else shared_prefix_problem(shared_prefix_tokens, input_tokens)
    )
    if problem:
        raise InvalidInput(f"shared_prefix: {problem}", [Problem("shared_prefix", problem)])


def _check_context(
    model: str, input_tokens: int, output_tokens: int, max_model_len: int | None, catalog: Catalog | None
) -> None:
    """The request, and `max_model_len` when given, fit the model's context; the server admits the request."""
    from sizing.catalog import load_catalog

    context = input_tokens + output_tokens
    spec = (catalog or load_catalog()).model(model)
    if context > spec.max_position_embeddings:
        raise InvalidInput(
            f"input + output = {context:,} tokens exceeds the {spec.max_position_embeddings:,}-token context of"
            f" {spec.id}",
            [Problem("input_tokens", f"{input_tokens} + {output_tokens} > {spec.max_position_embeddings}")],
        )
    if max_model_len is not None and max_model_len < context:
        raise InvalidInput(
            f"max_model_len {max_model_len:,} is below input + output = {context:,} tokens: the server would refuse"
            " the request",
            [Problem("max_model_len", f"{max_model_len} < {input_tokens} + {output_tokens}")],
        )
    if max_model_len is not None and max_model_len > spec.max_position_embeddings:
        raise InvalidInput(
            f"max_model_len {max_model_len:,} exceeds the {spec.max_position_embeddings:,}-token context of {spec.id}",
            [Problem("max_model_len", f"> {spec.max_position_embeddings}")],
        )


def _deployment(
    cfg: HardwareConfig,
    fit: MemoryFit,
    input_tokens: int,
    output_tokens: int,
    concurrency: int | None,
    rate: float | None,
) -> dict[str, Any]:
    """The head of a prediction: what was predicted, under which load, and whether it fits in memory."""
    out: dict[str, Any] = {
        "model": cfg.model_id,
        "instance_type": cfg.instance_type,
        "tensor_parallel": cfg.tensor_parallel,
        "quantization": cfg.quantization,
        "engine": cfg.engine,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }
    if rate is not None:
        out["request_rate"] = rate
    else:
        out["concurrency"] = concurrency
    out["fits"] = fit.fits
    out["kv_cache_tokens"] = fit.kv_cache_tokens
    out["memory"] = fit.as_dict()
    return out


#: The figures of a prediction that does not fit in memory.
_NO_FIGURES: dict[str, Any] = {
    "ttft_ms": None,
    "tpot_ms": None,
    "e2e_s": None,
    "output_tokens_per_s": None,
    "requests_per_s": None,
}


def _load(concurrency: int | None, rate: float | None, notes: list[str]) -> tuple[ClosedLoop | OpenLoop, int]:
    """The load simulated and the requests it takes (a closed loop capped at MAX_SIMULATED_CONCURRENCY)."""
    if concurrency is not None:
        c = min(concurrency, MAX_SIMULATED_CONCURRENCY)
        if c < concurrency:
            notes.append(f"concurrency {concurrency} simulated as {c}: the replica saturates long before")
        return ClosedLoop(c), max(N_REQUESTS, ROUNDS * c)
    assert rate is not None
    return OpenLoop(rate), N_REQUESTS


def _figures(res: SimResult, saturated: bool, saturating: int) -> dict[str, Any]:
    return {
        "ttft_ms": res.ttft_ms.as_dict(1),
        "tpot_ms": res.tpot_ms.as_dict(2),
        "e2e_s": res.e2e_s.as_dict(3),
        "output_tokens_per_s": round(res.output_tokens_per_s, 1),
        "requests_per_s": round(res.requests_per_s, 4),
        "itl_ms": res.itl_ms.as_dict(2),
        "preemptions": res.preemptions,
        "saturated": saturated,
        "saturating_concurrency": saturating,
    }


def roofline_prefill_ms(sm: StepModel, prefill_tokens: int, catalog: Catalog | None = None) -> float:
    """The plain roofline's time for one prompt's prefill in one step (datasheet peaks, no overheads): what the
    held-out predictions store as their roofline TTFT (`sizing.perf.fit.roofline_row`). Read from `catalog`, else
    the catalog `sm`'s configuration was looked up in."""
    roof = StepModel(sm.cfg, sm.fit, ROOFLINE, catalog or sm.cfg.catalog_used())
    return roof.iteration_time(max(1, prefill_tokens), 0, 0) * 1e3


def _calibration(
    out: dict[str, Any],
    sm: StepModel,
    engine: str,
    prefill_ms: float | None = None,
    amplification: dict[str, float] | None = None,
) -> None:
    """The profile's summary and factors, and each metric's interval from the cross-validated error; TTFT's by
    the share of the predicted TTFT that is the prompt's own prefill (`prefill_ms` at the roofline:
    `sizing.perf.calibration.prefill_share`), and each latency's by how much the prediction amplifies a step-time
    error (`amplification`, by metric: `sizing.perf.amplification`)."""
    amp = amplification or {}
    p = sm.profile
    out["calibration"] = {**summary(p), "factors": {k: round(v, 5) for k, v in p.params().items()}}
    bands = interval_for(p.family, engine, moe=sm.mixture_of_experts)
    ttft = out.get("ttft_ms")
    share = prefill_share(ttft.get("mean") if isinstance(ttft, dict) else None, prefill_ms, p.compute_eff)
    out["intervals"] = {
        "basis": bands.get("basis", ""),
        **{
            key: stated_interval(out[key], metric, bands, prefill_share=share, amplification=amp.get(metric))
            for key, metric in (
                ("ttft_ms", "ttft"),
                ("tpot_ms", "tpot"),
                ("output_tokens_per_s", "throughput"),
            )
            if out.get(key) is not None
        },
    }


class ServingOverrides(TypedDict, total=False):
    """The serving settings `predict` takes by keyword (`ServingConfig`'s names and meaning); each one not given is
    the engine's default (`max_model_len`: the request's input + output)."""

    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    max_model_len: int | None
    gpu_memory_utilization: float | None
    kv_cache_dtype: str | None
    lnc: int | None


def predict(
    model: str,
    instance: str,
    tp: int | None = None,
    quant: str = "bf16",
    engine: str | None = None,
    input_tokens: int = 1000,
    output_tokens: int = 200,
    concurrency: int | None = None,
    rate: float | None = None,
    catalog: Catalog | None = None,
    seed: int = 0,
    *,
    shared_prefix_tokens: int = 0,
    **serving: Unpack[ServingOverrides],
) -> dict[str, Any]:
    """Predict one deployment under closed-loop `concurrency` or Poisson `rate` with fixed token counts. The
    serving settings (`ServingConfig`'s names and meaning) default to the engine's; the result's `serving` block
    states the configuration simulated, and each metric's `interval` the range the estimator's cross-validated
    error gives it (`sizing.perf.calibration.interval_for`). `shared_prefix_tokens`: tokens every prompt starts
    with, the same in all requests (a workload's `tokens.shared_prefix`); as the planner does, the deployment then
    caches prefixes and serves them from the KV cache."""
    concurrency = _check_load(input_tokens, output_tokens, concurrency, rate)
    max_model_len = serving.get("max_model_len")
    _check_context(model, input_tokens, output_tokens, max_model_len, catalog)
    _check_prefix(shared_prefix_tokens, input_tokens)
    context = input_tokens + output_tokens
    cfg = HardwareConfig.create(
        model,
        instance,
        tp,
        quant,
        engine,
        catalog,
        max_model_len=max_model_len or context,
        gpu_memory_utilization=serving.get("gpu_memory_utilization"),
        max_num_seqs=serving.get("max_num_seqs"),
        max_num_batched_tokens=serving.get("max_num_batched_tokens"),
        kv_cache_dtype=serving.get("kv_cache_dtype"),
        lnc=serving.get("lnc"),
    )
    if shared_prefix_tokens:
        cfg = dataclasses.replace(cfg, enable_prefix_caching=True)
    # a CPU without bf16 arithmetic serves a bf16 checkpoint in fp32, as the planner sizes it
    # (`Accelerator.served_format`): predicted as served, and said so
    acc = cfg.parts(catalog).accelerator
    asked, served = cfg.quantization, acc.served_format(cfg.quantization)
    if served != asked:
        cfg = dataclasses.replace(cfg, quantization=served)
    fit = memory_fit(cfg, catalog)
    out = _deployment(cfg, fit, input_tokens, output_tokens, concurrency, rate)
    acc_id = acc.id
    # the shipped profile with the team's adopted correction for this model, when one is adopted
    sm = StepModel.for_config(cfg, profile_for(acc_id, cfg.engine, model=cfg.model_id), catalog=catalog)
    out["serving"] = simulated_serving(cfg, sm, catalog)
    if not fit.fits:
        out.update(_NO_FIGURES)
        return out
    notes: list[str] = (
        []
        if max_model_len
        else [
            f"max_model_len set to input + output = {context} tokens (the deployment is sized for this request"
            " shape)"
        ]
    )
    if served != asked:
        notes.append(
            f"served in {served}: {acc.name} has no {asked} arithmetic, and its {asked}"
            f" kernels prefill several times slower (docs/engine.md, 'fp32 where the CPU has no bf16')"
        )
    load, n = _load(concurrency, rate, notes)
    fixed = TokenDistribution.fixed

    def run(step: StepModel, itl: bool = True) -> SimResult:
        return simulate(
            step,
            load,
            fixed(input_tokens),
            fixed(output_tokens),
            n_requests=n,
            seed=seed,
            itl=itl,
            prefix_tokens=shared_prefix_tokens,
        )

    res = run(sm)
    sat_c = saturating_concurrency(sm, input_tokens, output_tokens, shared_prefix_tokens)
    saturated = concurrency is not None and concurrency >= sat_c
    if saturated:
        notes.append(
            f"concurrency >= {sat_c} saturates the replica: throughput is the maximum, latency includes queueing"
        )
    out.update(_figures(res, saturated, sat_c))
    prefilled = input_tokens - cached_share(sm, shared_prefix_tokens, input_tokens)
    # the same requests with every step slower: how much this load amplifies a step-time error
    slower = run(StepModel(cfg, fit, slower_steps(sm.profile), catalog), itl=False)
    amp = amplifications(
        {"ttft": res.ttft_ms.mean, "tpot": res.tpot_ms.mean},
        {"ttft": slower.ttft_ms.mean, "tpot": slower.tpot_ms.mean},
    )
    _calibration(out, sm, cfg.engine, roofline_prefill_ms(sm, prefilled, catalog), amp)
    out["notes"] = notes
    if shared_prefix_tokens:
        out["shared_prefix_tokens"] = shared_prefix_tokens
        notes.append(
            f"every prompt starts with the same {shared_prefix_tokens:,} tokens: read from the prefix cache (all"
            f" but its partial last block), {input_tokens - cached_share(sm, shared_prefix_tokens, input_tokens):,}"
            " of each prompt's tokens prefilled"
        )
    _answer_basis(out, acc_id, concurrency, shared_prefix_tokens)
    if rate is not None and res.requests_per_s < rate * 0.95 and not math.isinf(res.requests_per_s):
        notes.append(
            f"offered {rate:g} req/s exceeds what the replica serves (~{res.requests_per_s:.2f} req/s): the queue grows"
            " and latency depends on the run length"
        )
    return out


def _answer_basis(
    out: dict[str, Any], accelerator: str, concurrency: int | None, shared_prefix_tokens: int = 0
) -> None:
    """`basis` and `profile_version` of a prediction: `measured` when the team measured this model, accelerator and
    ServingConfig at this token shape and a load within the measured levels (the figures are then the measured
    ones interpolated, the estimator's own kept under `predicted`: `sizing.learn.matching`), else `calibrated` (a team
    correction applies) or `modelled`."""
    cal = out["calibration"]
    out["basis"] = cal["estimate_basis"]
    out["profile_version"] = cal["profile_version"]
    if concurrency is None:
        return

    hit = answer(
        active(),
        model=out["model"],
        accelerator=accelerator,
        serving=out["serving"],
        input_tokens=out["input_tokens"],
        output_tokens=out["output_tokens"],
        concurrency=concurrency,
        shared_prefix_tokens=shared_prefix_tokens,
    )
    if hit is None:
        return
    figures = hit.pop("figures")
    out["modelled"] = {
        k: out.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_s", "output_tokens_per_s", "requests_per_s")
    }
    for key in ("ttft_ms", "tpot_ms", "e2e_s"):
        if isinstance(figures.get(key), dict):
            out[key] = {k: (None if v is None else round(float(v), 4)) for k, v in figures[key].items()}
    for key in ("output_tokens_per_s", "requests_per_s"):
        if isinstance(figures.get(key), int | float):
            out[key] = round(float(figures[key]), 4)
    out["basis"] = "measured"
    out["measurement"] = hit
    out["notes"].append(
        f"answered from run {hit['run_id']}'s measurement (levels {', '.join(map(str, hit['levels']))},"
        f" token shape {hit['token_shape']['input_tokens']:.0f}/{hit['token_shape']['output_tokens']:.0f})"
    )


def simulated_serving(cfg: HardwareConfig, sm: StepModel, catalog: Catalog | None = None) -> dict[str, Any]:
    """The serving configuration simulated, in `ServingConfig`'s names: every setting as the engine runs it
    (defaults resolved; on Neuron the compiled batch the KV memory holds, the LNC and the context buckets)."""

    acc = cfg.parts(catalog).accelerator
    neuron = acc.kind == "neuron"
    kv = cfg.kv_cache_dtype or ("fp8" if sm.fit.kv_bytes_per_token_per_device and _fp8_kv(cfg) else "auto")
    out: dict[str, Any] = {
        "model": cfg.model_id,
        "engine": cfg.engine,
        "image": engine_image(cfg.engine, acc.kind),
        "tensor_parallel": cfg.tensor_parallel,
        "quantization": cfg.quantization,
        "kv_cache_dtype": kv,
        "max_model_len": sm.max_model_len,
        "max_num_seqs": sm.max_num_seqs,
        "max_num_batched_tokens": None if neuron else sm.max_num_batched_tokens,
        "gpu_memory_utilization": round(sm.fit.memory_fraction, 4),
        "enable_chunked_prefill": sm.chunked_prefill,
        "enable_prefix_caching": sm.prefix_caching,
    }
    if neuron:
        out["lnc"] = acc.lnc
        out["context_buckets"] = list(sm.prefill_buckets)
    return out


def _fp8_kv(cfg: HardwareConfig) -> bool:

    return kv_dtype_bytes(cfg.engine, cfg.quantization, cfg.kv_cache_dtype) < 2
