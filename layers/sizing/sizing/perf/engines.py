"""Serving-engine defaults: scheduler limits and memory settings per engine, each with its source.

Engines are *profiles of one model* (the same step-time and batching maths), differing in these defaults and in
calibrated efficiency factors. Sources are the entries of `docs/serving-facts.md` section 1 cited beside
each value; where that sheet has no figure the value is marked `assumed` with a reason.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sizing.base.vocabulary import Engine

if TYPE_CHECKING:
    from sizing.catalog import Accelerator

#: Engines that run on NVIDIA GPUs, on AWS Inferentia/Trainium NeuronCores (vLLM on NxD Inference), and on CPUs
#: (vLLM's CPU backend).
GPU_ENGINES: tuple[Engine, ...] = ("vllm", "trtllm", "sglang", "tgi")
NEURON_ENGINES: tuple[Engine, ...] = ("neuron",)
CPU_ENGINES: tuple[Engine, ...] = ("vllm",)
#: Context a replica must hold at least once when the caller gives no max_model_len: a 2k-token conversation
#: is the smallest useful chat context (assumed; every catalog model supports more).
DEFAULT_MIN_CONTEXT = 2048

GIB = 2**30

#: The container image each engine is deployed with: one pin, read by the estimate (its `ServingConfig`), the
#: manifests and the SageMaker provisioner. vLLM v0.11.0 is the V1 engine whose scheduler and defaults this
#: module states; the Neuron image is AWS's vLLM-on-NxD-Inference Deep Learning Container for Neuron SDK 2.25
#: [gallery.ecr.aws/neuron/pytorch-inference-vllm-neuronx]. TensorRT-LLM, SGLang and TGI are estimated with their
#: own defaults and images, but only vLLM and Neuron servers are rendered as manifests.
ENGINE_IMAGES: dict[str, str] = {
    "vllm": "vllm/vllm-openai:v0.11.0",
    "neuron": "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04",
    "sglang": "lmsysorg/sglang:v0.5.3-cu126",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
    "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
}
#: vLLM's CPU image, at the release the local engine measures (docs/engine.md): vLLM publishes CPU release images to
#: this public ECR repository [docs.vllm.ai, "CPU" installation, "Pre-built images"].
VLLM_CPU_IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0"


def engine_image(engine: str, kind: str) -> str:
    """The container image `engine` is deployed with on an accelerator of `kind` (vLLM on a CPU runs its CPU
    build)."""
    return VLLM_CPU_IMAGE if kind == "cpu" and engine == "vllm" else ENGINE_IMAGES[engine]


#: vLLM picks its large batch defaults on GPUs with >= 70 GiB that are not A100s (H100/H200/B200).
#: [vllm-project/vllm:vllm/engine/arg_utils.py@99d7eb5d `_set_default_args`]
VLLM_LARGE_GPU_GIB = 70
VLLM_LARGE = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs) for the OpenAI API server
VLLM_SMALL = (2048, 256)
#: `gpu_memory_utilization`: 0.92 in current main [vllm/config/cache.py@002f10e0] (0.90 in ~v0.7).
VLLM_GPU_MEMORY_UTILIZATION = 0.92
#: KV-cache block size in tokens (`CacheConfig.DEFAULT_BLOCK_SIZE`) [vllm/config/cache.py@002f10e0].
BLOCK_SIZE = 16

#: SGLang chunked_prefill_size by GPU memory (GB upper bound, tokens) [SGLang server_args.py
#: `_handle_gpu_memory_settings`, docs/serving-facts.md s1 table].
SGLANG_CHUNK_BY_MEMORY = ((20, 2048), (35, 2048), (60, 4096), (160, 8192), (float("inf"), 16384))
#: SGLang reserved memory (MB) = 512 + max(chunk, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp/8 x 1024, floor 10 GB
#: above 60 GB [docs/serving-facts.md s1]. cuda_graph_max_bs by memory tier (TP<4 / TP>=4).
SGLANG_GRAPH_BS_BY_MEMORY = (
    (20, 8, 8),
    (35, 24, 80),
    (60, 32, 160),
    (160, 256, 512),
    (float("inf"), 512, 512),
)
SGLANG_RESERVED_FLOOR_GB = 10.0
SGLANG_RESERVED_FLOOR_ABOVE_GB = 60.0
#: SGLang max_running_requests: req_to_token pool clamps to [2048, 4096]; the lower end is used (the KV
#: capacity bounds the batch long before on every catalog GPU) [docs/serving-facts.md s1].
SGLANG_MAX_RUNNING = 2048

#: TensorRT-LLM BuildConfig max_batch_size=2048, max_num_tokens=8192 [NVIDIA/TensorRT-LLM builder.py@008b2b8d];
#: trtllm-serve kv_cache_free_gpu_memory_fraction 0.9 of memory free after weights; chunked prefill off;
#: capacity scheduler GUARANTEED_NO_EVICT (reserves a request's whole KV at admission) [serve.py, id 4219957788].
TRTLLM_MAX_BATCH = 2048
TRTLLM_MAX_TOKENS = 8192
TRTLLM_KV_FREE_FRACTION = 0.9

#: TGI launcher defaults (max_concurrent_requests 128, max_batch_prefill_tokens 4096, cuda_memory_fraction 1.0):
#: assumed -- not in docs/serving-facts.md; these are TGI's documented launcher defaults as commonly deployed.
TGI_MAX_CONCURRENT = 128
TGI_MAX_PREFILL_TOKENS = 4096
TGI_MEMORY_FRACTION = 0.95  # assumed: TGI leaves a small margin under cuda_memory_fraction=1.0

#: Neuron (vLLM on NxD Inference): vLLM's `max_num_seqs` is the batch NxD Inference compiles (`batch_size`); the
#: integration keeps vLLM's default of 256 sequences [docs.vllm.ai engine args `--max-num-seqs`; NxD Inference vLLM
#: user guide, awsdocs-neuron.readthedocs-hosted.com .../nxd-inference/developer_guides/vllm-user-guide.html],
#: which the KV cache then bounds: Neuron allocates every compiled sequence a whole max_model_len of KV
#: (`sizing.perf.memory.memory_fit` caps the batch at what the memory holds). Prefill runs alone (no mixed
#: prefill/decode step).
NEURON_MAX_NUM_SEQS = 256
#: Context-encoding buckets: NxD Inference compiles prompt lengths of powers of two from 128 up to the largest
#: context, which is always a bucket of its own; a prompt is padded to the smallest bucket that holds it
#: [NxD Inference developer guide "Bucketing" (`autobucketing`, `generate_buckets`): aws-neuron-sdk
#: libraries/nxd-inference/developer_guides/feature-guide.rst; vLLM Neuron `num_batched_tokens_buckets`: "Power-of-2
#: from 128", awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/reference-configuration.html]
NEURON_MIN_BUCKET = 128


def neuron_buckets(max_len: int) -> tuple[int, ...]:
    """The SDK's default context-encoding buckets up to `max_len`: 128, 256, ... below it, and `max_len` itself."""
    out: list[int] = []
    b = NEURON_MIN_BUCKET
    while b < max_len:
        out.append(b)
        b *= 2
    out.append(max_len)
    return tuple(out)


NEURON_MEMORY_FRACTION = 0.95  # assumed: the Neuron runtime allocates KV statically, little slack kept

#: vLLM's CPU backend (the `vllm-cpu` build): the OpenAI API server defaults to 128 sequences and 2,048 batched
#: tokens per step [vllm engine/arg_utils.py `get_batch_defaults`, "cpu specific default values", 0.32.0]; the KV
#: cache takes `gpu_memory_utilization` (0.92, "the fraction of CPU memory reserved" on CPU) of the node's memory
#: less what the process already holds, unless VLLM_CPU_KVCACHE_SPACE states GiB [v1/worker/cpu_worker.py
#: `determine_available_memory`]; blocks of 128 tokens [platforms/cpu.py `check_and_update_config`]. Chunked
#: prefill and prefix caching are on, as on GPUs.
VLLM_CPU_BATCH = (2048, 128)  # (max_num_batched_tokens, max_num_seqs)
VLLM_CPU_BLOCK_SIZE = 128
#: What vLLM's API server (HTTP, tokenisation, detokenisation, streaming: one Python process) spends in CPU time per
#: request and per output token, measured from its own `process_cpu_seconds_total` on the local engine (vLLM 0.32.0,
#: tiny-llama, 128-token prompts; one stream of 1, 32 and 128-token answers and Poisson arrivals at 8 and 16 req/s;
#: `benchmarks/engine.py frontend`, 2026-12-06): its share of a core fits 0.062 + 2.8 ms x requests/s + 0.068 ms x
#: tokens/s within 0.7 points (the 0.062 is its idle loop, with the model's core in every measurement the fit
#: already reads). Closed loops of 16-64 streams spent less a request and a token (the server batches its outputs):
#: these are its costs at the rates where they matter, when requests arrive on their own.
VLLM_CPU_FRONTEND_REQUEST_S = 0.0028
VLLM_CPU_FRONTEND_TOKEN_S = 0.000068
#: What the engine process holds beside weights and KV on CPU: the Python interpreter, torch and its compiled
#: kernels, the API server -- assumed 1.5 GB (the local engine's resident memory less its model, docs/engine.md).
CPU_RUNTIME_OVERHEAD_GB = 1.5

#: Memory inside the engine's budget that is neither weights, activations nor KV cache, per device: CUDA context
#: (~0.5 GB) and cuBLAS/NCCL workspaces -- assumed 0.8 GB (CUDA graphs live in the share outside
#: gpu_memory_utilization); Neuron runtime scratch assumed 0.5 GB per NeuronCore.
GPU_RUNTIME_OVERHEAD_GB = 0.8
NEURON_RUNTIME_OVERHEAD_GB = 0.5


@dataclass(frozen=True)
class EngineDefaults:
    """Scheduler and memory defaults of one engine on one accelerator."""

    engine: str
    max_num_seqs: int
    max_num_batched_tokens: int
    #: share of device memory the engine may use (`total` basis) or of memory left after weights (`free`).
    memory_fraction: float
    memory_basis: Literal["total", "free"]
    block_size: int
    #: long prompts are split into chunks that fit the token budget
    chunked_prefill: bool
    #: decodes keep running in the same step as a prefill (otherwise a prefill step stalls every decode)
    mixed_prefill_decode: bool
    #: KV admission: `incremental` takes blocks as tokens are computed (may preempt); `reserve` takes the
    #: request's whole prompt + output at admission and never preempts
    admission: Literal["incremental", "reserve"]
    runtime_overhead_gb: float
    source: str
    #: MoE experts evaluated densely (every expert for every token): what the Neuron reference rows M049-M065
    #: show -- MoE step times far above the active-parameter roofline (assumed for the neuron engine)
    moe_dense: bool = False
    #: every decode step reads the KV cache of the whole compiled context (static shapes), not just the tokens
    #: held: vllm-neuron sizes decode block tables to max_model_len [docs/serving-facts.md s3]
    static_kv_reads: bool = False
    #: the decode graph runs at a compiled batch, not the sequences running: the smallest compiled bucket that
    #: holds them (vllm-neuron compiles one decode graph per `num_seqs` bucket up to `max_num_seqs`:
    #: `steptime.decode_batch_buckets`); idle rows are padding that costs FLOPs and KV reads
    static_decode_batch: bool = False
    #: prompts are padded to compiled context-encoding buckets (`neuron_buckets`)
    prefill_buckets: bool = False
    #: TGI 2.x's router holds waiting requests back while a batch decodes until they number at least this share
    #: of the running batch (`waiting_served_ratio`) or `prefill_defer_steps` decode steps have passed since the
    #: last prefill (`max_waiting_tokens`); 0 admits at once
    prefill_defer_ratio: float = 0.0
    prefill_defer_steps: int = 0
    #: CPU seconds the server's API process spends on a request (HTTP, tokenisation, the request's setup) and on
    #: each output token (detokenisation, streaming): the model's time where the two share its cores (a CPU
    #: instance of one physical core, `Accelerator.frontend_shares_cores`); 0 where unmeasured
    frontend_request_cpu_s: float = 0.0
    frontend_token_cpu_s: float = 0.0


@functools.lru_cache(maxsize=1024)
def engine_defaults(
    engine: str, accelerator_name: str, device_memory_gb: float, tp: int = 1, kind: str = "gpu"
) -> EngineDefaults:
    """Defaults of `engine` on a device of `kind` (gpu, neuron, cpu) with `device_memory_gb` (decimal GB) of
    memory. A pure function of its
    arguments with a frozen answer, cached: one estimate asks it ~5 times per hardware option (memory fit, step
    model, serving defaults), for a few dozen distinct devices."""
    gib = device_memory_gb * 1e9 / GIB
    if engine == "vllm" and kind == "cpu":
        tokens, seqs = VLLM_CPU_BATCH
        return EngineDefaults(
            engine,
            seqs,
            tokens,
            VLLM_GPU_MEMORY_UTILIZATION,
            "total",
            VLLM_CPU_BLOCK_SIZE,
            True,
            True,
            "incremental",
            CPU_RUNTIME_OVERHEAD_GB,
            "vllm 0.32.0 (CPU) arg_utils.py get_batch_defaults; cpu_worker.py; platforms/cpu.py; API server CPU"
            " measured (benchmarks/engine.py frontend)",
            frontend_request_cpu_s=VLLM_CPU_FRONTEND_REQUEST_S,
            frontend_token_cpu_s=VLLM_CPU_FRONTEND_TOKEN_S,
        )
    if engine == "vllm":
        large = gib >= VLLM_LARGE_GPU_GIB and "a100" not in accelerator_name.lower()
        tokens, seqs = VLLM_LARGE if large else VLLM_SMALL
        return EngineDefaults(
            engine,
            min(seqs, tokens),
            tokens,
            VLLM_GPU_MEMORY_UTILIZATION,
            "total",
            BLOCK_SIZE,
            True,
            True,
            "incremental",
            GPU_RUNTIME_OVERHEAD_GB,
            "vllm arg_utils.py@99d7eb5d; cache.py@002f10e0",
        )
    if engine == "sglang":
        chunk = next(c for limit, c in SGLANG_CHUNK_BY_MEMORY if device_memory_gb < limit)
        graph_bs = next(
            (a if tp < 4 else b) for limit, a, b in SGLANG_GRAPH_BS_BY_MEMORY if device_memory_gb < limit
        )
        reserved_gb = (512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024) / 1024
        if device_memory_gb > SGLANG_RESERVED_FLOOR_ABOVE_GB:
            reserved_gb = max(reserved_gb, SGLANG_RESERVED_FLOOR_GB)
        fraction = (device_memory_gb - reserved_gb) / device_memory_gb
        return EngineDefaults(
            engine,
            SGLANG_MAX_RUNNING,
            chunk,
            fraction,
            "total",
            1,
            True,
            True,
            "incremental",
            0.0,
            "sglang server_args.py _handle_gpu_memory_settings (docs/serving-facts.md s1)",
        )
    if engine == "trtllm":
        return EngineDefaults(
            engine,
            TRTLLM_MAX_BATCH,
            TRTLLM_MAX_TOKENS,
            TRTLLM_KV_FREE_FRACTION,
            "free",
            32,
            False,
            True,
            "reserve",
            GPU_RUNTIME_OVERHEAD_GB,
            "TensorRT-LLM builder.py@008b2b8d; trtllm-serve serve.py",
        )
    if engine == "tgi":
        return EngineDefaults(
            engine,
            TGI_MAX_CONCURRENT,
            TGI_MAX_PREFILL_TOKENS,
            TGI_MEMORY_FRACTION,
            "total",
            BLOCK_SIZE,
            True,
            True,
            "incremental",
            GPU_RUNTIME_OVERHEAD_GB,
            "assumed: TGI launcher defaults",
        )
    if engine == "neuron":
        return EngineDefaults(
            engine,
            NEURON_MAX_NUM_SEQS,
            0,
            NEURON_MEMORY_FRACTION,
            "total",
            BLOCK_SIZE,
            False,
            False,
            "reserve",
            NEURON_RUNTIME_OVERHEAD_GB,
            "NxD Inference vLLM integration: compiled batch = max_num_seqs (vLLM default 256, capped by KV memory);"
            " context-encoding buckets of powers of two from 128",
            moe_dense=True,
            static_kv_reads=True,
            static_decode_batch=True,
            prefill_buckets=True,
        )
    raise ValueError(f"unknown engine {engine}")


#: TGI router defaults before 3.0: waiting_served_ratio 1.2, lowered to 0.3 by PR #1820 (merged 2024-04-26, first
#: released in 2.0.2); max_waiting_tokens 20 [huggingface/text-generation-inference launcher/src/main.rs]
TGI2_WAITING_SERVED_RATIO = 0.3
TGI_EARLY_WAITING_SERVED_RATIO = 1.2
TGI_LOWER_RATIO_SINCE = (2, 0, 2)
TGI2_MAX_WAITING_TOKENS = 20
#: vLLM V0 without chunked prefill takes max(max_model_len, 2048) prompt tokens per prefill step; with chunked
#: prefill 512 tokens per step, decodes first ("the best balance between ITL and TTFT on A100")
#: [vllm/config.py SchedulerConfig, 0.4-0.7]
VLLM_V0_MIN_BATCHED_TOKENS = 2048
VLLM_V0_CHUNKED_BATCHED_TOKENS = 512
#: From 0.5.3 (PR #6666, 2024-07-23) V0 enables chunked prefill by default when max_model_len exceeds 32K tokens
#: (GPU, no sliding window) [vllm/engine/arg_utils.py]; DJL LMI images kept it off until LMI 0.30 (djl-serving
#: PR #2458, 2024-10)
VLLM_V0_AUTO_CHUNK_SINCE = (0, 5, 3)
VLLM_V0_AUTO_CHUNK_ABOVE_LEN = 32768


def _release(version: str) -> tuple[int, ...] | None:
    """The x.y.z release a version text names, if it names one."""
    m = re.search(r"\bv?(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in m.groups()) if m else None


def _tgi_waiting_served_ratio(version: str) -> float:
    """TGI's default waiting_served_ratio for a stated version: 1.2 before 2.0.2 (and for rows that state only
    "1.x" or 2023), 0.3 from 2.0.2."""
    release = _release(version)
    if release is not None:
        return (
            TGI2_WAITING_SERVED_RATIO if release >= TGI_LOWER_RATIO_SINCE else TGI_EARLY_WAITING_SERVED_RATIO
        )
    early = re.search(r"(?<![\d.])1\.x\b|\b2023\b", version)
    return TGI_EARLY_WAITING_SERVED_RATIO if early else TGI2_WAITING_SERVED_RATIO


def _v0_chunks_long_context(version: str) -> bool:
    """Whether a V0 release auto-enables chunked prefill for long-context models. A stated release is compared;
    DJL LMI images of that time did not; a row that states only a date (all August 2024 or later here) did."""
    low = version.lower()
    if "djl" in low or "lmi" in low:
        return False
    release = _release(low)
    return release >= VLLM_V0_AUTO_CHUNK_SINCE if release is not None else True


def build_scheduler(build: str, max_model_len: int, version: str = "") -> dict[str, Any]:
    """Scheduler settings of an engine build measured apart from the one the product deploys (calibration rows
    of older generations), where they differ from the current build's: vLLM V0 and TGI 2.x prefill whole prompts
    in steps of their own, with every decode paused [vLLM V0 scheduler `_schedule_default`; TGI 2.x router
    `batching_task`], and TGI before 3.0 defers new prefills while a batch runs. V0 from 0.5.3 serving a model longer
    than 32K tokens chunks prompts into 512-token steps that also carry the decodes (`_schedule_chunked_prefill`).
    `max_model_len` is what the server ran with; `version` the engine version the row states."""
    if build == "vllm@v0":
        if max_model_len > VLLM_V0_AUTO_CHUNK_ABOVE_LEN and _v0_chunks_long_context(version):
            return {
                "chunked_prefill": True,
                "mixed_prefill_decode": True,
                "max_num_batched_tokens": VLLM_V0_CHUNKED_BATCHED_TOKENS,
            }
        return {
            "chunked_prefill": False,
            "mixed_prefill_decode": False,
            "max_num_batched_tokens": max(max_model_len, VLLM_V0_MIN_BATCHED_TOKENS),
        }
    if build == "tgi@v2":
        return {
            "chunked_prefill": False,
            "mixed_prefill_decode": False,
            "prefill_defer_ratio": _tgi_waiting_served_ratio(version),
            "prefill_defer_steps": TGI2_MAX_WAITING_TOKENS,
        }
    return {}


def pads_heads(accelerator: Accelerator | None) -> bool:
    """Whether the engine on `accelerator` pads attention heads a TP degree does not divide (NxD Inference on
    Neuron: Q heads padded to a multiple of tp_degree, KV heads replicated, or the attention run as multi-head
    when the degree is not a multiple of the KV heads) instead of refusing the degree (vLLM/SGLang/TRT-LLM)."""
    return accelerator is not None and accelerator.kind == "neuron"
