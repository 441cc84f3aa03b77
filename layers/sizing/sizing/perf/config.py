"""A deployment to estimate: model x instance x tensor parallelism x quantization x engine, validated."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sizing.errors import InvalidInput, Problem
from sizing.perf.engines import ENGINES, GPU_ENGINES, NEURON_ENGINES, EngineDefaults, engine_defaults

if TYPE_CHECKING:
    from sizing.catalog import Accelerator, Catalog, InstanceType, ModelSpec
    from sizing.serving import ServingConfig

QUANTIZATIONS = ("bf16", "fp8", "int8", "int4")
#: Context a replica must hold at least once when the caller gives no max_model_len: a 2k-token conversation
#: is the smallest useful chat context (assumed; every catalog model supports more).
DEFAULT_MIN_CONTEXT = 2048


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

    @classmethod
    def create(
        cls,
        model: str,
        instance: str,
        tp: int | None = None,
        quant: str = "bf16",
        engine: str = "vllm",
        catalog: Catalog | None = None,
        *,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
    ) -> HardwareConfig:
        """Validate and build. Unknown model/instance -> NotFound with suggestions; a TP that does not divide the
        attention heads or exceeds the instance's devices -> InvalidInput naming both numbers; `tp=None` picks
        the smallest TP that fits in memory (the largest valid one if none fits, so `memory_fit` says why)."""
        from sizing.catalog import load_catalog

        cat = catalog or load_catalog()
        spec = cat.model(model)
        inst = cat.instance(instance)
        acc = cat.accelerator_of(inst)
        devices = cat.devices(inst)
        if quant not in QUANTIZATIONS:
            raise InvalidInput(
                f"unknown quantization '{quant}' (use one of {', '.join(QUANTIZATIONS)})",
                [Problem("quantization", f"'{quant}' is not one of {', '.join(QUANTIZATIONS)}")],
            )
        if not acc.supports(quant):
            raise InvalidInput(
                f"{acc.name} has no {quant} tensor cores; use bf16, int8 or int4 on {inst.instance_type}",
                [Problem("quantization", f"{quant} is not supported on {acc.name}")],
            )
        if engine not in ENGINES:
            raise InvalidInput(
                f"unknown engine '{engine}' (use one of {', '.join(ENGINES)})",
                [Problem("engine", f"'{engine}' is not one of {', '.join(ENGINES)}")],
            )
        allowed = NEURON_ENGINES if acc.kind == "neuron" else GPU_ENGINES
        if engine not in allowed:
            raise InvalidInput(
                f"engine '{engine}' does not run on {inst.instance_type} ({acc.name}); use {', '.join(allowed)}",
                [Problem("engine", f"'{engine}' needs {'a GPU' if engine != 'neuron' else 'inf2/trn'}")],
            )
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
        )
        if tp is not None:
            check_tp(spec, tp, devices, inst.instance_type)
            return base
        from sizing.perf.memory import memory_fit

        candidates = valid_tps(spec, devices)
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
        )

    def parts(self, catalog: Catalog | None = None) -> Parts:
        from sizing.catalog import load_catalog

        cat = catalog or load_catalog()
        spec = cat.model(self.model_id)
        if self.accelerator_id is not None:
            acc = cat.accelerators[self.accelerator_id]
            return Parts(spec, None, acc, self.tensor_parallel)
        inst = cat.instance(self.instance_type)
        return Parts(spec, inst, cat.accelerator_of(inst), cat.devices(inst))

    def defaults(self, catalog: Catalog | None = None) -> EngineDefaults:
        acc = self.parts(catalog).accelerator
        return engine_defaults(
            self.engine, acc.name, acc.device_memory_bytes / 1e9, acc.kind, self.tensor_parallel
        )

    def label(self) -> str:
        return f"{self.model_id} on {self.instance_type or self.accelerator_id} tp{self.tensor_parallel} {self.quantization} {self.engine}"


def valid_tps(spec: ModelSpec, devices: int) -> list[int]:
    """TP sizes from 1 to `devices` that divide the attention heads and are compatible with the KV heads."""
    return [t for t in range(1, devices + 1) if _tp_problem(spec, t) is None]


def _tp_problem(spec: ModelSpec, tp: int) -> str | None:
    if spec.num_attention_heads % tp:
        return f"tensor parallel {tp} does not divide the {spec.num_attention_heads} attention heads of {spec.id}"
    kv = spec.num_key_value_heads
    if kv % tp and tp % kv:
        return (
            f"tensor parallel {tp} neither divides nor is a multiple of the {kv} key/value heads of {spec.id}"
        )
    return None


def check_tp(spec: ModelSpec, tp: int, devices: int, instance_type: str) -> None:
    if tp < 1:
        raise InvalidInput(
            f"tensor parallel must be at least 1, got {tp}", [Problem("tensor_parallel", ">= 1")]
        )
    if tp > devices:
        raise InvalidInput(
            f"tensor parallel {tp} exceeds the {devices} devices of {instance_type}",
            [Problem("tensor_parallel", f"{tp} > {devices} devices on {instance_type}")],
        )
    problem = _tp_problem(spec, tp)
    if problem:
        raise InvalidInput(problem, [Problem("tensor_parallel", problem)])
