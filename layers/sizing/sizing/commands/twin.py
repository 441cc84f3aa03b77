"""`sizing twin --model M --instance I [--tp N] [--quant Q] [--engine E] --port P [--host H]`: serve a digital
twin of one candidate (an OpenAI-compatible endpoint timed by the performance model) until interrupted. It prints
one line `... serving http://HOST:PORT ...` once it listens (with --port 0, the port it picked)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("twin", help="serve an OpenAI-compatible endpoint that behaves like a candidate")
    p.add_argument("--model", required=True, help="catalog model id (also the served model name)")
    p.add_argument("--instance", required=True, help="instance type, e.g. g6e.xlarge")
    p.add_argument(
        "--tp", type=int, default=None, help="tensor parallelism in devices (default: the smallest that fits)"
    )
    p.add_argument("--quant", default="bf16", choices=["bf16", "fp8", "int8", "int4"])
    p.add_argument("--engine", default="vllm", choices=["vllm", "trtllm", "neuron", "tgi", "sglang"])
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    p.add_argument(
        "--served-model-name",
        default=None,
        help="name clients use (default: --model; the catalog id works too)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the answer-length draws")
    # the engine settings a real deployment may override (vLLM's flags of the same names); default: the engine's
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sizing.orchestrate.lifeline import exit_with_parent
    from sizing.perf import HardwareConfig

    exit_with_parent()  # started by a local run: end with it, even if it is SIGKILLed
    from sizing.twin import serve, step_model_for

    cfg = HardwareConfig.create(
        args.model,
        args.instance,
        args.tp,
        args.quant,
        args.engine,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    sm = step_model_for(cfg)

    def ready(url: str) -> None:
        print(
            f"twin of {args.served_model_name or args.model} ({cfg.model_id}) on {cfg.instance_type} tp={cfg.tensor_parallel} {cfg.quantization} "
            f"{cfg.engine}: serving {url} (max_num_seqs {sm.max_num_seqs}, KV {sm.kv_capacity_tokens} tokens)",
            flush=True,
        )

    try:
        serve(cfg, args.host, args.port, step_model=sm, served_model=args.served_model_name or args.model, seed=args.seed,
              on_ready=ready)  # fmt: skip
    except KeyboardInterrupt:
        print("twin stopped", file=sys.stderr)
    return 0
