"""Memory fit: weights, runtime and activation overhead, KV-cache capacity, and why a model does not fit.

weights/device = each layer type's params x its format's bytes/param / TP (experts, MLP, attention, embeddings:
`ModelSpec.part_bytes`), with attention counted per device as held: the K/V projections replicated when TP exceeds
the KV heads, and on Neuron the Q/O heads padded to a multiple of TP (and K/V run as multi-head when TP is not a
multiple of the KV heads: NxD Inference's GQA sharding);
usable = device memory x utilisation - runtime - activations - weights (vLLM/SGLang/TGI budget a share of the
total; TensorRT-LLM a share of what is free after weights); KV bytes/token/device = 2 x layers x
max(1, kv_heads/TP) x head_dim x 2 bytes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sizing.perf.engines import DEFAULT_MIN_CONTEXT, pads_heads

if TYPE_CHECKING:
    from sizing.catalog import Catalog, ModelSpec
    from sizing.perf.config import HardwareConfig

GB = 1e9
#: KV cache element size: engines keep K/V in the activation dtype (bf16) unless told otherwise.
KV_DTYPE_BYTES = 2.0
#: A model served in fp32 keeps its KV cache in fp32 too (vLLM's `kv_cache_dtype=auto`: the model's dtype).
FP32_KV_BYTES = 4.0
#: TensorRT-LLM serves FP8 (ModelOpt) checkpoints with an FP8 KV cache in NVIDIA's published benchmarks
#: (assumed for every trtllm + fp8 deployment; vLLM/SGLang keep `kv_cache_dtype=auto`, i.e. bf16).
FP8_KV_BYTES = 1.0


def kv_dtype_bytes(engine: str, quantization: str, kv_cache_dtype: str | None = None) -> float:
    """Bytes per K/V element: as configured (`fp8` or `auto`), else the engine's choice for the quantization."""
    if kv_cache_dtype == "fp8":
        return FP8_KV_BYTES
    if quantization == "fp32":
        return FP32_KV_BYTES
    if kv_cache_dtype is not None:
        return KV_DTYPE_BYTES
    return FP8_KV_BYTES if engine == "trtllm" and quantization == "fp8" else KV_DTYPE_BYTES


#: Activation element size during the profiling forward pass (bf16).
ACT_BYTES = 2.0
#: Sampler logits are float32.
LOGIT_BYTES = 4.0
#: Live activation tensors per token at the peak of a layer: residual, normed input, QKV and attention out are
#: ~4 x hidden; the MLP's gate and up projections 2 x intermediate / TP (vLLM's profile run peak).
ACT_HIDDEN_MULTIPLE = 4
ACT_INTERMEDIATE_MULTIPLE = 2


@dataclass(frozen=True)
class MemoryFit:
    """Whether a replica holds the model, and how many KV-cache tokens remain."""

    fits: bool
    reason: str
    tensor_parallel: int
    device_memory_gb: float
    usable_gb_per_device: float
    weights_gb_per_device: float
    runtime_gb_per_device: float
    activation_gb_per_device: float
    kv_gb_per_device: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_device: float
    kv_cache_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    memory_fraction: float

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 3)
        return out


def heads_per_device(spec: ModelSpec, tp: int, padded: bool = False) -> float:
    """Query heads each rank computes: an even share, or with padding (Neuron) the share rounded up -- the
    heads are padded to a multiple of TP and the padded heads cost their FLOPs and weights."""
    h = spec.num_attention_heads
    return float(-(-h // tp)) if padded else h / tp


def kv_heads_per_device(spec: ModelSpec, tp: int, padded: bool = False) -> float:
    """KV heads each rank holds: a share when TP divides them, one (replicated) when TP is a multiple of them.
    With padding (NxD Inference) a TP that is neither converts the attention to multi-head: each rank holds as
    many K/V heads as (padded) query heads."""
    kv = spec.num_key_value_heads
    if padded and kv % tp and tp % kv:
        return heads_per_device(spec, tp, padded)
    return max(1.0, kv / tp)


def attention_bytes_per_device(spec: ModelSpec, quant: str, tp: int, padded: bool = False) -> float:
    """Q, K, V and O projection bytes one rank holds (replicated K/V heads and padded Q heads included)."""
    params = spec.param_parts()["attention"]
    width = spec.part_bytes(quant)["attention"] / params if params else 0.0
    per_head = spec.layers * spec.hidden_size * spec.head_dim * width
    return per_head * 2 * (heads_per_device(spec, tp, padded) + kv_heads_per_device(spec, tp, padded))


def weight_bytes_per_device(spec: ModelSpec, quant: str, tp: int, padded: bool = False) -> float:
    """Weight bytes per rank: every layer type sharded by TP at its format's width, attention as held."""
    parts = spec.part_bytes(quant)
    return (sum(parts.values()) - parts["attention"]) / tp + attention_bytes_per_device(
        spec, quant, tp, padded
    )


def activation_bytes_per_device(spec: ModelSpec, tp: int, batched_tokens: int, seqs: int) -> float:
    inter = spec.intermediate_size
    if spec.moe is not None:
        inter = spec.moe.expert_intermediate_size * spec.moe.experts_per_token
    per_token = ACT_HIDDEN_MULTIPLE * spec.hidden_size + ACT_INTERMEDIATE_MULTIPLE * inter / tp
    return batched_tokens * per_token * ACT_BYTES + min(seqs, batched_tokens) * spec.vocab_size * LOGIT_BYTES


def memory_fit(cfg: HardwareConfig, catalog: Catalog | None = None) -> MemoryFit:
    """The memory arithmetic of one replica of `cfg`."""
    parts = cfg.parts(catalog)
    spec, acc, tp = parts.model, parts.accelerator, cfg.tensor_parallel
    d = cfg.defaults(catalog)
    dev_mem = acc.device_memory_bytes
    max_model_len = cfg.max_model_len or min(spec.max_position_embeddings, DEFAULT_MIN_CONTEXT)
    seqs = cfg.max_num_seqs or d.max_num_seqs
    batched = cfg.max_num_batched_tokens or d.max_num_batched_tokens or max_model_len
    fraction = cfg.gpu_memory_utilization or d.memory_fraction

    padded = pads_heads(acc)
    weights = weight_bytes_per_device(spec, cfg.quantization, tp, padded)
    runtime = d.runtime_overhead_gb * GB
    acts = activation_bytes_per_device(spec, tp, batched, seqs)
    if d.memory_basis == "total":
        budget = dev_mem * fraction
        usable = budget - runtime - acts
        kv_bytes = usable - weights
    else:
        usable = (dev_mem - runtime - acts) * fraction
        kv_bytes = dev_mem - runtime - acts - weights
        kv_bytes *= fraction
    kv_elem = kv_dtype_bytes(cfg.engine, cfg.quantization, cfg.kv_cache_dtype)
    kv_tok_dev = 2 * spec.layers * kv_heads_per_device(spec, tp, padded) * spec.head_dim * kv_elem
    block = d.block_size
    kv_tokens = max(0, int(kv_bytes // kv_tok_dev) // block * block)
    if cfg.kv_cache_tokens is not None:
        # the server's own figure: what it really allocated (an explicit KV space, another memory share)
        kv_tokens = cfg.kv_cache_tokens
        kv_bytes = kv_tokens * kv_tok_dev
    if d.admission == "reserve" and cfg.engine == "neuron":
        seqs = max(0, min(seqs, kv_tokens // max_model_len))
    weights_fit = kv_bytes > 0
    context_fits = kv_tokens >= max_model_len
    fits = weights_fit and context_fits and seqs >= 1
    replica_w = weights * tp / GB
    replica_usable = usable * tp / GB
    if not weights_fit:
        reason = (
            f"needs {replica_w:.1f} GB of {cfg.quantization} weights per replica ({weights / GB:.1f} GB on each of"
            f" {tp} devices), {tp} x {dev_mem / GB:.1f} GB devices give {replica_usable:.1f} GB usable"
            f" ({fraction:.2f} x memory less {runtime / GB:.1f} GB runtime and {acts / GB:.2f} GB activations"
            " per device)"
        )
        if tp < parts.devices:
            reason += f"; try a larger tensor parallel (the instance has {parts.devices} devices)"
    elif not context_fits or seqs < 1:
        reason = (
            f"weights fit ({weights / GB:.1f} GB per device) but only {kv_bytes / GB:.2f} GB per device is left"
            f" for the KV cache: {kv_tokens:,} tokens at {kv_tok_dev * tp / 1e3:.1f} kB/token, below one"
            f" {max_model_len:,}-token context"
        )
    else:
        reason = (
            f"{weights / GB:.1f} GB weights + {runtime / GB:.1f} GB runtime + {acts / GB:.2f} GB activations per"
            f" device leave {kv_bytes / GB:.1f} GB per device for the KV cache: {kv_tokens:,} tokens per replica"
            f" at {spec.kv_bytes_per_token(kv_elem) / 1e3:.1f} kB/token"
        )
    return MemoryFit(
        fits=fits,
        reason=reason,
        tensor_parallel=tp,
        device_memory_gb=dev_mem / GB,
        usable_gb_per_device=usable / GB,
        weights_gb_per_device=weights / GB,
        runtime_gb_per_device=runtime / GB,
        activation_gb_per_device=acts / GB,
        kv_gb_per_device=max(0.0, kv_bytes) / GB,
        kv_bytes_per_token=spec.kv_bytes_per_token(kv_elem),
        kv_bytes_per_token_per_device=kv_tok_dev,
        kv_cache_tokens=kv_tokens,
        max_num_seqs=max(seqs, 0),
        max_num_batched_tokens=batched,
        max_model_len=max_model_len,
        memory_fraction=fraction,
    )


def ceil_div(a: int, b: int) -> int:
    return -(-a // b) if b else a


__all__ = ["MemoryFit", "ceil_div", "math", "memory_fit"]
