"""`sizing predict`: latency and throughput of one deployment under one load (docs/estimator.md: its stated intervals)."""

from __future__ import annotations

import argparse
from typing import Any

from sizing.base.vocabulary import ENGINES, QUANTIZATIONS
from sizing.commands.output import EXIT_NO_ARCHITECTURE, print_json

#: The amplification (`sizing.perf.amplification`) from which the text says the queue multiplies a step error: below
#: it the interval is about the unloaded one's, and saying so on every light prediction would be noise.
QUEUED_AMPLIFICATION = 1.5


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "predict",
        help="predict latency and throughput of one deployment (exit 3 when it does not fit in memory, 2 for bad"
        " input)",
    )
    p.add_argument("--model", required=True, help="catalog model id (Hugging Face id) or alias")
    p.add_argument("--instance", required=True, help="instance type, e.g. g6e.12xlarge")
    p.add_argument(
        "--tp", type=int, default=None, help="tensor parallel devices (GPUs, or NeuronCores on inf2/trn)"
    )
    p.add_argument("--quant", choices=QUANTIZATIONS, default="bf16")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="serving engine (default: the instance's own: vllm on GPUs and CPUs, neuron on inf2/trn)",
    )
    p.add_argument("--input-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    p.add_argument(
        "--shared-prefix",
        type=int,
        default=0,
        metavar="N",
        help="tokens every prompt starts with, the same in all requests (a system prompt; a workload's"
        " tokens.shared_prefix): the deployment caches prefixes and serves them from the KV cache",
    )
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int, help="closed loop: requests in flight (large = saturated)")
    load.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    serving = p.add_argument_group(
        "serving configuration",
        "ServingConfig's settings, same names and meaning (default: the engine's own)",
    )
    serving.add_argument(
        "--max-num-seqs", type=int, help="sequences batched per step (Neuron: the compiled batch)"
    )
    serving.add_argument(
        "--max-num-batched-tokens", type=int, help="tokens scheduled per step (vLLM's chunked-prefill budget)"
    )
    serving.add_argument(
        "--max-model-len", type=int, help="longest request served, prompt + answer (default: input + output)"
    )
    serving.add_argument(
        "--gpu-memory-utilization", type=float, help="share of device memory the engine may use"
    )
    serving.add_argument(
        "--kv-cache-dtype", choices=("auto", "fp8"), help="KV cache element type (fp8 halves it)"
    )
    serving.add_argument(
        "--lnc",
        type=int,
        help="Neuron logical-core config (trn2: 2 by default, 1 makes --tp count physical cores)",
    )
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
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_dtype=args.kv_cache_dtype,
        lnc=args.lnc,
        shared_prefix_tokens=args.shared_prefix,
    )
    # a configuration that does not fit answers nothing a caller can use: exit 3, as `sizing estimate` does when
    # nothing meets the SLOs (neither success nor bad input), in the JSON and in the table
    code = 0 if out["fits"] else EXIT_NO_ARCHITECTURE
    if args.json:
        print_json(out)
        return code
    load = f"concurrency {out['concurrency']}" if "concurrency" in out else f"{out['request_rate']} req/s"
    print(
        f"{out['model']} on {out['instance_type']} (tp {out['tensor_parallel']}, {out['quantization']},"
        f" {out['engine']}), {out['input_tokens']} in / {out['output_tokens']} out, {load}"
    )
    print(f"  serving: {_serving_line(out['serving'])}")
    print(f"  memory: {out['memory']['reason']}")
    if not out["fits"]:
        print("  does not fit")
        return code
    bands = out.get("intervals", {})
    for key, unit in (("ttft_ms", "ms"), ("tpot_ms", "ms"), ("e2e_s", "s")):
        s = out[key]
        band = bands.get(key)
        # a TTFT's interval is its regime's (docs/estimator.md, "TTFT by regime")
        regime = f", {band['regime']} TTFT" if band and band.get("regime") else ""
        # and widens with the queue's amplification of a step error (docs/estimator.md, "Intervals that widen")
        amp = band.get("amplification", 1.0) if band else 1.0
        queued = f", a step error multiplied x{amp:.1f} by the queue" if amp >= QUEUED_AMPLIFICATION else ""
        within = (
            f" (80% interval of the mean {band['low']}-{band['high']} {unit}{regime}{queued})" if band else ""
        )
        print(
            f"  {key[:-3] if unit == 'ms' else 'e2e'}: mean {s['mean']} p50 {s['p50']} p95 {s['p95']} p99 {s['p99']}"
            f" {unit}{within}"
        )
    band = bands.get("output_tokens_per_s")
    within = f" (80% interval {band['low']}-{band['high']})" if band else ""
    print(
        f"  throughput: {out['output_tokens_per_s']} output tokens/s{within}, {out['requests_per_s']} requests/s"
    )
    cal = out["calibration"]
    print(f"  calibration: {cal['basis']} (profile {cal['version']})")
    for note in out.get("notes", []):
        print(f"  note: {note}")
    return 0


def _serving_line(s: dict[str, Any]) -> str:
    parts = [
        f"max_model_len {s['max_model_len']:,}",
        f"max_num_seqs {s['max_num_seqs']}",
        f"kv_cache_dtype {s['kv_cache_dtype']}",
    ]
    if s.get("max_num_batched_tokens"):
        parts.insert(2, f"max_num_batched_tokens {s['max_num_batched_tokens']}")
    if "lnc" in s:
        parts.append(f"LNC {s['lnc']}")
        parts.append(f"context buckets {', '.join(map(str, s['context_buckets']))}")
    else:
        parts.append(f"gpu_memory_utilization {s['gpu_memory_utilization']}")
    return ", ".join(parts)
