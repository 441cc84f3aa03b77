"""A deployment to estimate: model x instance x tensor parallelism x quantization x engine, validated."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sizing.base.errors import InvalidInput, Problem
from sizing.base.vocabulary import ENGINES, QUANTIZATIONS, Quantization
from sizing.perf.engines import (
    CPU_ENGINES,
    GPU_ENGINES,
    NEURON_ENGINES,
    EngineDefaults,
    engine_defaults,
    pads_heads,
)
from sizing.perf.memory import memory_fit

if TYPE_CHECKING:
    from sizing.base.serving_config import ServingConfig
    from sizing.catalog import Accelerator, Catalog, InstanceType, ModelSpec

#: Formats that quantize only the MoE experts: a dense model has none to quantize.
EXPERT_ONLY_FORMATS: tuple[Quantization, ...] = ("mxfp4",)


@dataclass(frozen=True)
class Parts:
    """Catalog entries a config refers to."""

    model: ModelSpec
    instance: InstanceType | None
    accelerator: Accelerator
    devices: int


@dataclass(frozen=True)
class HardwareConfig:
    """One replica: `tensor_parallel` devices (GPUs, or NeuronCores on inf2/trn) of `instance_type` serving
    `model_id` at `quantization` with `engine`. Overrides left at None take the engine's defaults."""

    model_id: str
    instance_type: str
    tensor_parallel: int
    quantization: str = "bf16"
    engine: str = "vllm"
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    #: `auto` keeps K/V in bf16; `fp8` halves the KV bytes per token (None: the engine's choice for the quantization)
    kv_cache_dtype: str | None = None
    #: None: the engine's default (chunked prefill on vLLM/SGLang/TGI; off on TensorRT-LLM and Neuron)
    enable_chunked_prefill: bool | None = None
    #: requests' shared prefix is served from the KV cache instead of prefilled again (vLLM automatic prefix caching)
    enable_prefix_caching: bool = False
    #: calibration only: an accelerator with no AWS instance in the catalog (e.g. A100 PCIe rows)
    accelerator_id: str | None = None
    #: Neuron logical-core configuration (None: the chip's default, LNC=2 on trn2); `tensor_parallel` counts
    #: logical cores at this setting (the SDK's `tp_degree`)
    lnc: int | None = None
    #: Neuron context-encoding buckets (prompt lengths compiled; a prefill pads to the next one). None: the SDK's
    #: default, powers of two from 128 up to max_model_len (`sizing.perf.engines.neuron_buckets`)
    context_buckets: tuple[int, ...] | None = None
    #: KV-cache capacity in tokens as the server reports it (vLLM's `cache_config_info`): a measured server's own
    #: figure replaces the memory arithmetic's (None: worked out from memory, `sizing.perf.memory.memory_fit`)
    kv_cache_tokens: int | None = None

    @classmethod
    def create(
        cls,
        model: str,
        instance: str,
        tp: int | None = None,
        quant: str = "bf16",
        engine: str | None = "vllm",
        catalog: Catalog | None = None,
        *,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        kv_cache_dtype: str | None = None,
        lnc: int | None = None,
    ) -> HardwareConfig:
        """Validate and build. Unknown model/instance -> NotFound with suggestions; a TP that does not divide the
        attention heads or exceeds the instance's devices -> InvalidInput naming both numbers; `tp=None` picks
        the smallest TP that fits in memory (the largest valid one if none fits, so `memory_fit` says why);
        `engine=None` the instance's own engine (`default_engine`)."""
        from sizing.catalog import load_catalog

        cat = catalog or load_catalog()
        spec = cat.model(model)
        inst = cat.instance(instance)
        acc = cat.accelerator_of(inst)
        if lnc is not None:
            acc = _at_lnc(acc, lnc, inst.instance_type)
        devices = inst.accelerator_count * acc.cores_per_chip
        _check_format(spec, acc, quant, kv_cache_dtype, inst.instance_type)
        engine = engine or default_engine(acc)
        _check_engine(acc, engine, inst.instance_type)
        _check_limits(max_model_len, max_num_seqs, max_num_batched_tokens, gpu_memory_utilization)
        base = cls(
            spec.id,
            inst.instance_type,
            tp or 1,
            quant,
            engine,
            max_model_len,
            gpu_memory_utilization,
            max_num_seqs,
            max_num_batched_tokens,
            kv_cache_dtype,
            lnc=lnc,
        )
        if tp is not None:
            check_tp(spec, tp, devices, inst.instance_type, acc)
            return base
        candidates = valid_tps(spec, devices, acc)
        if not candidates:
            raise InvalidInput(
                f"no tensor-parallel size up to the {devices} devices of {inst.instance_type} divides the"
                f" {spec.num_attention_heads} attention heads of {spec.id}",
                [Problem("tensor_parallel", "no valid size on this instance")],
            )
        for cand in candidates:
            cfg = replace(base, tensor_parallel=cand)
            if memory_fit(cfg, catalog=cat).fits:
                return cfg
        return replace(base, tensor_parallel=candidates[-1])

    @classmethod
    def from_serving(cls, serving: ServingConfig, instance_type: str) -> HardwareConfig:
        """The replica a `ServingConfig` deploys on `instance_type`: every setting the estimator reads."""
        return cls(
            serving.model,
            instance_type,
            serving.tensor_parallel,
            serving.quantization,
            serving.engine,
            serving.max_model_len,
            serving.gpu_memory_utilization,
            serving.max_num_seqs,
            serving.max_num_batched_tokens,
            serving.kv_cache_dtype,
            serving.enable_chunked_prefill,
            serving.enable_prefix_caching,
            lnc=serving.lnc,
            context_buckets=serving.context_buckets,
        )

    def parts(self, catalog: Catalog | None = None) -> Parts:
        """The catalog entries of this replica. Looked up once per (config, catalog): the memory fit, the step
        model and the planner each ask several times per option. The memo sits outside the fields, so equality,
        hashing and `dataclasses.replace` do not see it."""
        from sizing.catalog import load_catalog

        cat = catalog or load_catalog()
        known = self.__dict__.get("_parts")
        if known is not None and known[0] is cat:
            memo: Parts = known[1]
            return memo
        spec = cat.model(self.model_id)
        if self.accelerator_id is not None:
            acc = cat.accelerators[self.accelerator_id].at_lnc(self.lnc)
            parts = Parts(spec, None, acc, self.tensor_parallel)
        else:
            inst = cat.instance(self.instance_type)
            acc = cat.accelerator_of(inst).at_lnc(self.lnc)
            parts = Parts(spec, inst, acc, inst.accelerator_count * acc.cores_per_chip)
        object.__setattr__(self, "_parts", (cat, parts))
        return parts

    def catalog_used(self) -> Catalog | None:
        """The catalog `parts` last looked this configuration up in (None before any, or after pickling): what a
        model built for it elsewhere reads its parts from again."""
        known = self.__dict__.get("_parts")
        return None if known is None else known[0]

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the memo of `parts` (it holds the whole catalog)."""
        return {k: v for k, v in self.__dict__.items() if k != "_parts"}

    def defaults(self, catalog: Catalog | None = None) -> EngineDefaults:
        acc = self.parts(catalog).accelerator
        return engine_defaults(
            self.engine, acc.name, acc.device_memory_bytes / 1e9, self.tensor_parallel, acc.kind
        )

    def label(self) -> str:
        return f"{self.model_id} on {self.instance_type or self.accelerator_id} tp{self.tensor_parallel} {self.quantization} {self.engine}"


def _at_lnc(acc: Accelerator, lnc: int, instance_type: str) -> Accelerator:
    """The accelerator at a logical-core setting, or InvalidInput naming the settings it has."""
    if acc.kind != "neuron" or lnc not in acc.lnc_options:
        opts = ", ".join(map(str, acc.lnc_options)) if acc.kind == "neuron" else "none (not a Neuron device)"
        raise InvalidInput(
            f"lnc {lnc} is not a logical-core setting of {acc.name} (supported: {opts})",
            [Problem("lnc", f"{lnc} is not supported on {instance_type}")],
        )
    return acc.at_lnc(lnc)


def _check_format(
    spec: ModelSpec, acc: Accelerator, quant: str, kv_cache_dtype: str | None, instance_type: str
) -> None:
    """The weight format and KV-cache type must exist and run on the accelerator (experts-only formats on MoE)."""
    if quant not in QUANTIZATIONS:
        raise InvalidInput(
            f"unknown quantization '{quant}' (use one of {', '.join(QUANTIZATIONS)})",
            [Problem("quantization", f"'{quant}' is not one of {', '.join(QUANTIZATIONS)}")],
        )
    if not acc.supports(quant):
        raise InvalidInput(
            f"{acc.name} has no {quant} support; use bf16, int8 or int4 on {instance_type}",
            [Problem("quantization", f"{quant} is not supported on {acc.name}")],
        )
    if quant in EXPERT_ONLY_FORMATS and spec.moe is None:
        raise InvalidInput(
            f"{quant} quantizes mixture-of-experts weights; {spec.id} is a dense model",
            [Problem("quantization", f"{quant} needs a mixture-of-experts model")],
        )
    if kv_cache_dtype not in (None, "auto", "fp8"):
        raise InvalidInput(
            f"unknown kv_cache_dtype '{kv_cache_dtype}' (use auto or fp8)",
            [Problem("kv_cache_dtype", "must be auto or fp8")],
        )
    if kv_cache_dtype == "fp8" and (acc.kind == "neuron" or not acc.supports("fp8")):
        raise InvalidInput(
            f"kv_cache_dtype fp8 needs an accelerator with fp8 support (L4, L40S, H100, H200, B200), not {acc.name}",
            [Problem("kv_cache_dtype", f"fp8 is not supported on {acc.name}")],
        )


def default_engine(acc: Accelerator) -> str:
    """The engine a deployment on `acc` runs when none is named: the first its kind serves (vLLM on GPUs and CPUs,
    the Neuron SDK's on inf2/trn)."""
    return _engines_of(acc)[0]


def _engines_of(acc: Accelerator) -> tuple[str, ...]:
    return {"neuron": NEURON_ENGINES, "cpu": CPU_ENGINES}.get(acc.kind, GPU_ENGINES)


def _check_engine(acc: Accelerator, engine: str, instance_type: str) -> None:
    if engine not in ENGINES:
        raise InvalidInput(
            f"unknown engine '{engine}' (use one of {', '.join(ENGINES)})",
            [Problem("engine", f"'{engine}' is not one of {', '.join(ENGINES)}")],
        )
    allowed = _engines_of(acc)
    if engine not in allowed:
        needs = "inf2/trn" if engine == "neuron" else "a GPU"
        raise InvalidInput(
            f"engine '{engine}' does not run on {instance_type} ({acc.name}); use {', '.join(allowed)}",
            [Problem("engine", f"'{engine}' needs {needs}")],
        )


def _check_limits(
    max_model_len: int | None,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    gpu_memory_utilization: float | None,
) -> None:
    for name, value in (
        ("max_model_len", max_model_len),
        ("max_num_seqs", max_num_seqs),
        ("max_num_batched_tokens", max_num_batched_tokens),
    ):
        if value is not None and value < 1:
            raise InvalidInput(f"{name} must be at least 1, got {value}", [Problem(name, "must be >= 1")])
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise InvalidInput(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}",
            [Problem("gpu_memory_utilization", "must be in (0, 1]")],
        )


def valid_tps(spec: ModelSpec, devices: int, accelerator: Accelerator | None = None) -> list[int]:
    """TP sizes from 1 to `devices` the engine runs: on a GPU (or without an accelerator) those that divide the
    attention heads and are compatible with the KV heads; on Neuron the `tp_degree`s the SDK compiles for the chip,
    whatever the heads (NxD Inference pads them)."""
    return [t for t in range(1, devices + 1) if _tp_problem(spec, t, accelerator) is None]


def _tp_problem(spec: ModelSpec, tp: int, accelerator: Accelerator | None = None) -> str | None:
    if pads_heads(accelerator):
        assert accelerator is not None
        degrees = accelerator.tp_degrees
        if degrees is not None and tp not in degrees:
            return (
                f"tensor parallel {tp} is not a tp_degree the Neuron SDK compiles on {accelerator.name}"
                f" ({', '.join(map(str, degrees))})"
            )
        return None
    if spec.num_attention_heads % tp:
        return f"tensor parallel {tp} does not divide the {spec.num_attention_heads} attention heads of {spec.id}"
    kv = spec.num_key_value_heads
    if kv % tp and tp % kv:
        return (
            f"tensor parallel {tp} neither divides nor is a multiple of the {kv} key/value heads of {spec.id}"
        )
    return None


def check_tp(
    spec: ModelSpec, tp: int, devices: int, instance_type: str, accelerator: Accelerator | None = None
) -> None:
    if tp < 1:
        raise InvalidInput(
            f"tensor parallel must be at least 1, got {tp}", [Problem("tensor_parallel", ">= 1")]
        )
    if tp > devices:
        raise InvalidInput(
            f"tensor parallel {tp} exceeds the {devices} devices of {instance_type}",
            [Problem("tensor_parallel", f"{tp} > {devices} devices on {instance_type}")],
        )
    problem = _tp_problem(spec, tp, accelerator)
    if problem:
        raise InvalidInput(problem, [Problem("tensor_parallel", problem)])
