"""The serving configuration: one replica's engine settings, exactly as estimated, deployed, twinned and measured.

`ServingConfig` is the one place those settings live. The planner chooses it (and searches its runtime parameters),
the estimator simulates it, `sizing.deploy.manifests` renders it as the engine's container arguments (and
`from_vllm_args` reads them back), the local twin serves it, and the load test records it beside its figures. A
setting has one value here; nothing downstream holds a default of its own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field, model_validator

from sizing.base.errors import InvalidInput, Problem
from sizing.base.strict import Strict, StrictFrozen
from sizing.base.vocabulary import Engine, Quantization

#: vLLM's `--kv-cache-dtype`: `auto` keeps K/V in the activation dtype (bf16); `fp8` (E4M3) halves its bytes.
KvCacheDtype = Literal["auto", "fp8"]


class ServingConfig(StrictFrozen):
    """One replica as the engine runs it. On Neuron, `tensor_parallel` is the NxD Inference `tp_degree` (the
    NeuronCores one replica spans); `max_num_batched_tokens` is None for an engine without a token budget."""

    #: the served model id exactly as the workload named it (an -Instruct id serves the -Instruct checkpoint)
    model: str = Field(min_length=1)
    engine: Engine = "vllm"
    image: str = Field(min_length=1)
    tensor_parallel: int = Field(ge=1)
    quantization: Quantization = "bf16"
    kv_cache_dtype: KvCacheDtype = "auto"
    max_model_len: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    #: share of device memory the engine may use (vLLM `--gpu-memory-utilization`; Neuron/TRT-LLM: their fraction)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = False
    #: Neuron logical-core configuration (`NEURON_LOGICAL_NC_CONFIG`): None is the chip's default (LNC=2 on trn2,
    #: where `tensor_parallel` counts logical cores of two physical NeuronCore-v3 each); 1 on trn2 makes TP count
    #: physical cores. Not a vLLM flag: the manifests render it as the runtime's environment
    lnc: int | None = Field(default=None, ge=1, le=2)
    #: Neuron context-encoding buckets (prompt lengths compiled; each prompt pads to the next). None: the SDK's
    #: default, powers of two from 128 up to max_model_len
    context_buckets: tuple[int, ...] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ServingConfig:
        if self.context_buckets is not None:
            b = self.context_buckets
            if not b or list(b) != sorted(set(b)) or b[0] < 1:
                raise ValueError("context_buckets must be increasing positive prompt lengths")
            if b[-1] < self.max_model_len:
                raise ValueError(
                    f"the largest context bucket ({b[-1]}) is below max_model_len ({self.max_model_len}):"
                    " the longest prompt would have no compiled shape"
                )
        budget = self.max_num_batched_tokens
        if budget is not None and not self.enable_chunked_prefill and budget < self.max_model_len:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is below max_model_len"
                f" ({self.max_model_len}) without chunked prefill: the longest prompt could never be scheduled"
            )
        if budget is not None and self.engine == "vllm" and budget < self.max_num_seqs:
            # vLLM's SchedulerConfig refuses it at start: every running sequence needs a token of the step's budget
            raise ValueError(
                f"max_num_batched_tokens ({budget}) is below max_num_seqs ({self.max_num_seqs}): vLLM refuses a"
                " token budget smaller than its batch"
            )
        return self

    def label(self) -> str:
        parts = [
            f"max_model_len {self.max_model_len:,}",
            f"max_num_seqs {self.max_num_seqs}",
        ]
        if self.max_num_batched_tokens:
            parts.append(f"max_num_batched_tokens {self.max_num_batched_tokens}")
        if self.kv_cache_dtype != "auto":
            parts.append(f"kv_cache_dtype {self.kv_cache_dtype}")
        if self.enable_prefix_caching:
            parts.append("prefix caching")
        if self.lnc is not None:
            parts.append(f"LNC {self.lnc}")
        if self.context_buckets is not None:
            parts.append(f"context buckets {', '.join(map(str, self.context_buckets))}")
        return ", ".join(parts)


#: vLLM flags of `ServingConfig` fields (the names of `vllm serve --help`).
VLLM_FLAGS: dict[str, str] = {
    "model": "--served-model-name",
    "tensor_parallel": "--tensor-parallel-size",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_dtype": "--kv-cache-dtype",
}
#: vLLM's fp8 KV-cache format as written on the command line (`fp8` is an alias of it).
VLLM_FP8_KV = "fp8_e4m3"
#: vLLM-on-Neuron's pass-through of NxD Inference settings (a JSON object) [NxD Inference vLLM user guide,
#: awsdocs-neuron.readthedocs-hosted.com .../nxd-inference/developer_guides/vllm-user-guide.html]
NEURON_OVERRIDE_FLAG = "--override-neuron-config"


def vllm_args(s: ServingConfig) -> list[str]:
    """The `ServingConfig` part of a vLLM server's arguments (checkpoint, quantization and host flags are the
    renderer's). Every field is stated, so the server never falls back to a default of its own."""
    args = [
        f"--served-model-name={s.model}",
        f"--tensor-parallel-size={s.tensor_parallel}",
        f"--max-model-len={s.max_model_len}",
        f"--max-num-seqs={s.max_num_seqs}",
    ]
    if s.max_num_batched_tokens:
        args.append(f"--max-num-batched-tokens={s.max_num_batched_tokens}")
    if s.engine == "neuron":
        # vllm-neuron sizes its memory and KV dtype at compile time: these flags are GPU-only. Buckets other than
        # the SDK's default are NxD Inference settings passed through vLLM's `--override-neuron-config`
        if s.context_buckets is not None:
            buckets = ",".join(map(str, s.context_buckets))
            args.append(
                f'{NEURON_OVERRIDE_FLAG}={{"enable_bucketing":true,"context_encoding_buckets":[{buckets}]}}'
            )
        return args
    args.append(f"--gpu-memory-utilization={s.gpu_memory_utilization}")
    args.append(f"--kv-cache-dtype={VLLM_FP8_KV if s.kv_cache_dtype == 'fp8' else 'auto'}")
    args.append("--enable-chunked-prefill" if s.enable_chunked_prefill else "--no-enable-chunked-prefill")
    # vLLM V1 caches prefixes unless told not to: stated either way, so the server caches what was estimated
    args.append("--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching")
    return args


def parse_vllm_args(args: list[str]) -> dict[str, object]:
    """The `ServingConfig` fields stated in a vLLM server's arguments (`--flag=value` or `--flag value`)."""
    by_flag = {flag: name for name, flag in VLLM_FLAGS.items()}
    out: dict[str, object] = {}
    it = iter(range(len(args)))
    for i in it:
        arg = args[i]
        if arg in ("--enable-chunked-prefill", "--no-enable-chunked-prefill"):
            out["enable_chunked_prefill"] = not arg.startswith("--no-")
            continue
        if arg in ("--enable-prefix-caching", "--no-enable-prefix-caching"):
            out["enable_prefix_caching"] = not arg.startswith("--no-")
            continue
        flag, sep, value = arg.partition("=")
        if flag not in by_flag and flag != NEURON_OVERRIDE_FLAG:
            continue
        if not sep:
            value = args[i + 1] if i + 1 < len(args) else ""
            next(it, None)
        if flag == NEURON_OVERRIDE_FLAG:
            import json

            buckets = json.loads(value).get("context_encoding_buckets")
            if buckets is not None:
                out["context_buckets"] = tuple(int(b) for b in buckets)
            continue
        name = by_flag[flag]
        if name == "kv_cache_dtype":
            out[name] = "auto" if value == "auto" else "fp8"
        elif name == "gpu_memory_utilization":
            out[name] = float(value)
        elif name == "model":
            out[name] = value
        else:
            out[name] = int(value)
    return out


def check_for_hardware(s: ServingConfig, accelerator_kind: str, supports_fp8: bool) -> None:
    """Refuse a configuration the hardware cannot run, naming the field."""
    neuron = accelerator_kind == "neuron"
    if neuron and s.engine != "neuron":
        raise InvalidInput(
            f"serving.engine '{s.engine}' does not run on Neuron devices (use neuron)",
            [Problem("serving.engine", f"'{s.engine}' needs a GPU")],
        )
    if not neuron and s.engine == "neuron":
        raise InvalidInput(
            "serving.engine 'neuron' needs an inf2/trn instance",
            [Problem("serving.engine", "needs inf2/trn")],
        )
    if s.lnc is not None and not neuron:
        raise InvalidInput(
            "serving.lnc is a Neuron logical-core setting; leave it unset on a GPU",
            [Problem("serving.lnc", "only inf2/trn instances have logical NeuronCores")],
        )
    if s.context_buckets is not None and not neuron:
        raise InvalidInput(
            "serving.context_buckets are compiled Neuron shapes; leave them unset on a GPU",
            [Problem("serving.context_buckets", "only the neuron engine compiles buckets")],
        )
    if s.kv_cache_dtype == "fp8" and (neuron or not supports_fp8):
        raise InvalidInput(
            "serving.kv_cache_dtype fp8 needs an accelerator with fp8 support (L4, L40S, H100, H200, B200)",
            [Problem("serving.kv_cache_dtype", "fp8 is not supported on this accelerator")],
        )


#: The ServingConfig settings that decide a replica's performance at a load level: a measurement answers another
#: estimate only when these agree (`sizing.learn`). max_model_len and gpu_memory_utilization are left out -- they
#: size the KV cache, which decides how many sequences fit, and the measured levels' concurrency already ran
#: within it.
SERVING_KEY_FIELDS = (
    "model",
    "engine",
    "tensor_parallel",
    "quantization",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "lnc",
)


def serving_key(serving: dict[str, Any] | None) -> str:
    """A short digest of the performance-deciding ServingConfig settings (`SERVING_KEY_FIELDS`)."""
    picked = {k: (serving or {}).get(k) for k in SERVING_KEY_FIELDS}
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:12]


class ServerFacts(Strict):
    """What a server runs, as it reports it (None: it does not say): the load test records it beside its figures
    (`sizing.loadtest.server.probe`), and a result's `measured.server` states it."""

    endpoint: str
    engine: str | None = Field(
        default=None, description="vllm (its metrics say so), twin (a local twin), or None"
    )
    version: str | None = Field(default=None, description="GET /version")
    served_models: list[str] = Field(default_factory=list, description="GET /v1/models ids")
    max_model_len: int | None = Field(default=None, description="GET /v1/models max_model_len")
    kv_cache_tokens: int | None = Field(
        default=None,
        description="the KV cache's capacity in tokens (vllm:cache_config_info kv_cache_size_tokens)",
    )
    kv_cache_bytes: int | None = Field(
        default=None,
        description="the KV cache's size in bytes (vllm:cache_config_info kv_cache_memory_bytes): over its tokens, the"
        " bytes a token's K and V take, which says the type the server keeps them in",
    )
    block_size: int | None = Field(default=None, description="KV block size in tokens")
    prefix_caching: bool | None = None
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = Field(
        default=None, description="the scheduler's limit on running requests, where the server exposes it"
    )
    max_num_batched_tokens: int | None = Field(
        default=None, description="the scheduler's token budget per step, where the server exposes it"
    )
    notes: list[str] = Field(default_factory=list)
