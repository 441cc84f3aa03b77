"""`sizing workload FILE [--json]`: show the technical figures a business spec turns into."""

from __future__ import annotations

import argparse

from sizing.commands.output import print_json
from sizing.workload import load_spec, resolve


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("workload", help="derive the workload model from a spec (YAML or JSON)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    wm = resolve(load_spec(args.file))
    d = wm.derived()
    if args.json:
        print_json(d)
        return 0
    i, o = d["input_tokens"], d["output_tokens"]
    print(f"{d['name']}: {d['model']}")
    for note in d["notes"]:
        print(f"  {note}")
    print(
        f"  peak {d['peak_rps']:.2f} req/s, average {d['avg_rps']:.2f} req/s, {d['requests_per_month']:,} requests/month"
    )
    print(
        f"  peak concurrency {d['peak_concurrency']:.1f} requests in flight (Little's law:"
        f" {d['peak_rps']:.2f} req/s x {d['concurrency_basis_s']:.2f} s)"
    )
    print(f"  input tokens  mean {i['mean']:.0f}  p50 {i['p50']:.0f}  p95 {i['p95']:.0f}  ({i['kind']})")
    print(f"  output tokens mean {o['mean']:.0f}  p50 {o['p50']:.0f}  p95 {o['p95']:.0f}  ({o['kind']})")
    print(
        f"  tokens/s at peak: {d['input_tokens_per_s_peak']:,.0f} in, {d['output_tokens_per_s_peak']:,.0f} out"
    )
    print(f"  SLO: {d['slo']}")
    return 0
