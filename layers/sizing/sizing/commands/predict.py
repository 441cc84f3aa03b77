"""`sizing predict`: latency and throughput of one deployment under one load (DESIGN.md "Point prediction")."""

from __future__ import annotations

import argparse

from sizing.commands.output import print_json

QUANTS = ("bf16", "fp8", "int8", "int4")
ENGINES = ("vllm", "trtllm", "neuron", "tgi", "sglang")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict latency and throughput of one deployment")
    p.add_argument("--model", required=True, help="catalog model id (Hugging Face id) or alias")
    p.add_argument("--instance", required=True, help="instance type, e.g. g6e.12xlarge")
    p.add_argument(
        "--tp", type=int, default=None, help="tensor parallel devices (GPUs, or NeuronCores on inf2/trn)"
    )
    p.add_argument("--quant", choices=QUANTS, default="bf16")
    p.add_argument("--engine", choices=ENGINES, default="vllm")
    p.add_argument("--input-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int, help="closed loop: requests in flight (large = saturated)")
    load.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sizing.perf.predict import predict

    out = predict(
        args.model,
        args.instance,
        args.tp,
        args.quant,
        args.engine,
        args.input_tokens,
        args.output_tokens,
        concurrency=args.concurrency,
        rate=args.rate,
        seed=args.seed,
    )
    if args.json:
        print_json(out)
        return 0
    load = f"concurrency {out['concurrency']}" if "concurrency" in out else f"{out['request_rate']} req/s"
    print(
        f"{out['model']} on {out['instance_type']} (tp {out['tensor_parallel']}, {out['quantization']},"
        f" {out['engine']}), {out['input_tokens']} in / {out['output_tokens']} out, {load}"
    )
    print(f"  memory: {out['memory']['reason']}")
    if not out["fits"]:
        print("  does not fit")
        return 0
    for key, unit in (("ttft_ms", "ms"), ("tpot_ms", "ms"), ("e2e_s", "s")):
        s = out[key]
        print(
            f"  {key[:-3] if unit == 'ms' else 'e2e'}: mean {s['mean']} p50 {s['p50']} p95 {s['p95']} p99 {s['p99']} {unit}"
        )
    print(f"  throughput: {out['output_tokens_per_s']} output tokens/s, {out['requests_per_s']} requests/s")
    cal = out["calibration"]
    print(f"  calibration: {cal['basis']} (profile {cal['version']})")
    for note in out.get("notes", []):
        print(f"  note: {note}")
    return 0
