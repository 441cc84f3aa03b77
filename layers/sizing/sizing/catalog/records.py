"""The catalog's records of what runs a model: accelerators (with their interconnect), instance types and
their prices, and the models themselves (with their weight formats); every record carries its source and as-of
date."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import date
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from sizing.base.errors import NotFound
from sizing.base.strict import StrictFrozen
from sizing.base.vocabulary import Quantization

GB = 1e9
MIB = 2**20

#: Bytes per weight by format. int4 carries group scales (AWQ/GPTQ g128: 16-bit scale + zero per 128 weights =
#: 0.03 bytes/weight), rounded to 0.53. MXFP4 (OCP Microscaling): 4-bit E2M1 elements in blocks of 32 sharing one
#: 8-bit E8M0 scale = 4 + 8/32 = 4.25 bits [OCP Microscaling Formats (MX) v1.0, opencompute.org]. NVFP4: 4-bit E2M1
#: in blocks of 16 with an FP8 E4M3 scale = 4 + 8/16 = 4.5 bits (the per-tensor FP32 scale is negligible)
#: [NVIDIA, "Introducing NVFP4", developer.nvidia.com/blog, 2025-06].
BYTES_PER_PARAM: dict[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.53,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
    "fp32": 4.0,
}
#: Which weights a format quantizes. mxfp4 is gpt-oss's native checkpoint: MoE experts in MXFP4, attention, router
#: and embeddings in bf16 [huggingface.co/openai/gpt-oss-120b config.json `quantization_config`:
#: modules_to_not_convert = attention, router, embed_tokens, lm_head]. nvfp4 (NVIDIA ModelOpt checkpoints)
#: quantizes every linear layer (experts, dense MLP, attention) and keeps embeddings and the LM head in bf16.
#: Other formats apply to every weight (the embeddings of int4/int8/fp8 checkpoints are counted at the same
#: width: a small over- or under-count the calibration absorbs, as before).
QUANTIZED_PARTS: dict[str, frozenset[str]] = {
    "mxfp4": frozenset({"experts"}),
    "nvfp4": frozenset({"experts", "mlp", "attention"}),
}
#: Bytes of the weights a format leaves unquantized (bf16).
UNQUANTIZED_BYTES = 2.0
#: Weight parts of a model, by layer type.
WEIGHT_PARTS = ("experts", "mlp", "attention", "embeddings", "other")


class CatalogRecord(StrictFrozen):
    """A catalog entry: strict, and frozen (the catalog is read once and shared); built on first use."""

    # the records' schemas are built on first validation, not at import: a process that loads the compact copy
    # validates no record, so never pays for building them
    model_config = ConfigDict(defer_build=True)


class Sourced(CatalogRecord):
    source: str = Field(min_length=3)
    as_of: date
    notes: str | None = None


class Interconnect(CatalogRecord):
    #: `none`: one device per replica (a CPU instance serves a replica on all its cores, tensor parallel 1)
    kind: Literal["pcie", "nvlink", "neuronlink", "none"]
    #: Per device, per direction, GB/s: the ring all-reduce bus bandwidth bound.
    bw_gbs_per_direction: float = Field(gt=0)
    #: Small-message all-reduce latency (decode messages are tens to hundreds of KB): NCCL figures in
    #: docs/serving-facts.md s2 (NVLink 3.5-6 us, 8x PCIe Ada ~40 us); NeuronLink assumed 10-15 us.
    allreduce_latency_us: float = Field(gt=0)
    description: str


class Accelerator(Sourced):
    """One accelerator chip. For Neuron chips a *device* (the unit of tensor parallelism) is a NeuronCore; for a CPU
    instance the device is the instance's share of the processor (`data/cpus.yaml`)."""

    id: str
    name: str
    vendor: Literal["nvidia", "aws", "intel", "amd"]
    kind: Literal["gpu", "neuron", "cpu"]
    cores_per_chip: int = Field(ge=1)
    memory_gb: float = Field(gt=0)
    memory_bw_gbs: float = Field(gt=0)
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    #: dense fp32 peak: a CPU's vector FMA units (GPU and Neuron servers are not offered fp32: None)
    fp32_tflops: float | None = None
    #: whether the chip does bf16 arithmetic (a matrix unit or AVX512_BF16); a CPU without it widens bf16 to fp32 in
    #: fallback kernels, and serves a bf16 checkpoint in fp32 instead (`served_format`)
    bf16_arithmetic: bool = True
    interconnect: Interconnect
    usable_memory_mib: int | None = None
    confidence: str = ""
    assumed: list[str] = Field(default_factory=list)
    #: dense FP4 peak (Blackwell's NVFP4/MXFP4 tensor cores); None: FP4 weights run 16-bit math (weight-only)
    fp4_tflops: float | None = None
    #: weight formats beyond bf16/fp8/int8/int4 the accelerator's engines serve: `mxfp4` (vLLM's Marlin/Triton
    #: MXFP4 kernels on Ampere and later), `nvfp4` (Blackwell FP4 tensor cores only)
    weight_formats: list[str] = Field(default_factory=list)
    #: Neuron logical NeuronCore configuration the `cores_per_chip` figure is stated at: LNC=2 on trn2 (the SDK's
    #: default: one logical core = two physical NeuronCore-v3, 4 per chip); 1 elsewhere
    lnc: int = Field(default=1, ge=1)
    #: LNC settings the chip supports (trn2: 1 and 2)
    lnc_options: list[int] = Field(default_factory=lambda: [1])
    #: tensor-parallel degrees (NxD Inference `tp_degree`) the Neuron SDK compiles on this chip; None: any degree
    #: that divides the heads (GPU engines)
    tp_degrees: list[int] | None = None
    #: the server's request handling (API server: HTTP, tokenisation; engine core: scheduling) runs on the cores
    #: that compute the model: a CPU instance of one physical core (`catalog.families`); a GPU or Neuron server's
    #: host CPUs are its own
    frontend_shares_cores: bool = False

    @property
    def device_memory_bytes(self) -> float:
        """Memory one device (GPU or NeuronCore) can use: the driver-reported figure when known."""
        total = self.usable_memory_mib * MIB if self.usable_memory_mib else self.memory_gb * GB
        return total / self.cores_per_chip

    @property
    def device_bw_bytes(self) -> float:
        return self.memory_bw_gbs * GB / self.cores_per_chip

    def device_flops(self, quantization: str) -> float:
        """Dense peak FLOP/s of one device for the math a quantization runs (weight-only int4, and FP4 formats
        without FP4 tensor cores, run 16-bit math)."""
        if quantization == "fp8" and self.fp8_tflops:
            tflops = self.fp8_tflops
        elif quantization == "int8" and self.int8_tops:
            tflops = self.int8_tops
        elif quantization in ("mxfp4", "nvfp4") and self.fp4_tflops:
            tflops = self.fp4_tflops
        elif quantization == "fp32" and self.fp32_tflops:
            tflops = self.fp32_tflops
        else:
            tflops = self.bf16_tflops
        return tflops * 1e12 / self.cores_per_chip

    def supports(self, quantization: str) -> bool:
        if quantization == "fp8":
            return self.fp8_tflops is not None
        if quantization in ("mxfp4", "nvfp4"):
            return quantization in self.weight_formats
        if quantization == "fp32":
            return self.fp32_tflops is not None
        return True

    def served_format(self, quantization: str) -> str:
        """The format a checkpoint of `quantization` is served in here: bf16 in fp32 on a CPU without bf16
        arithmetic (its bf16 kernels widen every product in plain code: 4-6x slower prefill measured, the same
        decode), else as it is."""
        if quantization == "bf16" and self.kind == "cpu" and not self.bf16_arithmetic and self.fp32_tflops:
            return "fp32"
        return quantization

    def at_lnc(self, lnc: int | None) -> Accelerator:
        """The chip as the Neuron runtime exposes it at logical-core configuration `lnc`: `cores_per_chip` logical
        cores of `lnc` physical cores each (memory, bandwidth and FLOP/s per device scale with it). None or the
        stated LNC: the chip as catalogued."""
        if lnc is None or lnc == self.lnc:
            return self
        physical = self.cores_per_chip * self.lnc
        if lnc not in self.lnc_options or physical % lnc:
            raise ValueError(f"{self.name} supports LNC {', '.join(map(str, self.lnc_options))}, not {lnc}")
        return self.model_copy(update={"cores_per_chip": physical // lnc, "lnc": lnc})


class Price(CatalogRecord):
    usd_per_hour: float | None = Field(default=None, gt=0)
    source: str
    as_of: date
    assumed: bool = False
    notes: str | None = None


class SpotDiscount(CatalogRecord):
    fraction: float = Field(ge=0, lt=1)
    source: str
    assumed: bool


class InstanceType(Sourced):
    instance_type: str
    family: str
    accelerator: str
    accelerator_count: int = Field(ge=1)
    vcpu: int = Field(ge=1)
    memory_gib: float = Field(gt=0)
    network_gbps: float = Field(gt=0)
    prices: dict[str, Price]
    spot_discount: SpotDiscount
    #: Regions of the price snapshot (data/regions.yaml) that sell this type; None: the snapshot does not cover it
    regions_available: list[str] | None = None
    #: Regions of the price snapshot, when the type's family is in it
    regions_known: list[str] | None = None
    #: spot discount per Region from the snapshot (median spot over the Region's availability zones)
    spot_by_region: dict[str, SpotDiscount] = Field(default_factory=dict)

    def available_in(self, region: str) -> bool | None:
        """True/False where the price snapshot covers the Region and the type's family; None: not known."""
        if self.regions_known is None or region not in self.regions_known:
            return None
        return region in (self.regions_available or [])

    def spot_in(self, region: str) -> SpotDiscount:
        return self.spot_by_region.get(region, self.spot_discount)

    def price(self, region: str) -> Price:
        """On-demand price in a region; falls back to us-east-1 marked `assumed` when the region is missing."""
        if region in self.prices and self.prices[region].usd_per_hour:
            return self.prices[region]
        base = self.prices.get("us-east-1")
        if base is None or base.usd_per_hour is None:
            raise NotFound(f"no on-demand price for {self.instance_type}", field_name="instance_type")
        if region == "us-east-1":
            return base
        return base.model_copy(
            update={
                "assumed": True,
                "notes": f"no {region} price in the catalog: us-east-1 price used (run `sizing catalog refresh-prices`)",
            }
        )


class MoE(CatalogRecord):
    num_experts: int = Field(ge=2)
    experts_per_token: int = Field(ge=1)
    expert_intermediate_size: int = Field(ge=1)

    @model_validator(mode="after")
    def _k_le_n(self) -> MoE:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token exceeds num_experts")
        return self


class ModelSpec(Sourced):
    """Architecture facts of one open model (from its Hugging Face config.json)."""

    id: str
    aliases: list[str] = Field(default_factory=list)
    params_b: float = Field(gt=0)
    active_params_b: float = Field(gt=0)
    layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate_size: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    max_position_embeddings: int = Field(ge=1)
    tie_word_embeddings: bool = False
    moe: MoE | None = None
    #: the format the model's own checkpoint ships in when it is not 16-bit (gpt-oss: MXFP4 experts): the planner
    #: considers it beside the workload's quantizations, since serving it needs no conversion
    native_quantization: Quantization | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.active_params_b > self.params_b * 1.0001:
            raise ValueError("active_params_b exceeds params_b")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        return self

    @functools.cached_property
    def _parts_memo(self) -> dict[str | None, dict[str, float]]:
        """`param_parts` (key None) and `part_bytes` by format, worked out once per spec: the planner reads them
        for every option it bounds. The fields are frozen, so they cannot go stale, and `model_copy` starts a
        fresh memo. A cached property lives in the instance's `__dict__`, which equality and `model_dump` skip
        (they read the fields)."""
        return {}

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """K and V for every layer: 2 x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.num_key_value_heads * self.head_dim * kv_dtype_bytes

    def param_parts(self) -> dict[str, float]:
        """Parameters by layer type (`WEIGHT_PARTS`), from the architecture: MoE experts (gate, up and down of every
        expert), the dense MLP, attention projections (Q, K, V, O), input embeddings plus the LM head (once when
        tied), and the rest of the stated total (norms, routers, biases, shared experts). Each part is capped so
        the parts never exceed the stated total."""
        known = self._parts_memo.get(None)
        if known is None:
            known = self._parts_memo[None] = self._param_parts()
        return dict(known)

    def _param_parts(self) -> dict[str, float]:
        total = self.params_b * 1e9
        emb = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_key_value_heads * self.head_dim
        attn = self.layers * self.hidden_size * (2 * q_width + 2 * kv_width)
        if self.moe is not None:
            m = self.moe
            experts = float(self.layers * m.num_experts * 3 * self.hidden_size * m.expert_intermediate_size)
            mlp = 0.0
        else:
            experts = 0.0
            mlp = float(self.layers * 3 * self.hidden_size * self.intermediate_size)
        parts = {
            "embeddings": float(emb),
            "attention": float(attn),
            "experts": float(experts),
            "mlp": float(mlp),
        }
        left = total
        for name in ("embeddings", "attention", "experts", "mlp"):
            parts[name] = min(parts[name], max(0.0, left))
            left -= parts[name]
        parts["other"] = max(0.0, left)
        return parts

    def part_bytes(self, quantization: str) -> dict[str, float]:
        """Weight bytes by layer type at `quantization` (`QUANTIZED_PARTS`: which parts a format quantizes)."""
        known = self._parts_memo.get(quantization)
        if known is None:
            width = BYTES_PER_PARAM[quantization]
            only = QUANTIZED_PARTS.get(quantization)
            known = self._parts_memo[quantization] = {
                k: v * (width if only is None or k in only else UNQUANTIZED_BYTES)
                for k, v in self.param_parts().items()
            }
        return dict(known)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("_parts_memo", None)
        return copied

    def weight_bytes(self, quantization: str) -> float:
        """All weight bytes at `quantization`, each layer type at the width its format gives it."""
        return sum(self.part_bytes(quantization).values())
