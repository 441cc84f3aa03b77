"""`sizing twin --model M --instance I [--tp N] [--quant Q] [--engine E] [serving flags] --port P [--host H]`: serve
a digital twin of one replica (an OpenAI-compatible endpoint timed by the performance model) until interrupted.

The replica is a `sizing.base.serving_config.ServingConfig`: the engine settings take vLLM's flag names (`--max-model-len`,
`--max-num-seqs`, `--max-num-batched-tokens`, `--gpu-memory-utilization`, `--kv-cache-dtype`,
`--[no-]enable-prefix-caching`, `--[no-]enable-chunked-prefill`; `--image` is only stated); a setting not given is the engine's default for
the hardware (`sizing.plan.serving.serving_for`, as `sizing manifests` renders a bare architecture id). The step
model is the estimator's for exactly that config (`HardwareConfig.from_serving`). It prints one line
`... serving http://HOST:PORT ...` once it listens (with --port 0, the port it picked)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.lifeline import exit_with_parent
from sizing.base.vocabulary import ENGINES, QUANTIZATIONS
from sizing.perf import HardwareConfig

if TYPE_CHECKING:
    from sizing.base.serving_config import ServingConfig
    from sizing.catalog import Catalog

#: `--kv-cache-dtype` values: vLLM's `auto` and `fp8`, and `fp8_e4m3`, the spelling the manifests render.
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("twin", help="serve an OpenAI-compatible endpoint that behaves like a candidate")
    p.add_argument("--model", required=True, help="model id as the workload names it (also the served name)")
    p.add_argument("--instance", required=True, help="instance type, e.g. g6e.xlarge")
    p.add_argument(
        "--tp", type=int, default=None, help="tensor parallelism in devices (default: the smallest that fits)"
    )
    p.add_argument("--quant", default="bf16", choices=QUANTIZATIONS)
    p.add_argument("--engine", default="vllm", choices=ENGINES)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    p.add_argument(
        "--served-model-name",
        default=None,
        help="name clients use (default: --model; the catalog id works too)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the answer-length draws")
    # the ServingConfig, with vLLM's flag names; default: the engine's for this hardware
    p.add_argument("--image", default=None, help="engine image the replica runs (stated on the model card)")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.add_argument("--kv-cache-dtype", default=None, choices=KV_CACHE_DTYPES)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(func=run)


def serving_from_args(args: argparse.Namespace, catalog: Catalog | None = None) -> ServingConfig:
    """The `ServingConfig` the arguments state: the engine's defaults for the hardware, with every given flag
    replacing its field. Refuses (InvalidInput naming the field) a config the hardware or the model cannot run."""
    from pydantic import ValidationError

    from sizing.base.serving_config import ServingConfig, check_for_hardware
    from sizing.catalog import load_catalog
    from sizing.plan.serving import serving_for

    cat = catalog or load_catalog()
    hw = HardwareConfig.create(args.model, args.instance, args.tp, args.quant, args.engine, cat)  # picks a TP
    base = serving_for(cat, args.model, hw.instance_type, hw.tensor_parallel, hw.quantization, hw.engine,
                       max_model_len=args.max_model_len)  # fmt: skip
    given: dict[str, Any] = {
        "model": args.served_model_name or args.model,
        "image": args.image,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_cache_dtype": None if args.kv_cache_dtype is None else args.kv_cache_dtype.split("_", 1)[0],
        "enable_prefix_caching": args.enable_prefix_caching,
        "enable_chunked_prefill": args.enable_chunked_prefill,
    }
    fields = {**base.model_dump(), **{k: v for k, v in given.items() if v is not None}}
    budget = fields["max_num_batched_tokens"]
    if budget is not None and not fields["enable_chunked_prefill"] and args.max_num_batched_tokens is None:
        # as the engine defaults do: without chunking, a whole prompt must fit one step's token budget
        fields["max_num_batched_tokens"] = max(budget, fields["max_model_len"])
    try:
        serving = ServingConfig.model_validate(fields)
    except ValidationError as exc:
        raise InvalidInput("the serving configuration is not valid", problems_from_pydantic(exc)) from None
    acc = cat.accelerator_of(cat.instance(hw.instance_type))
    check_for_hardware(serving, acc.kind, acc.supports("fp8"))
    context = cat.model(args.model).max_position_embeddings
    if serving.max_model_len > context:
        raise InvalidInput(
            f"--max-model-len {serving.max_model_len:,} exceeds the model's context of {context:,} tokens",
            [Problem("max_model_len", f"> {context} (the model's context)")],
        )
    return serving


def run(args: argparse.Namespace) -> int:
    exit_with_parent()  # started by a local run: end with it, even if it is SIGKILLed
    from sizing.catalog import load_catalog
    from sizing.twin import serve, step_model_for

    cat = load_catalog()
    serving = serving_from_args(args, cat)
    # the estimator's replica for exactly this config; the perf model reads the catalog entry the name resolves to
    instance = cat.instance(args.instance).instance_type
    cfg = dataclasses.replace(
        HardwareConfig.from_serving(serving, instance), model_id=cat.model(args.model).id
    )
    sm = step_model_for(cfg)

    def ready(url: str) -> None:
        print(
            f"twin of {serving.model} ({cfg.model_id}) on {cfg.instance_type} tp={cfg.tensor_parallel}"
            f" {cfg.quantization} {cfg.engine}: serving {url} ({serving.label()}; engine max_num_seqs"
            f" {sm.max_num_seqs}, KV {sm.kv_capacity_tokens} tokens)",
            flush=True,
        )

    try:
        serve(cfg, args.host, args.port, step_model=sm, served_model=serving.model, seed=args.seed,
              serving=serving, on_ready=ready)  # fmt: skip
    except KeyboardInterrupt:
        print("twin stopped", file=sys.stderr)
    return 0
