"""Per-iteration time of an engine step: a calibrated roofline.

One step runs `prefill_tokens` of prefill chunks plus `decode_seqs` decoding sequences whose KV reads total
`context_tokens`. Per device:
  compute = (2 x active params x tokens + attention FLOPs) / TP / (peak FLOP/s x compute efficiency)
  memory  = (weights touched / TP + KV bytes read and written / TP) / (bandwidth x bandwidth efficiency)
  step    = ridge(compute, memory) of the linear layers + max(compute, memory) of attention (two phases, one after
            the other) + TP all-reduces over the interconnect + per-step and per-sequence overhead,
where ridge(c, m) = (c^p + m^p)^(1/p) is the roofline's max softened where the two are comparable: a GEMM near
the ridge does not overlap its weight reads with its math perfectly (`Profile.ridge_slowdown`,
`steptime.ridge`).
MoE: FLOPs use active parameters, bytes the experts a batch touches. Efficiencies and overheads come from a
calibration `Profile` per (accelerator family, engine); no efficiency exceeds the datasheet (`fit.BOUNDS`): a MoE
model's own efficiency (`Profile.moe_eff`, at most 1) slows its expert GEMMs and expert reads only, never its dense
layers or KV reads. The input embedding table of a model with a separate LM head is looked up, not read whole or
multiplied: it costs a step neither bytes nor FLOPs (`unread_embedding_params`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sizing.perf.calibration import profile_for
from sizing.perf.engines import EngineDefaults, neuron_buckets, pads_heads
from sizing.perf.memory import (
    GB,
    KV_DTYPE_BYTES,
    heads_per_device,
    kv_heads_per_device,
    memory_fit,
    weight_bytes_per_device,
)
from sizing.perf.native import KERNEL
from sizing.perf.profile import ROOFLINE, Profile
from sizing.perf.steptime import StepTime, StepTimeTerms

if TYPE_CHECKING:
    from sizing.catalog import Accelerator, Catalog, ModelSpec
    from sizing.perf.config import HardwareConfig
    from sizing.perf.memory import MemoryFit

#: All-reduces per transformer layer under Megatron-style TP: one after attention, one after the MLP.
ALLREDUCES_PER_LAYER = 2
#: Activations cross the interconnect in bf16.
ACT_BYTES = 2.0
#: Ring all-reduce moves 2 x (TP-1)/TP of the message per device.
RING_FACTOR = 2.0
#: Dense MLP of a gated (SwiGLU) block has 3 matrices: gate, up, down.
MLP_MATRICES = 3
#: Compiled sequence length of a Neuron deployment that does not state one (optimum-neuron benchmarks use 4096).
DEFAULT_STATIC_CONTEXT = 4096


#: Without NVLink or P2P (g5/g6/g6e), NCCL all-reduce stages through host memory and reaches about a quarter of
#: the PCIe link rate (assumed; NVIDIA/nccl#1298 on g5.48xlarge, and the 4x A10G reference rows X022/X024).
PCIE_ALLREDUCE_EFFICIENCY = 0.25


#: The layer count a GPU profile's per-step overhead is stated for (`step_overhead_layers`): Llama-3.1-8B's. A
#: normalisation: the fit scales the overhead to the rows whatever it is, so that a profile's `step_overhead_s`
#: reads as a typical 8B model's step.
REFERENCE_LAYERS = 32


def unread_embedding_params(spec: ModelSpec) -> float:
    """Parameters a step neither reads whole nor multiplies: the input embedding table of a model whose LM head is
    a separate matrix (a step gathers one row per token from it). A tied table is read whole anyway, as the LM
    head. Counting it as read made an 8B Llama-3 step read 6.6% more bytes than it does (1.05 of 16.1 GB), one of
    the things a bandwidth efficiency above 1 compensated for."""
    return 0.0 if spec.tie_word_embeddings else float(spec.vocab_size * spec.hidden_size)


def step_overhead_layers(spec: ModelSpec, acc: Accelerator) -> float:
    """Reference steps' worth of fixed overhead one engine step of `spec` costs on `acc`. On a GPU a step launches
    each layer's kernels in turn (CUDA graphs remove the host's launches, not the gaps between kernels), so the
    fixed cost grows with the layers: a 24-layer 0.5B model's step costs less than an 80-layer 70B model's. A Neuron
    step runs one compiled graph: 1. One fitted constant either way; a second one (a fixed part beside the
    per-layer part) cross-validated worse (docs/estimator.md)."""
    return 1.0 if acc.kind == "neuron" else spec.layers / REFERENCE_LAYERS


class StepModel:
    """Step-time model of one replica plus its scheduler limits. `iteration_time` costs a few microseconds."""

    def __init__(self, cfg: HardwareConfig, fit: MemoryFit, profile: Profile, catalog: Catalog | None = None):
        parts = cfg.parts(catalog)
        spec, acc, tp = parts.model, parts.accelerator, cfg.tensor_parallel
        self.cfg = cfg
        self.fit = fit
        self.profile = profile
        d = cfg.defaults(catalog)
        self.engine_defaults = d
        self._set_scheduler(cfg, fit, profile, d, spec)
        #: where the server's API process runs on the cores that compute the model (a CPU instance of one physical
        #: core), its CPU time is the model's: per request (HTTP, tokenisation), taken from the steps running while
        #: it is handled (`perf.arrivals`), and per output token (detokenisation, streaming), in every step
        shared = acc.frontend_shares_cores
        self.frontend_request_cpu_s: float = d.frontend_request_cpu_s if shared else 0.0
        self.tp = tp
        #: the model is a mixture of experts: its error, and so its stated interval, is its class's (dense or MoE)
        self.mixture_of_experts: bool = spec.moe is not None
        # int8/int4 are weight-only here (W8A16/W4A16: AWQ, GPTQ, Neuron int8 storage): the math runs in 16 bit;
        # FP4 formats run FP4 math where the chip has FP4 tensor cores (B200), else weight-only 16-bit math; fp32 (a
        # CPU's) runs on the vector FMA units
        math_dtype = (
            cfg.quantization if cfg.quantization in ("bf16", "fp8", "mxfp4", "nvfp4", "fp32") else "bf16"
        )
        #: a MoE model's expert work runs at `moe_eff` of its dense layers' efficiency (at most 1: routing, expert
        #: GEMMs on few tokens each, padding); its dense layers and KV reads run as a dense model's
        moe = min(profile.moe_eff, 1.0) if spec.moe is not None else 1.0
        flops = acc.device_flops(math_dtype) * profile.compute_eff
        bw = acc.device_bw_bytes * profile.bandwidth_eff
        self._set_compute(spec, acc, d, tp, flops, moe)
        self._set_memory(cfg, fit, spec, acc, d, tp, bw, moe)
        self._set_allreduce(spec, acc, tp)
        self._set_neuron_shapes(cfg, d)
        self._o_step = profile.step_overhead_s * step_overhead_layers(spec, acc)
        self._o_seq = profile.seq_overhead_s + (d.frontend_token_cpu_s if shared else 0.0)
        self.kv_write_tok = self._kv_tok

    def _set_scheduler(
        self, cfg: HardwareConfig, fit: MemoryFit, profile: Profile, d: EngineDefaults, spec: ModelSpec
    ) -> None:
        """The scheduler's limits and policies: the memory fit's batch and KV capacity, the engine's defaults."""
        self.max_num_seqs: int = fit.max_num_seqs
        self.max_num_batched_tokens: int = fit.max_num_batched_tokens
        self.kv_capacity_tokens: int = fit.kv_cache_tokens
        self.block_size: int = d.block_size
        self.chunked_prefill: bool = (
            d.chunked_prefill if cfg.enable_chunked_prefill is None else cfg.enable_chunked_prefill
        )
        #: a request's shared prefix (the workload's `tokens.shared_prefix`) is read from the KV cache, not prefilled
        self.prefix_caching: bool = cfg.enable_prefix_caching
        self.mixed_prefill_decode: bool = d.mixed_prefill_decode
        self.admission: str = d.admission
        self.prefill_defer_ratio: float = d.prefill_defer_ratio
        self.prefill_defer_steps: int = d.prefill_defer_steps
        self.request_overhead_s: float = profile.request_overhead_s
        #: longest request the replica serves (requests beyond are cut): the configured max_model_len, else the
        #: model's context
        self.max_model_len: int = cfg.max_model_len or spec.max_position_embeddings

    def _set_compute(
        self, spec: ModelSpec, acc: Accelerator, d: EngineDefaults, tp: int, flops: float, moe: float = 1.0
    ) -> None:
        """Compute seconds per token of linear layers (the expert GEMMs of a MoE model at `moe` of the dense
        layers' efficiency), per (query, key) pair of attention."""
        active = (spec.params_b if d.moe_dense else spec.active_params_b) * 1e9 - unread_embedding_params(
            spec
        )
        if spec.moe is not None and moe < 1.0:
            experts = spec.param_parts()["experts"]
            if not d.moe_dense:
                experts *= spec.moe.experts_per_token / spec.moe.num_experts
            active += experts * (1.0 / moe - 1.0)
        active_dev = active / tp
        if pads_heads(acc):
            # Neuron pads Q heads to a multiple of TP (and K/V to multi-head where TP is not a multiple of the KV
            # heads): each rank computes the projections of the heads it holds, padding included
            attn = spec.param_parts()["attention"]
            held: float = spec.layers * spec.hidden_size * spec.head_dim * 2
            held *= heads_per_device(spec, tp, True) + kv_heads_per_device(spec, tp, True)
            active_dev += held - attn / tp
        self._c_tok = 2 * active_dev / flops
        heads_dev = -(-spec.num_attention_heads // tp)
        attn_flops_per_pair = (
            4 * spec.layers * heads_dev * spec.head_dim
        )  # QK^T and AV, per (query, key) pair
        self._c_pair = attn_flops_per_pair / flops

    def _set_memory(
        self,
        cfg: HardwareConfig,
        fit: MemoryFit,
        spec: ModelSpec,
        acc: Accelerator,
        d: EngineDefaults,
        tp: int,
        bw: float,
        moe: float = 1.0,
    ) -> None:
        """Memory seconds: weights once per step (a MoE batch touches only its routed experts, read at `moe` of the
        dense layers' efficiency; an untied input embedding table is not read), KV per token read or written."""
        parts = spec.part_bytes(cfg.quantization)
        w_dev = weight_bytes_per_device(spec, cfg.quantization, tp, pads_heads(acc))
        if not spec.tie_word_embeddings:
            # the input half of the embeddings part (`unread_embedding_params`), at the embeddings' own width
            w_dev -= parts["embeddings"] / 2 / tp
        self._kv_tok = fit.kv_bytes_per_token_per_device / bw
        self._moe = spec.moe is not None and not d.moe_dense
        if spec.moe is not None:
            m = spec.moe
            # expert bytes at the experts' own format (MXFP4 on gpt-oss; the rest stays bf16)
            expert_dev = parts["experts"] / tp
            self._w_dense = (w_dev - expert_dev) / bw
            self._w_expert = expert_dev / (bw * moe)
            # an engine that evaluates every expert densely reads every expert every step
            self._route_miss = 1.0 - m.experts_per_token / m.num_experts if self._moe else 0.0
        else:
            self._w_dense = w_dev / bw
            self._w_expert = 0.0
            self._route_miss = 0.0

    def _set_allreduce(self, spec: ModelSpec, acc: Accelerator, tp: int) -> None:
        """TP all-reduce: latency per call + bytes per token."""
        if tp > 1:
            ic = acc.interconnect
            n_ar = ALLREDUCES_PER_LAYER * spec.layers
            self._ar_fixed = n_ar * ic.allreduce_latency_us * 1e-6
            bus = ic.bw_gbs_per_direction * GB * (PCIE_ALLREDUCE_EFFICIENCY if ic.kind == "pcie" else 1.0)
            self._ar_tok = n_ar * spec.hidden_size * ACT_BYTES * RING_FACTOR * (tp - 1) / tp / bus
        else:
            self._ar_fixed = 0.0
            self._ar_tok = 0.0

    def _set_neuron_shapes(self, cfg: HardwareConfig, d: EngineDefaults) -> None:
        """The compiled shapes a Neuron engine runs (none elsewhere: the engine defaults say which apply)."""
        #: Neuron decode graphs size the KV block table to max_model_len: each step reads the whole compiled
        #: context of every sequence [docs/serving-facts.md s3, vllm-neuron decode-context-length-bucketing]
        self._static_ctx = (cfg.max_model_len or DEFAULT_STATIC_CONTEXT) if d.static_kv_reads else 0
        #: Neuron runs a decode step at the smallest compiled batch bucket that holds its sequences (idle rows
        #: padded; `steptime.decode_batch_buckets`)
        self.static_decode_batch: bool = d.static_decode_batch
        #: Neuron pads each prompt to the next compiled context-encoding bucket
        self.prefill_buckets: tuple[int, ...] = (
            (cfg.context_buckets or neuron_buckets(self.max_model_len)) if d.prefill_buckets else ()
        )

    @classmethod
    def for_config(
        cls, cfg: HardwareConfig, profile: Profile | None = None, catalog: Catalog | None = None
    ) -> StepModel:
        """The step model of `cfg` with `profile` (default: the shipped calibration for its family and engine)."""
        fit = memory_fit(cfg, catalog)
        if profile is None:
            parts = cfg.parts(catalog)
            profile = profile_for(parts.accelerator.id, cfg.engine)
        return cls(cfg, fit, profile, catalog)

    def schedule_as(self, settings: dict[str, Any]) -> None:
        """Replace scheduler settings (`chunked_prefill`, `max_num_batched_tokens`, ...) with an engine build's own
        (`sizing.perf.engines.build_scheduler`); a name the step model does not have is an error, not a new field."""
        for name, value in settings.items():
            if not hasattr(self, name):
                raise AttributeError(f"StepModel has no scheduler setting {name!r}")
            setattr(self, name, value)

    def step_time_terms(self) -> StepTimeTerms:
        """The coefficients of this model's step time as they are now, in `StepTime`'s order: the simulator
        builds its own `StepTime` from them once per run (`sizing.perf.steptime`)."""
        return (
            self._c_tok,
            self._c_pair,
            self._kv_tok,
            self._w_dense,
            self._w_expert,
            self._route_miss,
            self._moe,
            self._ar_fixed,
            self._ar_tok,
            self._o_step,
            self._o_seq,
            self._static_ctx,
            self.static_decode_batch,
            self.max_num_seqs,
            self.prefill_buckets,
            self.profile.ridge_exponent,
        )

    def timing(self) -> StepTime:
        """The step-time arithmetic over this model's coefficients as they are now (a snapshot), compiled where
        the simulator's kernel is (`sizing.perf.native`)."""
        return KERNEL.step_time(*self.step_time_terms())

    def weights_time(self, tokens: int) -> float:
        """Seconds to read the weights a step of `tokens` touches."""
        return self.timing().weights_time(tokens)

    def iteration_time(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        context_tokens: float,
        prefill_attention_pairs: float | None = None,
        prefill_seqs: int = 1,
    ) -> float:
        """Seconds for one engine step (`StepTime.iteration_time`). `prefill_attention_pairs` (query x key pairs
        of the prefill chunks) defaults to one chunk starting from an empty context: prefill_tokens^2 / 2."""
        return self.timing().iteration_time(
            prefill_tokens, decode_seqs, context_tokens, prefill_attention_pairs, prefill_seqs
        )

    def describe(self) -> dict[str, Any]:
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "block_size": self.block_size,
            "chunked_prefill": self.chunked_prefill,
            "profile": {
                "family": self.profile.family,
                "engine": self.profile.engine,
                **self.profile.params(),
            },
        }


__all__ = ["KV_DTYPE_BYTES", "ROOFLINE", "Profile", "StepModel"]
