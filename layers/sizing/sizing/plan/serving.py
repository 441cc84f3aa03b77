"""The serving configuration the planner proposes for a hardware option: the engine's defaults with a context
that covers the workload's requests, and the runtime parameters worth searching.

`default_serving` is what the engine would run with if told only the model, its tensor parallelism and the
context the workload needs; `tuning_variants` are the alternatives the planner simulates (`max_num_batched_tokens`,
`max_num_seqs`, an fp8 KV cache where engine and accelerator have one), in the spirit of vLLM's `auto_tune`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sizing.base.serving_config import ServingConfig
from sizing.catalog import Accelerator, Catalog
from sizing.perf.engines import engine_defaults, engine_image
from sizing.workload.derived import WorkloadModel, context_limit

#: The percentile of input + output tokens a deployment's `max_model_len` covers: one request in a thousand may be
#: longer (and is refused by the server, as stated beside the figure).
CONTEXT_PERCENTILE = "p99.9"
#: `max_model_len` is rounded up to a whole number of these tokens (a readable figure, and a whole number of
#: 16-token KV blocks); the model's context caps it.
CONTEXT_STEP = 256
#: Draws used to state the share of requests longer than `max_model_len` (seeded: the figure is deterministic;
#: its sampling error at 20,000 draws is below 0.1 point).
REFUSED_SHARE_DRAWS = 20_000
#: Engines that cache a shared prompt prefix across requests (vLLM automatic prefix caching, SGLang RadixAttention,
#: TGI 3 prefix caching, TensorRT-LLM KV-cache reuse); NxD Inference on Neuron needs a compile-time option the
#: rendered image does not set, so Neuron prefills every prompt.
PREFIX_CACHING_ENGINES = frozenset({"vllm", "sglang", "tgi", "trtllm"})
#: Engines whose KV cache may be fp8 (vLLM/SGLang `--kv-cache-dtype fp8`, TensorRT-LLM FP8 KV), on accelerators
#: with fp8 support (Ada, Hopper, Blackwell: L4, L40S, H100, H200, B200).
FP8_KV_ENGINES = frozenset({"vllm", "sglang", "trtllm"})
#: Token budgets (`max_num_batched_tokens`) searched, as multiples of the current one: a smaller budget splits
#: long prompts into more chunks, so decodes sharing a step wait less (lower TPOT, higher TTFT); a larger one
#: prefills in fewer steps. vLLM's auto_tune sweeps the same knob. The ladder goes down to 1/8 in one round
#: because capacity is not unimodal in the budget: a halving that gains under the search's 3% threshold can
#: precede one that gains far more, and a search that stopped there answered a looser SLO with a dearer
#: replica than a tighter one (found by the property test that tightening an SLO never lowers the cost).
BUDGET_FACTORS = (0.125, 0.25, 0.5, 2.0)
#: Smallest token budget searched: below it every prompt of a chat workload takes many steps.
MIN_BUDGET = 256
#: Batch caps (`max_num_seqs`) searched, as fractions of the current one: fewer sequences per step trade
#: queueing for a faster step (TPOT-bound SLOs).
SEQS_FACTORS = (0.5,)
#: A batch workload (hours of e2e SLO) also tries twice the batch cap: throughput first, each step longer, which a
#: latency SLO of hours tolerates; vLLM's guide raises `max_num_seqs` for throughput (docs.vllm.ai, "Optimization
#: and Tuning"). The capacity search keeps it only when it raises the SLO capacity, so it never makes an answer dearer.
BATCH_SEQS_FACTOR = 2.0


@dataclass(frozen=True)
class Context:
    """The context a deployment serves and the share of the workload's requests beyond it."""

    max_model_len: int
    needed_tokens: int
    refused_share: float
    model_context: int

    def describe(self) -> dict[str, float | int | str]:
        return {
            "max_model_len": self.max_model_len,
            "covers": f"{CONTEXT_PERCENTILE} of input + output ({self.needed_tokens:,} tokens)",
            "refused_share": round(self.refused_share, 5),
            "model_context": self.model_context,
        }


def context_for(wm: WorkloadModel, model_context: int) -> Context:
    """`max_model_len` covering the workload's p99.9 input plus p99.9 output (an upper bound on the p99.9 of their
    sum), rounded up to CONTEXT_STEP, capped by the model's (or the constraints') context."""
    needed = math.ceil(
        wm.input_tokens.percentile(CONTEXT_PERCENTILE) + wm.output_tokens.percentile(CONTEXT_PERCENTILE)
    )
    limit = context_limit(wm.spec, model_context)
    length = min(limit, CONTEXT_STEP * math.ceil(needed / CONTEXT_STEP))
    return Context(length, needed, refused_share(wm, length), model_context)


def refused_share(wm: WorkloadModel, max_model_len: int) -> float:
    """Share of requests whose input + output exceeds `max_model_len` (the server refuses them)."""
    rng = np.random.default_rng(0)
    total = wm.input_tokens.sample(rng, REFUSED_SHARE_DRAWS) + wm.output_tokens.sample(
        rng, REFUSED_SHARE_DRAWS
    )
    return float(np.mean(total > max_model_len))


def default_serving(
    model: str,
    engine: str,
    tensor_parallel: int,
    quantization: str,
    accelerator: Accelerator,
    max_model_len: int,
    *,
    prefix_caching: bool = False,
) -> ServingConfig:
    """The engine's own defaults on `accelerator` for a replica that must hold `max_model_len` tokens; prefix
    caching on when the workload declares a shared prefix and the engine has it."""
    d = engine_defaults(
        engine, accelerator.name, accelerator.device_memory_bytes / 1e9, tensor_parallel, accelerator.kind
    )
    budget: int | None = d.max_num_batched_tokens or None
    if budget is not None and not d.chunked_prefill:
        budget = max(budget, max_model_len)  # a whole prompt must fit one step without chunking
    kv = "fp8" if engine == "trtllm" and quantization == "fp8" else "auto"
    return ServingConfig(
        model=model,
        engine=engine,
        image=engine_image(engine, accelerator.kind),
        tensor_parallel=tensor_parallel,
        quantization=quantization,
        kv_cache_dtype=kv,
        max_model_len=max_model_len,
        max_num_seqs=d.max_num_seqs,
        max_num_batched_tokens=budget,
        gpu_memory_utilization=round(d.memory_fraction, 4),
        enable_chunked_prefill=d.chunked_prefill,
        enable_prefix_caching=prefix_caching and engine in PREFIX_CACHING_ENGINES,
    )


def with_effective_batch(serving: ServingConfig, max_num_seqs: int) -> ServingConfig:
    """The config with the batch cap the engine will really run (a Neuron replica compiles for the sequences its
    KV cache holds at max_model_len)."""
    if max_num_seqs == serving.max_num_seqs or max_num_seqs < 1:
        return serving
    return serving.model_copy(update={"max_num_seqs": max_num_seqs})


def tuning_variants(
    base: ServingConfig, accelerator: Accelerator, batch: bool = False
) -> list[ServingConfig]:
    """Runtime-parameter alternatives to `base`, each one change away from it (the search is coordinate-wise);
    `batch`: a batch workload, which also tries a larger batch cap (BATCH_SEQS_FACTOR)."""
    out: list[ServingConfig] = []
    if (
        base.engine in FP8_KV_ENGINES
        and base.kv_cache_dtype != "fp8"
        and accelerator.kind == "gpu"
        and accelerator.supports("fp8")
    ):
        out.append(base.model_copy(update={"kv_cache_dtype": "fp8"}))
    budget = base.max_num_batched_tokens
    if budget and base.enable_chunked_prefill:
        for f in BUDGET_FACTORS:
            b = max(MIN_BUDGET, int(budget * f))
            # vLLM refuses a token budget below the batch cap (each running sequence needs a token in a step)
            if b != budget and b >= base.max_num_seqs:
                out.append(base.model_copy(update={"max_num_batched_tokens": b}))
    # a smaller batch cap: on Neuron the compiled decode batch, which every decode step runs whatever it holds
    for f in SEQS_FACTORS:
        seqs = max(1, int(base.max_num_seqs * f))
        if seqs != base.max_num_seqs:
            out.append(base.model_copy(update={"max_num_seqs": seqs}))
    if base.engine != "neuron":
        more = int(base.max_num_seqs * BATCH_SEQS_FACTOR)
        # vLLM refuses a token budget below the batch cap (each running sequence needs a token in a step)
        if batch and (not budget or more <= budget):
            out.append(base.model_copy(update={"max_num_seqs": more}))
    seen: set[ServingConfig] = set()
    unique = []
    for s in out:
        if s not in seen and s != base:
            seen.add(s)
            unique.append(s)
    return unique


def changes(default: ServingConfig, tuned: ServingConfig) -> dict[str, list[object]]:
    """Fields the tuned config changes: name -> [default, tuned]."""
    a, b = default.model_dump(), tuned.model_dump()
    return {k: [a[k], b[k]] for k in a if a[k] != b[k]}


#: Context of a replica named only by its architecture id (no workload to size it from): a 2k-token prompt
#: with room for history and answer, without reserving KV cache for a 128k context. `sizing manifests
#: --max-model-len` states another.
BARE_ID_CONTEXT = 8192


def serving_for(
    cat: Catalog,
    model: str,
    instance_type: str,
    tp: int,
    quant: str,
    engine: str,
    max_model_len: int | None = None,
) -> ServingConfig:
    """The default `ServingConfig` of a replica given only by its hardware (a bare architecture id)."""
    spec = cat.model(model)
    acc = cat.accelerator_of(cat.instance(instance_type))
    length = min(max_model_len or BARE_ID_CONTEXT, spec.max_position_embeddings)
    return default_serving(model, engine, tp, quant, acc, length)
