"""Typed catalog entries and the loader."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, cast

from pydantic import ConfigDict, Field, ValidationError, model_validator

from sizing.base.errors import InvalidInput, NotFound, problems_from_pydantic
from sizing.base.strict import Strict
from sizing.base.vocabulary import Quantization
from sizing.catalog.regions import DATA_RESIDENCY, nearest

DATA_DIR = Path(__file__).parent / "data"
#: A value derived from a catalog (`Catalog.derive`).
T = TypeVar("T")
#: Extra catalog files (same layout as data/) merged over the shipped ones; models added with
#: `sizing catalog add-model --catalog-dir` land there.
OVERLAY_ENV = "SIZING_CATALOG_DIR"

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


class CatalogRecord(Strict):
    """A catalog entry: strict, and frozen (the catalog is read once and shared); built on first use."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Sourced(CatalogRecord):
    source: str = Field(min_length=3)
    as_of: date
    notes: str | None = None


class Interconnect(CatalogRecord):
    kind: Literal["pcie", "nvlink", "neuronlink"]
    #: Per device, per direction, GB/s: the ring all-reduce bus bandwidth bound.
    bw_gbs_per_direction: float = Field(gt=0)
    #: Small-message all-reduce latency (decode messages are tens to hundreds of KB): NCCL figures in
    #: docs/serving-facts.md s2 (NVLink 3.5-6 us, 8x PCIe Ada ~40 us); NeuronLink assumed 10-15 us.
    allreduce_latency_us: float = Field(gt=0)
    description: str


class Accelerator(Sourced):
    """One accelerator chip. For Neuron chips a *device* (the unit of tensor parallelism) is a NeuronCore."""

    id: str
    name: str
    vendor: Literal["nvidia", "aws"]
    kind: Literal["gpu", "neuron"]
    cores_per_chip: int = Field(ge=1)
    memory_gb: float = Field(gt=0)
    memory_bw_gbs: float = Field(gt=0)
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = None
    int8_tops: float | None = None
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
        else:
            tflops = self.bf16_tflops
        return tflops * 1e12 / self.cores_per_chip

    def supports(self, quantization: str) -> bool:
        if quantization == "fp8":
            return self.fp8_tflops is not None
        if quantization in ("mxfp4", "nvfp4"):
            return quantization in self.weight_formats
        return True

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


class BedrockQuota(CatalogRecord):
    """Default on-demand quotas of one offer (per account, per Region). `adjustable`: AWS raises it on request
    (Service Quotas); a non-adjustable limit is a hard limit and rejects what exceeds it."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    adjustable: bool = True
    #: the Service Quotas name to file an increase under
    quota_name: str | None = None
    source: str
    as_of: date


class TokenPrices(CatalogRecord):
    input_usd_per_1m_tokens: float = Field(ge=0)
    output_usd_per_1m_tokens: float = Field(ge=0)
    source: str
    as_of: date
    assumed: bool = False
    notes: str | None = None


class BedrockProfile(CatalogRecord):
    """A cross-Region inference profile: requests from `source_regions` may be served in any Region of its scope,
    at the source Region's on-demand price (aws.amazon.com/bedrock/pricing: "the price is calculated basis the
    region you made the request in")."""

    id: str
    scope: Literal["geography", "global"]
    source_regions: list[str]
    source: str
    as_of: date


class BedrockLatency(CatalogRecord):
    """Latency profile of a Bedrock model; `assumed` until this product has measured it."""

    ttft_ms_p50: float = Field(gt=0)
    ttft_ms_p95: float = Field(gt=0)
    output_tokens_per_s: float = Field(gt=0)
    source: str
    assumed: bool = True


class BedrockOffer(Sourced):
    """One Bedrock model as sold. `input/output_usd_per_1m_tokens` are the reference (US East) on-demand prices;
    `region_prices` overrides them where a Region's price is known. `in_region`: Regions that serve the model id
    directly; `profiles`: cross-Region inference profiles. An offer listing neither is taken as in-Region in
    us-east-1 only (older entries)."""

    name: str
    bedrock_model_id: str
    model: str | None = None
    input_usd_per_1m_tokens: float = Field(ge=0)
    output_usd_per_1m_tokens: float = Field(ge=0)
    quota: BedrockQuota
    latency: BedrockLatency | None = None
    in_region: list[str] = Field(default_factory=list)
    profiles: list[BedrockProfile] = Field(default_factory=list)
    regions_source: str | None = None
    region_prices: dict[str, TokenPrices] = Field(default_factory=dict)
    #: batch inference prices (input and output per 1M tokens); None where Bedrock offers no batch for the model
    batch: TokenPrices | None = None
    #: the model's context window on Bedrock (input + output): a hard limit
    context_tokens: int | None = Field(default=None, gt=0)

    def price_in(self, region: str) -> TokenPrices:
        """On-demand prices in `region`: its own when known, else the reference price marked assumed."""
        if region in self.region_prices:
            return self.region_prices[region]
        ref = TokenPrices(
            input_usd_per_1m_tokens=self.input_usd_per_1m_tokens,
            output_usd_per_1m_tokens=self.output_usd_per_1m_tokens,
            source=self.source,
            as_of=self.as_of,
        )
        if region in REFERENCE_PRICE_REGIONS:
            return ref
        return ref.model_copy(
            update={"assumed": True, "notes": f"no {region} price found: the US East price is used"}
        )


#: Regions whose Bedrock on-demand price is the reference (US East) price: AWS's pricing page shows one price for
#: the US Regions of the open-weight models (aws.amazon.com/bedrock/pricing, transcriptions of 2025-07 and 2026-02).
REFERENCE_PRICE_REGIONS = frozenset({"us-east-1", "us-east-2", "us-west-2"})


@dataclass(frozen=True)
class BedrockChoice:
    """An offer as callable from one Region: the id to invoke, how far requests may travel, and its prices."""

    offer: BedrockOffer
    invoke_id: str
    scope: Literal["in-region", "geography", "global"]
    region: str
    prices: TokenPrices

    @property
    def batch_prices(self) -> TokenPrices | None:
        """Batch prices in the Region: the offer's batch list price, scaled like the Region's on-demand price."""
        b = self.offer.batch
        if b is None:
            return None
        ref_in = self.offer.input_usd_per_1m_tokens or 1.0
        ref_out = self.offer.output_usd_per_1m_tokens or 1.0
        if self.prices.input_usd_per_1m_tokens == self.offer.input_usd_per_1m_tokens and (
            self.prices.output_usd_per_1m_tokens == self.offer.output_usd_per_1m_tokens
        ):
            return b if not self.prices.assumed else b.model_copy(update={"assumed": True})
        return b.model_copy(
            update={
                "input_usd_per_1m_tokens": round(
                    b.input_usd_per_1m_tokens * self.prices.input_usd_per_1m_tokens / ref_in, 6
                ),
                "output_usd_per_1m_tokens": round(
                    b.output_usd_per_1m_tokens * self.prices.output_usd_per_1m_tokens / ref_out, 6
                ),
                "assumed": True,
                "notes": f"batch price scaled from US East by the {self.region} on-demand price",
            }
        )


class BedrockProvisioned(Sourced):
    name: str
    bedrock_model_id: str
    model: str | None = None
    usd_per_hour_per_model_unit: float = Field(gt=0)


class SageMakerPrice(Sourced):
    instance_type: str
    region: str
    usd_per_hour: float = Field(gt=0)


class _AcceleratorFile(CatalogRecord):
    accelerators: list[Accelerator]


class _InstanceFile(CatalogRecord):
    instances: list[InstanceType]


class _ModelFile(CatalogRecord):
    models: list[ModelSpec]


class _ManagedFile(CatalogRecord):
    bedrock_on_demand: list[BedrockOffer] = Field(default_factory=list)
    bedrock_provisioned: list[BedrockProvisioned] = Field(default_factory=list)
    sagemaker: list[SageMakerPrice] = Field(default_factory=list)
    #: SageMaker premium over EC2 when a ml.* price is missing: +25% on multi-GPU and +40% on 1-GPU sizes in
    #: third-party tables (docs/serving-facts.md s5); applied as a derived, flagged value.
    sagemaker_premium_small: float = 0.40
    sagemaker_premium_large: float = 0.25


class Catalog:
    """All catalog entries, indexed. Build with `load_catalog()`."""

    def __init__(
        self,
        accelerators: list[Accelerator],
        instances: list[InstanceType],
        models: list[ModelSpec],
        managed: _ManagedFile,
    ) -> None:
        self.accelerators = {a.id: a for a in accelerators}
        self.instances = {i.instance_type: i for i in instances}
        self.models = {m.id: m for m in models}
        self.managed = managed
        #: values worked out from this catalog (`derive`): a catalog does not change once built (a release builds a
        #: new one)
        self.derived: dict[tuple[Any, ...], Any] = {}
        self._alias: dict[str, str] = {}
        for m in models:
            for name in (m.id, *m.aliases):
                self._alias[name.lower()] = m.id
        for i in instances:
            if i.accelerator not in self.accelerators:
                raise InvalidInput(f"instance {i.instance_type} names unknown accelerator {i.accelerator}")

    # --- look-ups -------------------------------------------------------------------------------------
    def model(self, name: str, field_name: str = "model") -> ModelSpec:
        key = name.strip().lower()
        if key in self._alias:
            return self.models[self._alias[key]]
        short = key.split("/")[-1]
        matches = [mid for alias, mid in self._alias.items() if alias.split("/")[-1] == short]
        if len(set(matches)) == 1:
            return self.models[matches[0]]
        suggestions = self.suggest_models(name)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise NotFound(
            f"unknown model '{name}'.{hint} To add it: `sizing catalog add-model config.json --id org/name` "
            "with the model's Hugging Face config.json.",
            field_name=field_name,
            suggestions=suggestions,
        )

    def suggest_models(self, name: str, n: int = 3) -> list[str]:
        names = list(self._alias)
        close = difflib.get_close_matches(name.lower(), names, n=n * 3, cutoff=0.4)
        close += difflib.get_close_matches(
            name.lower().split("/")[-1], [x.split("/")[-1] for x in names], n=n
        )
        out: list[str] = []
        for c in close:
            mid = self._alias.get(c) or next((v for k, v in self._alias.items() if k.endswith("/" + c)), None)
            if mid and mid not in out:
                out.append(mid)
        return out[:n]

    def instance(self, name: str, field_name: str = "instance_type") -> InstanceType:
        key = name.strip().lower().removeprefix("ml.")
        if key in self.instances:
            return self.instances[key]
        suggestions = difflib.get_close_matches(key, list(self.instances), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise NotFound(
            f"unknown instance type '{name}'.{hint}", field_name=field_name, suggestions=suggestions
        )

    def accelerator_of(self, instance: InstanceType) -> Accelerator:
        return self.accelerators[instance.accelerator]

    def devices(self, instance: InstanceType) -> int:
        """Tensor-parallel units on the instance: GPUs, or NeuronCores on inf2/trn."""
        return instance.accelerator_count * self.accelerator_of(instance).cores_per_chip

    def derive(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """The value `make()` works out from this catalog, kept under `key` (`sagemaker_price`, the planner's
        pricing: asked for every hardware option at every phase of an estimate)."""
        if key not in self.derived:
            self.derived[key] = make()
        return cast(T, self.derived[key])

    def sagemaker_price(self, instance: InstanceType, region: str = "us-east-1") -> Price:
        return self.derive(
            ("sagemaker_price", instance.instance_type, region),
            lambda: self._sagemaker_price(instance, region),
        )

    def _sagemaker_price(self, instance: InstanceType, region: str) -> Price:
        for p in self.managed.sagemaker:
            if p.instance_type == f"ml.{instance.instance_type}" and p.region == region:
                return Price(usd_per_hour=p.usd_per_hour, source=p.source, as_of=p.as_of)
        ec2 = instance.price(region)
        assert ec2.usd_per_hour is not None
        premium = (
            self.managed.sagemaker_premium_small
            if instance.accelerator_count == 1
            else self.managed.sagemaker_premium_large
        )
        return Price(
            usd_per_hour=round(ec2.usd_per_hour * (1 + premium), 4),
            source=f"derived: EC2 price x {1 + premium:.2f} (SageMaker premium in third-party tables)",
            as_of=ec2.as_of,
            assumed=True,
        )

    def bedrock_offers(self, model_id: str) -> list[BedrockOffer]:
        out = []
        for o in self.managed.bedrock_on_demand:
            if o.model and self._alias.get(o.model.lower()) == model_id:
                out.append(o)
        return out

    def bedrock_choices(
        self, model_id: str, region: str, data_residency: str = "in-region"
    ) -> tuple[list[BedrockChoice], list[str]]:
        """The offers of a model callable from `region` under `data_residency`, and, when there is none, why
        (the Regions and profiles that would serve it)."""
        allowed = (
            {"in-region"}
            | ({"geography"} if DATA_RESIDENCY.index(data_residency) >= 1 else set())
            | ({"global"} if data_residency == "any" else set())
        )
        out: list[BedrockChoice] = []
        why: list[str] = []
        for o in self.bedrock_offers(model_id):
            in_region = o.in_region or ([] if o.profiles else ["us-east-1"])
            picked: BedrockChoice | None = None
            if region in in_region:
                picked = BedrockChoice(o, o.bedrock_model_id, "in-region", region, o.price_in(region))
            else:
                for scope in ("geography", "global"):
                    prof = next(
                        (p for p in o.profiles if p.scope == scope and region in p.source_regions), None
                    )
                    if prof is None:
                        continue
                    if scope not in allowed:
                        why.append(
                            f"{o.name} is served from {region} only through the {scope} cross-Region profile"
                            f" {prof.id} (constraints.data_residency is {data_residency}; "
                            f"{'geography' if scope == 'geography' else 'any'} allows it)"
                        )
                        break
                    picked = BedrockChoice(o, prof.id, scope, region, o.price_in(region))
                    break
            if picked is not None:
                out.append(picked)
            elif not any(o.name in w for w in why):
                where = sorted(set(in_region) | {r for p in o.profiles for r in p.source_regions})
                close = nearest(region, where)[:3]
                why.append(
                    f"{o.name} is not offered in {region}"
                    + (f" (nearest Regions that offer it: {', '.join(close)})" if close else "")
                )
        return out, why

    def bedrock_provisioned(self, model_id: str) -> list[BedrockProvisioned]:
        return [
            p
            for p in self.managed.bedrock_provisioned
            if p.model and self._alias.get(p.model.lower()) == model_id
        ]


#: Parsed catalog files are kept as JSON under this directory (a user cache; `/tmp` in a Lambda), named by the
#: digest of the YAML they came from: json.load takes ~5 ms where PyYAML's constructor takes ~200 ms for the
#: catalog, so a process's first estimate starts that much sooner. The YAML stays the source of truth: a changed
#: file has another digest, and an unwritable cache only means parsing the YAML.
CACHE_ENV = "SIZING_CACHE_DIR"


def _cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory (a Lambda sandbox): the temporary directory
            import tempfile

            base = tempfile.gettempdir()
    return Path(base) / "sizing-catalog"


def _read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    cached = _cache_dir() / f"{path.stem}-{hashlib.sha256(raw).hexdigest()[:20]}.json"
    try:
        data = json.loads(cached.read_bytes())
    except (OSError, ValueError):
        # PyYAML (~25 ms to import, -X importtime) only when the JSON copy is missing: a process whose cache is
        # warm, as every `sizing predict` after the first, never imports it. libyaml's C loader where PyYAML was
        # built with it (3-5x faster on the catalog files), else the pure-Python one.
        import yaml

        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        _keep(cached, data)
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping at the top level")
    return data


def _keep(target: Path, data: Any) -> None:
    """Write the parsed file to the cache, atomically; a read-only or full disk is not an error."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, default=str))
        tmp.replace(target)
    except OSError:
        pass


def _merge_models(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {m["id"]: m for m in base}
    for m in extra:
        by_id[m["id"]] = m
    return list(by_id.values())


def _apply_region_snapshot(instances: list[dict[str, Any]], snap: dict[str, Any]) -> None:
    """Per-Region prices, availability and spot discounts from the price snapshot (data/regions.yaml), for the
    instance families it samples. A price already in instances.yaml for a Region (`refresh-prices`) wins."""
    regions: list[str] = list(snap.get("regions") or [])
    src, as_of = str(snap.get("source", "")), snap.get("as_of")
    for entry in instances:
        fam = (snap.get("families") or {}).get(entry.get("family"))
        if not fam:
            continue
        od: dict[str, float | None] = fam.get("on_demand") or {}
        entry["regions_known"] = regions
        entry["regions_available"] = [r for r in regions if r in od]
        base = (entry.get("prices") or {}).get("us-east-1", {}).get("usd_per_hour")
        ref = od.get("us-east-1")
        assumed = bool(fam.get("ratio_assumed"))
        for region in regions:
            here = od.get(region)
            if region == "us-east-1" or not here or not ref or not base or region in entry["prices"]:
                continue
            entry["prices"][region] = {
                "usd_per_hour": round(base * here / ref, 5),
                "source": f"{src}: {fam['sample']} {region} / us-east-1 = {here / ref:.4f} x this type's us-east-1"
                " price",
                "as_of": as_of,
                "assumed": assumed,
                "notes": None
                if not assumed
                else "Regional ratio from pre-2025-06 list prices applied to the current us-east-1 price",
            }
        spots: dict[str, dict[str, Any]] = {}
        for region, spot in (fam.get("spot") or {}).items():
            here = od.get(region)
            if spot and here:
                spots[region] = {
                    "fraction": round(max(0.0, 1 - spot / here), 3),
                    "source": f"{src}: median {fam['sample']} spot price over {region}'s availability zones",
                    "assumed": False,
                }
        entry["spot_by_region"] = spots


#: The catalog files a catalog is built from, in the order they are read (each is the `Catalog` attribute of its name).
CATALOG_FILES = ("accelerators", "instances", "models", "managed")
#: pickle protocol of the compact copy (5: Python 3.8 and later, so the 3.11 CLI and the 3.12 Lambda runtime read
#: each other's copies).
COMPACT_PROTOCOL = 5


#: Where a build puts the compact copy of the shipped catalog, beside the code (`make build` writes it into the
#: Lambda layer, whose file system is read-only at run time, so a cold start never validates the catalog).
PACKAGED_COMPACT_DIR = Path(__file__).parent / "compact"


def _compact_name(data_dir: Path, overlay_dir: Path | None) -> str:
    """The compact copy's file name: the digest of every input that shapes the catalog (the data files, the
    overlay, the source of the classes and of the vocabularies they validate against, pydantic-core's version), so
    any change to one of them names another file."""
    import pydantic_core

    digest = hashlib.sha256()
    files = [data_dir / f"{name}.yaml" for name in (*CATALOG_FILES, "regions")]
    if overlay_dir:
        files.append(overlay_dir / "models.yaml")
    here = Path(__file__)
    for path in (here, here.parent / "regions.py", here.parents[1] / "vocabulary.py", *files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes() if path.exists() else b"\0absent")
    digest.update(f"{pydantic_core.__version__}/{COMPACT_PROTOCOL}".encode())
    return f"catalog-{digest.hexdigest()[:24]}.pickle"


def _private(path: Path) -> bool:
    """`path` and its directory belong to this user and no one else can write them. A pickle runs code when
    loaded, so a compact copy in the cache is read only from such a place (other users of a shared temporary
    directory cannot plant one); where ownership cannot be told (no `os.getuid`), never."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return False
    try:
        return all(
            (st := p.stat()).st_uid == getuid() and not st.st_mode & 0o022 for p in (path.parent, path)
        )
    except OSError:
        return False


def _load_compact(path: Path, trusted: bool = False) -> Catalog | None:
    """The catalog kept at `path`, or None. `trusted`: a copy shipped beside the code, as trusted as the code."""
    if not path.is_file() or not (trusted or _private(path)):
        return None
    import pickle

    try:
        catalog = pickle.loads(path.read_bytes())
    except Exception:  # a damaged or foreign copy is rebuilt, never an error
        return None
    return catalog if isinstance(catalog, Catalog) else None


#: Modes of a compact copy in the cache (this user's only) and of one shipped beside the code (as the code's own
#: files: the Lambda runtime reads the layer as another user than the one that built it).
CACHE_MODES = (0o700, 0o600)
PACKAGED_MODES = (0o755, 0o644)


def _keep_compact(path: Path, catalog: Catalog, modes: tuple[int, int] = CACHE_MODES) -> None:
    """Write the compact copy atomically with `modes` (directory, file); a read-only or full disk is not an
    error."""
    import pickle

    try:
        path.parent.mkdir(mode=modes[0], parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, modes[1])
        with os.fdopen(fd, "wb") as out:
            out.write(pickle.dumps(catalog, protocol=COMPACT_PROTOCOL))
        os.chmod(tmp, modes[1])  # as asked, whatever the umask
        tmp.replace(path)
    except OSError:
        pass


def build_catalog(data_dir: Path = DATA_DIR, overlay_dir: Path | None = None) -> Catalog:
    """The catalog from its files, validated. The validated catalog is kept in compact form (a pickle, loaded in
    ~5 ms) in the cache, or shipped in the package by a build: validating takes ~55 ms in a new process, nearly all
    of it pydantic building the classes' schemas, which a process that loads the compact copy never does."""
    name = _compact_name(data_dir, overlay_dir)
    known = _load_compact(PACKAGED_COMPACT_DIR / name, trusted=True) or _load_compact(_cache_dir() / name)
    if known is not None:
        return known
    catalog = _validated(data_dir, overlay_dir)
    _keep_compact(_cache_dir() / name, catalog)
    return catalog


def package_compact() -> Path:
    """Write the shipped catalog's compact copy beside the code (`make build`, into the layer), and check that it
    reads back as the catalog validated from the YAML; the path written."""
    catalog = _validated(DATA_DIR, None)
    path = PACKAGED_COMPACT_DIR / _compact_name(DATA_DIR, None)
    for old in PACKAGED_COMPACT_DIR.glob("catalog-*.pickle"):
        old.unlink()
    _keep_compact(path, catalog, PACKAGED_MODES)
    PACKAGED_COMPACT_DIR.chmod(PACKAGED_MODES[0])
    back = _load_compact(path, trusted=True)
    if back is None or any(getattr(back, part) != getattr(catalog, part) for part in CATALOG_FILES):
        raise SystemExit(f"the catalog's compact copy {path} does not read back as the catalog")
    return path


def _validated(data_dir: Path, overlay_dir: Path | None) -> Catalog:
    raw = {name: _read(data_dir / f"{name}.yaml") for name in CATALOG_FILES}
    if (data_dir / "regions.yaml").exists():
        _apply_region_snapshot(raw["instances"]["instances"], _read(data_dir / "regions.yaml"))
    if overlay_dir and (overlay_dir / "models.yaml").exists():
        raw["models"]["models"] = _merge_models(
            raw["models"]["models"], _read(overlay_dir / "models.yaml").get("models", [])
        )
    try:
        return Catalog(
            _AcceleratorFile.model_validate(raw["accelerators"]).accelerators,
            _InstanceFile.model_validate(raw["instances"]).instances,
            _ModelFile.model_validate(raw["models"]).models,
            _ManagedFile.model_validate(raw["managed"]),
        )
    except ValidationError as exc:
        raise InvalidInput("the catalog data does not validate", problems_from_pydantic(exc)) from None


@functools.cache
def _cached(overlay: str | None) -> Catalog:
    return build_catalog(DATA_DIR, Path(overlay) if overlay else None)


def load_catalog() -> Catalog:
    """The shipped catalog, merged with `$SIZING_CATALOG_DIR` when set; parsed once per process."""
    return _cached(os.environ.get(OVERLAY_ENV) or None)


def reset_cache() -> None:
    _cached.cache_clear()
