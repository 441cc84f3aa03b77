"""Repeatability of the capacity search: one server's capacity searched twice, minutes apart.

    make engine
    taskset -c 1 .venv/bin/python benchmarks/capacity.py [--endpoint http://127.0.0.1:8765] [--from 4]
        [--slo e2e_s.p95=1.5] [--input-tokens 256] [--output-tokens 64] [--window 8] [--runs 2]

Prints each search's capacity with its interval, its levels and time, then whether the runs agree within +/-10%
and whether each run's interval holds the other's point (the targets of the measurement issue). Run the client
on another core than the engine (the engine tier pins the engine to core 0).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sizing.commands.loadtest import parse_slo
from sizing.loadtest import run_sweep
from sizing.loadtest.server import probe


def search(endpoint: str, model: str, args: argparse.Namespace, out: Path) -> dict[str, object]:
    start = time.monotonic()
    run_sweep(
        endpoint, model, [], out_dir=out, mode="rate", input_tokens=args.input_tokens,
        output_tokens=args.output_tokens, duration_s=args.window, warmup_s=args.warmup, slo=parse_slo(args.slo),
        capacity_search={"start": args.start}, quiet=True,
    )  # fmt: skip
    cap = json.loads((out / "summary.json").read_text())["capacity"]
    cap["seconds"] = round(time.monotonic() - start, 1)
    return dict(cap)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", default="http://127.0.0.1:8765")
    ap.add_argument("--from", dest="start", type=float, default=4.0, help="first rate (req/s)")
    ap.add_argument("--slo", default="e2e_s.p95=1.5")
    ap.add_argument("--input-tokens", type=int, default=256)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--window", type=float, default=8.0, help="a level's window (s), grown while unsure")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    facts = probe(args.endpoint)
    model = facts.served_models[0]
    print(f"{facts.engine} {facts.version} serving {model} at {args.endpoint}; SLO {args.slo}, {args.input_tokens}"
          f" -> {args.output_tokens} tokens, Poisson, from {args.start:g} req/s")  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            cap = search(args.endpoint, model, args, Path(tmp) / f"run{i}")
            results.append(cap)
            levels = ", ".join(
                f"{lv['rate_rps']:g} ({lv['verdict']}, {lv['requests']} req)"
                for lv in cap["levels"]  # type: ignore[attr-defined]
            )
            print(f"run {i + 1}: capacity {cap['capacity_rps']} req/s, interval {cap['low_rps']} - {cap['high_rps']},"
                  f" {len(cap['levels'])} levels in {cap['seconds']} s: {levels}")  # type: ignore[arg-type]  # fmt: skip
    points = [r["capacity_rps"] for r in results]
    if len(points) >= 2 and all(isinstance(p, float | int) for p in points):
        a, b = float(points[0]), float(points[1])  # type: ignore[arg-type]
        print(f"agreement: {abs(a / b - 1):.1%} apart (target: within 10%)")
        for i, (r, other) in enumerate(((results[0], b), (results[1], a))):
            lo = r["low_rps"] if r["low_rps"] is not None else 0.0
            hi = r["high_rps"] if r["high_rps"] is not None else float("inf")
            print(f"run {i + 1}'s interval holds the other's point: {lo <= other <= hi}")  # type: ignore[operator]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
