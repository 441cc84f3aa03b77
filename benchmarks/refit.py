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
    .venv/bin/python benchmarks/refit.py --step-models 3   # the step fits of three models' runs, timed
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
from sizing.learn.levels import LevelSteps, LevelStore, MeasuredLevel
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


def step_levels(levels: list[MeasuredLevel], seed: int = 1) -> list[LevelSteps]:
    """Each synthetic level's engine steps, as a real endpoint's run keeps them (`STEPS_KEPT` timed steps of 1-40
    running sequences, one in four finishing a prompt), timed by the reference profile 30% slower with 3% noise,
    and two capacity-search levels' of its candidate."""
    from dataclasses import replace

    from sizing.catalog import load_catalog
    from sizing.learn.stepcorrection import reference_profile
    from sizing.loadtest.steps import EngineStep
    from sizing.loadtest.stepsample import STEPS_KEPT, StepsSample
    from sizing.perf.config import HardwareConfig
    from sizing.perf.step import StepModel
    from sizing.perf.stepfit import modelled_s

    rnd = random.Random(seed)
    cat = load_catalog()
    out: list[LevelSteps] = []
    for i, lv in enumerate(levels):
        ref = reference_profile(lv.accelerator, lv.engine)
        slow = replace(ref, bandwidth_eff=ref.bandwidth_eff / 1.3, compute_eff=ref.compute_eff / 1.3)
        sm = StepModel.for_config(HardwareConfig.create(lv.model, lv.instance_type, 1, catalog=cat), slow)
        for n, phase in ((i * 3, "levels"), (i * 3 + 1, "capacity"), (i * 3 + 2, "capacity")):
            rows = []
            for _ in range(STEPS_KEPT):
                b, k = rnd.randint(1, 40), rnd.choice((0, 0, 0, 1))
                s = EngineStep(0.0, 1.0, b, k, k * 512, b * rnd.randint(300, 1200), 0.0)
                rows.append((modelled_s(sm, s) * rnd.gauss(1, 0.03) * 1e3, b, k, k * 512, s.context_tokens))
            out.append(
                LevelSteps(
                    run_id=lv.run_id, candidate_id=lv.candidate_id, n=n, phase=phase,
                    concurrency=lv.level if phase == "levels" else None, model=lv.model, family=lv.family,
                    accelerator=lv.accelerator, instance_type=lv.instance_type, tensor_parallel=1,
                    quantization="bf16", engine=lv.engine,
                    sample=StepsSample(rebuilt=len(rows), timed=len(rows), steps=rows),
                )
            )  # fmt: skip
    return out


def step_fits(models: int) -> None:
    """The refit's step fits (`sizing.learn.stepcorrection.learn`) for `models` models of three measured levels each
    (one run's closed loops at 4, 16 and 64 streams, each with its capacity search's levels): how long they take."""
    from sizing.catalog import load_catalog
    from sizing.learn.stepcorrection import learn

    keys = [(fam, inst, model) for fam, inst in FAMILIES[:3] for model in MODELS][:models]
    levels = [
        lv.model_copy(update={"family": fam, "accelerator": fam, "instance_type": inst, "model": model,
                              "engine": "vllm", "level": c, "run_id": f"{j:016x}"})
        for j, (fam, inst, model) in enumerate(keys)
        for lv, c in zip(synthetic(3, seed=j), (4, 16, 64), strict=True)
    ]  # fmt: skip
    steps = step_levels(levels)
    t = time.perf_counter()
    learnt, left = learn(levels, steps, load_catalog())
    took = time.perf_counter() - t
    print(
        f"step fits: {len(keys)} models, {len(steps)} levels' steps ({sum(len(s.sample.steps) for s in steps)} steps):"
        f" {took:.1f} s ({took / max(len(keys), 1):.1f} s a model: one fit on all its steps, one per level held out);"
        f" {len(learnt)} fitted, {len(left)} past the budget"
    )
    for key, sc in learnt.items():
        print(
            f"  {key}: step error {sc.fitted.mdape_before:.1%} -> {sc.fitted.mdape_after:.1%}, {sc.fitted.steps} steps"
        )


if __name__ == "__main__":
    import sys

    if "--step-models" in sys.argv:
        step_fits(int(sys.argv[sys.argv.index("--step-models") + 1]))
    else:
        main()
