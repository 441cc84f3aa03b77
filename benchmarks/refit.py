"""How long a refit of the team's calibration takes: the reference data (the shipped profile's 460 TTFT, TPOT
and throughput leave-one-source-out predictions of 229 reference rows) plus N synthetic measured levels (default
1,000), on moto's DynamoDB and S3, in-process.

Synthetic levels: the example workloads' models on six accelerator families, three engines, closed-loop levels
1-256, each a "server" slower or faster than the reference profile by a factor drawn per (family, engine, model)
in 0.7-1.6 with 5% noise per level and metric; predicted figures are drawn, not simulated (the refit reads the
stored predictions, it never simulates). Timed: storing the levels, reading them back (GSI1 query), the fit and
cross-validation alone, and the whole refit (read the pointer, the adopted version and the levels, fit,
cross-validate on the team's levels and the reference rows, write the version, adopt). Prints figures; asserts
nothing.

    .venv/bin/python benchmarks/refit.py [--levels 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import boto3
from moto import mock_aws

from sizing.base.serving_config import serving_key
from sizing.learn import correction
from sizing.learn.levels import LevelStore, MeasuredLevel
from sizing.learn.profiles import ProfileStore
from sizing.learn.refit import prepare, run_refit, shipped_reference, team_rows
from sizing.store import SizingStore, create_table

FAMILIES = [("l40s", "g6e.xlarge"), ("a10g", "g5.xlarge"), ("l4", "g6.xlarge"), ("hopper", "p5.48xlarge"),
            ("a100", "p4d.24xlarge"), ("neuron-v2", "inf2.xlarge")]  # fmt: skip
ENGINES = ["vllm", "sglang", "tgi"]
MODELS = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen2.5-7B-Instruct"]
LEVELS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def synthetic(n: int, seed: int = 0) -> list[MeasuredLevel]:
    rnd = random.Random(seed)
    slow: dict[tuple[str, str, str], float] = {}
    out = []
    for i in range(n):
        fam, inst = FAMILIES[i % len(FAMILIES)]
        engine, model = ENGINES[(i // 6) % 3], MODELS[(i // 18) % 3]
        k = slow.setdefault((fam, engine, model), rnd.uniform(0.7, 1.6))
        c = LEVELS[i % len(LEVELS)]
        ttft, tpot = 80 + 20 * c * rnd.random(), 15 + 0.2 * c
        thr = 1000 * c / (c + 20)

        def noisy(v: float) -> float:
            return v * rnd.gauss(1, 0.05)

        out.append(
            MeasuredLevel(
                run_id=f"{i // 3:016x}",
                candidate_id="c1",
                level=c,
                origin="endpoint",
                architecture_id=f"eks:{inst}:tp1:bf16:{engine}:on-demand",
                model=model,
                family=fam,
                accelerator=fam,
                instance_type=inst,
                tensor_parallel=1,
                quantization="bf16",
                engine=engine,
                serving=None,
                serving_key=serving_key({"model": model}),
                engine_version="0.11.0",
                served_model=model,
                input_tokens=800,
                output_tokens=150,
                measured={
                    "ttft_ms": {"mean": noisy(ttft * k)},
                    "tpot_ms": {"mean": noisy(tpot * k)},
                    "e2e_s": {"mean": 1.0},
                    "output_tokens_per_s": noisy(thr / k),
                    "requests_per_s": 1.0,
                },
                predicted={
                    "ttft_ms": {"mean": ttft},
                    "tpot_ms": {"mean": tpot},
                    "e2e_s": {"mean": 1.0},
                    "output_tokens_per_s": thr,
                    "requests_per_s": 1.0,
                },
                reference_version="synthetic",
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t = time.perf_counter()
    _version, ref = shipped_reference()
    print(
        f"reference rows' cross-validated predictions loaded: {len(ref)} in {time.perf_counter() - t:.3f} s"
    )
    levels = synthetic(args.levels)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb, "bench")
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bench-calibration")
        store, profiles = (
            LevelStore(SizingStore("bench", client=ddb)),
            ProfileStore("bench-calibration", client=s3),
        )
        t = time.perf_counter()
        store.put(levels)
        print(f"stored {len(levels)} levels (BatchWriteItem, moto): {time.perf_counter() - t:.2f} s")
        t = time.perf_counter()
        got = store.query()
        print(f"read back {len(got)} levels (GSI1 query, moto): {time.perf_counter() - t:.2f} s")
        rows = team_rows(got)
        fits, cvs, whole, prep = [], [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            cand = correction.fit(rows)
            fits.append(time.perf_counter() - t)
            t = time.perf_counter()
            correction.team_cv(rows)
            correction.reference_error(ref, cand)
            cvs.append(time.perf_counter() - t)
            t = time.perf_counter()
            prepared = prepare(got, profiles, "bench")
            prep.append(time.perf_counter() - t)
            t = time.perf_counter()
            data = run_refit(store, profiles, "bench")
            whole.append(time.perf_counter() - t)
        print(f"corrections fitted: {len(cand)} keys")
        print(f"fit alone:                         median {statistics.median(fits) * 1e3:8.1f} ms")
        print(f"cross-validation (team + reference): median {statistics.median(cvs) * 1e3:6.1f} ms")
        print(f"prepare (pointer, adopted, fit, CV):  median {statistics.median(prep) * 1e3:6.1f} ms")
        print(f"whole refit incl. reading the levels and writing S3: median {statistics.median(whole):.2f} s")
        print(f"last refit: {data['status']} ({'; '.join(data['decision']['reasons'])})")
        print(f"version object: {len(str(prepared.version)) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
