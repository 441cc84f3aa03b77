"""First-party reference data from the real engine, and the estimator held out on it.

    make engine                      # the venv and models (SIZING_ENGINE_SHAPES=tiny-qwen,tiny-llama,small-llama)
    taskset -c 1 .venv/bin/python benchmarks/engine.py measure [--shapes ...] [--quick] [--csv FILE]
    # vLLM's own CPU layout (the model alone on core 0): SIZING_ENGINE_FRONTEND_CORE=1 before `measure`
    .venv/bin/python benchmarks/engine.py holdout [--csv benchmarks/results/engine-grid.csv]
    taskset -c 1 .venv/bin/python benchmarks/engine.py frontend   # the API server's CPU a request and a token
    taskset -c 1 .venv/bin/python benchmarks/engine.py repeat     # the short run in rounds minutes apart
    setsid taskset -c 1 .venv/bin/python benchmarks/engine.py windows [--rate 0.5 --windows 6]  # one Poisson level
    .venv/bin/python benchmarks/engine.py arrivals [--line N]  # a windows level on its own arrivals, four profiles
    setsid taskset -c 1 .venv/bin/python benchmarks/engine.py learning [--fresh]  # sizing run --endpoint, scored
    setsid taskset -c 1 .venv/bin/python benchmarks/engine.py steps --measure [--shape tiny-llama]  # ~6 minutes
    .venv/bin/python benchmarks/engine.py holdout --train steps [--records FILE]

`measure` serves each model shape in turn on the local vLLM CPU engine (engine/engine.sh: core 0) and measures a
grid with the product's own load generator (run this client on another core): for each (prompt, answer) length,
closed loops of 1-64 streams, then Poisson arrivals at fractions of the rate the 64-stream loop sustained (up to
saturation). Each level becomes one row in the reference CSV format (`sizing.perf.calrows.CalRow`, origin
`loadtest`) with the engine version, the date and the CPU in its source, and the server's own KV capacity; the full
step records go beside it (`engine-grid-steps.jsonl`). The short run the holdout fits on (one shape, at most 4
streams, under 2 minutes) is measured first.

`holdout` fits the CPU profile (sizing.perf.fit.fit_group, the literature prior) on the short run only (`--train
warm-steps`: then its step factors on the engine steps the short run's levels took), predicts
every other row, and prints per metric the median absolute percentage error, the share predicted faster than
measured and the coverage of the product's stated 80% interval for the family, with TTFT above 50% utilisation
apart (Poisson levels at >= 0.5 of the saturated rate). A Poisson row is predicted as its window read it
(`sizing.perf.fit.row_windows`), and the holdout says whether each measured figure lies in its windows' 10th-90th
percentile and how far one window lies from its level; `--groups` simulates a closed loop in the lock-step groups its
row states. No timed assertion: figures to read.

`windows` measures one Poisson level in consecutive windows on one engine (`engine-poisson-windows-INSTANCE.jsonl`):
each window's TTFT, TPOT, the next request's TPOT correlation and throughput, and the spread across windows.

`arrivals` simulates a level `windows` measured with the arrival times and lengths its requests were sent with,
under the short run's profile (alone and with its steps), the shipped one and one fitted to the level's own steps:
the draw taken out, what the step time and the scheduler's dynamics each leave (docs/engine.md, "Queueing on the
engine's own arrivals").

`frontend` reads the API server's own CPU time (its `process_cpu_seconds_total`) at one stream and answers of 1,
32 and 128 tokens and under Poisson arrivals, and fits its share of a core as an idle share plus a cost per request
and per output token: where it shares the model's core, the time the model does not get (`sizing.perf.engines`).

`repeat` starts the engine, warms it as `measure` does, and measures the short run's levels in rounds a minute or
more apart: each round's means with their intervals, and the spread across rounds against `REPEAT_TOLERANCE`.

`steps --measure` serves one shape, warms it, and measures closed loops and Poisson levels of two prompt lengths
keeping every request's record (`engine-steps-SHAPE.jsonl`); `steps` rebuilds each level's engine steps from those
records (`sizing.loadtest.steps`) and sets the estimator's step time beside each: by kind of step, the measured
median and its 10th-90th percentiles against the modelled median; over all steps the median ratio and error, and a
least-squares split of both into a step's own cost, a running sequence's, a prefill token's, a prefill attention
pair's and a context token's. `holdout --train steps` fits the profile on the steps of the records' levels of at
most 4 streams (`sizing.perf.stepfit`) instead of on level averages.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CSV_PATH = RESULTS / "engine-grid.csv"
STEPS_PATH = RESULTS / "engine-grid-steps.jsonl"
#: where `measure` writes: the grid's rows and its full step records (`--csv`: another file and its `-steps.jsonl`)
OUT: dict[str, Path] = {"csv": CSV_PATH, "steps": STEPS_PATH}
ENGINE = ROOT / "engine" / "engine.sh"
MODELS = ROOT / ".engine" / "models"
# the engine tier's models are catalog models through the overlay build_models.py writes
os.environ.setdefault("SIZING_CATALOG_DIR", str(MODELS / "catalog"))

from sizing.catalog.hostcpu import ENGINE_CORES, host_cpu, this_machine  # noqa: E402
from sizing.catalog.loading import reset_cache  # noqa: E402
from sizing.loadtest import run_sweep  # noqa: E402
from sizing.loadtest.metrics import RequestRecord, StepResult, delivered_tokens, lockstep_users  # noqa: E402
from sizing.loadtest.server import probe  # noqa: E402
from sizing.loadtest.steps import EngineStep, rebuild  # noqa: E402
from sizing.perf.calibration import REFERENCE_PROFILE_ENV  # noqa: E402

#: This machine as the catalog names it (docs/engine.md, "Which instance this is"): one core of a Sapphire Rapids is
#: a c7i.large, of an EPYC Milan a c6a.large, of an EPYC Genoa an m7a.medium (`sizing.catalog.hostcpu`); None on a
#: CPU the catalog does not know, where nothing is measured unless told `--any-cpu`.
BOX = this_machine(ENGINE_CORES)
#: The reference grid's machine (engine-grid.csv and the step records beside it were measured there).
REFERENCE_PROCESSOR, REFERENCE_INSTANCE = "xeon-spr", "c7i.large"
REFERENCE = f"{REFERENCE_PROCESSOR}-{REFERENCE_INSTANCE}"
PROCESSOR, INSTANCE = (BOX.processor, BOX.instance_type) if BOX else (REFERENCE_PROCESSOR, REFERENCE_INSTANCE)
ACCELERATOR = f"{PROCESSOR}-{INSTANCE}"
#: The type engine/engine.sh serves in here unless told (SIZING_ENGINE_DTYPE): bf16 where the CPU has bf16
#: arithmetic, fp32 where it has not (docs/engine.md, "fp32 where the CPU has no bf16")
SERVED = {"bfloat16": "bf16", "float32": "fp32"}.get(
    os.environ.get("SIZING_ENGINE_DTYPE", ""),
    "bf16" if host_cpu().flags & {"amx_bf16", "avx512_bf16"} else "fp32",
)
#: Where `measure` writes and `learning` scores by default: the reference grid on its own machine, a grid of this
#: machine's own beside it on another (its rows are that instance's, never the reference's), and of its type where
#: the engine serves fp32 (the bf16 grid of such a machine stays as measured)
BOX_CSV = (
    CSV_PATH
    if PROCESSOR == REFERENCE_PROCESSOR
    else RESULTS / f"engine-grid-{INSTANCE}{'' if SERVED == 'bf16' else '-' + SERVED}.csv"
)
#: The grid: about 20 M to 300 M parameters, Qwen- and Llama-like proportions (engine/build_models.py SHAPES).
SHAPES = ("tiny-qwen", "tiny-llama", "small-llama")
#: (prompt, answer) tokens per shape: prompts 128-2,048, answers 32-256. The 296 M model's long prompts and answers
#: are cut to what one core serves in a bounded window (its 2,048-token prompts take ~1 s each to prefill here).
POINTS: dict[str, tuple[tuple[int, int], ...]] = {
    "tiny-qwen": ((128, 32), (512, 128), (2048, 256)),
    "tiny-llama": ((128, 32), (512, 128), (2048, 256)),
    "small-llama": ((128, 32), (512, 64)),
}
STREAMS = (1, 4, 16, 64)
#: Poisson rates as fractions of the rate the 64-stream closed loop sustained (its requests/s): half load, most of
#: it, and saturation.
OPEN_FRACTIONS = (0.5, 0.8, 1.0)
#: The short run the holdout fits on: one shape, one length, at most 4 streams (the issue's budget: 2 minutes).
SHORT = ("tiny-llama", (512, 128), (1, 2, 4))
#: The same budget spent on three lengths instead of one (`holdout --train lengths`: the grid's warm levels of the
#: short run's shape): one stream of 128-token and of 2,048-token prompts, then 4 streams of 512. One length cannot
#: tell a fixed per-request cost from prefill's per-token cost: fitted on the 512-token short run, the per-request
#: overhead came out at 39 ms and 128-token first tokens read 49 ms against 25 measured. Two prompt lengths at one
#: stream set the two apart (about 1.5 minutes of levels with 4 streams of 512 beside them).
SHORT_LENGTHS = ("tiny-llama", (((128, 32), 1), ((2048, 256), 1), ((512, 128), 4)))
#: The lengths run's design on the model whose weights this box reads from memory, not from its shared cache
#: (`holdout --train small`; docs/engine.md, "Repeatability": its levels repeat within 2-3%, tiny-llama's within
#: 17-21%): one stream of 128/32 and of 512/64, 4 streams of 128/32 (about 1.5 minutes of levels).
SHORT_SMALL = ("small-llama", (((128, 32), 1), ((512, 64), 1), ((128, 32), 4)))
#: A level's window and warm-up (s): long enough for a few answers of the longest length at 64 streams on one
#: core, short enough that the grid takes ~25 minutes (`--quick` halves them).
WINDOW_S, WARMUP_S = 12.0, 3.0
#: A metric's figure in `sizing.perf.simulator.Windows.means`.
WINDOW_FIGURE = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_s", "throughput": "output_tokens_per_s"}
#: Utilisation above which step simulators are known to under-predict queueing (issue: TTFT at > 50%).
BUSY = 0.5


def cpu_model() -> str:
    """This machine's CPU as every row's source names it."""
    return host_cpu().describe()


#: where the server's API process and engine core ran, when not on the model's core (`--frontend-core`), as the rows'
#: sources state it
LAYOUT_NOTE = (
    f", API server and engine core on core {os.environ['SIZING_ENGINE_FRONTEND_CORE']}"
    if os.environ.get("SIZING_ENGINE_FRONTEND_CORE")
    else ""
)


def engine(cmd: str, shape: str | None = None) -> None:
    env = {**os.environ, **({"SIZING_ENGINE_MODEL": shape, "SIZING_ENGINE_SHAPES": shape} if shape else {})}
    subprocess.run([str(ENGINE), cmd], check=True, env=env, cwd=ROOT)


def served_format(shape: str, facts: Any) -> str:
    """The type the engine serves `shape` in, as its KV cache says (`sizing.loadtest.server.kv_format`; the tier keeps
    `kv_cache_dtype=auto`): bf16, or fp32 on a CPU without bf16 arithmetic (engine/engine.sh). bf16 where the
    server does not say (a record from before the server's cache bytes were read)."""
    from sizing.catalog import load_catalog
    from sizing.loadtest.server import kv_format

    fmt = kv_format(facts, load_catalog().model(f"sizing-engine/{shape}").kv_bytes_per_token(1.0))
    return fmt if fmt in ("bf16", "fp32") else "bf16"


def level_id(shape: str, point: Sequence[int], target: dict[str, float]) -> str:
    """A grid level's row id before its tag (`row_of`): shape, lengths, and streams (c) or the rate asked (r)."""
    closed = "concurrency" in target
    level = target.get("concurrency") or target.get("rate_rps")
    return f"E-{shape}-{point[0]}x{point[1]}-{'c' if closed else 'r'}{level:g}"


def row_of(shape: str, point: tuple[int, int], step: dict[str, Any], facts: Any, tag: str) -> dict[str, Any]:
    target = step["target"]
    closed = "concurrency" in target
    group = lockstep_users(step.get("lockstep_group"))
    level = target.get("concurrency") or target.get("rate_rps")
    return {
        "row_id": level_id(shape, point, target) + tag,
        "source": f"first-party: benchmarks/engine.py, vLLM {facts.version} (CPU) on {cpu_model()}, {date.today()}"
        + LAYOUT_NOTE,
        "study": "sizing-engine",
        "engine": "vllm",
        "accelerator": ACCELERATOR,
        "tp": 1,
        "model": f"sizing-engine/{shape}",
        "quantization": served_format(shape, facts),
        "input_tokens": step.get("input_tokens") or point[0],
        "output_tokens": step.get("output_tokens") or point[1],
        "load": "concurrency" if closed else "rate",
        # a Poisson level's row states the rate its window really got (the row id keeps the one asked for): 0.84-1.20
        # of the target on the grids, and near saturation the latencies answer to the rate got
        "load_value": level if closed else StepResult.model_validate(step).sent_rps,
        "start": "together" if group > 1 else "spread",
        # the users of a lock-step group, which the loop is simulated in (`CalRow.lockstep_group`)
        "lockstep_group": group if closed and group > 1 else None,
        "max_num_seqs": facts.max_num_seqs or 128,
        "max_model_len": facts.max_model_len,
        "kv_cache_tokens": facts.kv_cache_tokens,
        "ttft_ms": (step.get("ttft_ms") or {}).get("mean"),
        "tpot_ms": (step.get("tpot_ms") or {}).get("mean"),
        "e2e_s": (step.get("e2e_s") or {}).get("mean"),
        "output_tokens_per_s": step.get("output_tokens_per_s") or None,
        "requests_per_s": step.get("requests_per_s") or None,
        # a Poisson level is predicted as its window read it (`CalRow.window_s`), a closed loop with its users
        # started over its warm-up as the load test started them (`sizing.base.spawn`)
        "warmup_s": step["warmup_s"],
        "window_s": None if closed else step["duration_s"],
        "origin": "loadtest",
        "engine_version": facts.version or "",
    }


def sweep(
    endpoint: str,
    model: str,
    point: tuple[int, int],
    mode: str,
    levels: list[float],
    window: float,
    warmup: float = WARMUP_S,
    requests: list[dict[str, Any]] | None = None,
) -> list[Any]:
    """The steps of a sweep as dicts; with `requests`, every measured request's record is appended to it too."""
    with tempfile.TemporaryDirectory() as tmp:
        steps = run_sweep(
            endpoint, model, levels, out_dir=tmp, mode=mode, input_tokens=point[0], output_tokens=point[1],
            duration_s=window, warmup_s=warmup, quiet=True, save_requests=requests is not None,
        )  # fmt: skip
        if requests is not None and (log := Path(tmp) / "requests.jsonl").exists():
            requests.extend(json.loads(line) for line in log.read_text().splitlines() if line)
    return [s.model_dump(mode="json") for s in steps]


def record(
    rows: list[dict[str, Any]], steps: list[dict[str, Any]], shape: str, point: tuple[int, int]
) -> None:
    from sizing.perf.calrows import add_rows

    # a level whose prompts the server's prefix cache already held measured the cache, not the workload: it is
    # kept in the step records (with its flag) but never becomes a reference row
    flagged = {
        id(r)
        for r, s in zip(rows, steps, strict=False)
        if any("prefix-cache" in f for f in s.get("flags", []))
    }
    good = [r for r in rows if r["ttft_ms"] and r["tpot_ms"] and id(r) not in flagged]
    add_rows(good, OUT["csv"])
    with OUT["steps"].open("a") as fh:
        for s in steps:
            fh.write(json.dumps({"shape": shape, "point": list(point), **s}) + "\n")
    for r in rows:
        print(
            f"  {r['row_id']:<34} ttft {r['ttft_ms'] or float('nan'):8.1f} ms  tpot {r['tpot_ms'] or float('nan'):7.2f} ms"
            f"  {r['output_tokens_per_s'] or 0:8.1f} tok/s  {r['requests_per_s'] or 0:6.2f} req/s",
            flush=True,
        )


#: A level's window is at least this many of its (expected) answers long, so that the answers it counts are not
#: only the short ones; a level whose answers would take longer than `MAX_E2E_S` is not measured (it would need
#: minutes of one core per level) and is said so.
WINDOW_ANSWERS = 3
MAX_E2E_S = 40.0


def grid_point(args: argparse.Namespace, shape: str, point: tuple[int, int], model: str, facts: Any,
               window: float) -> None:  # fmt: skip
    """One (prompt, answer) length: closed loops of growing streams, each window sized from the last level's e2e,
    then Poisson arrivals at fractions of the highest closed-loop rate."""
    prev: dict[str, Any] | None = None
    best_rps = 0.0
    for c in STREAMS:
        e2e = 0.0 if prev is None else prev["e2e_s"]["mean"] * (c / prev["target"]["concurrency"]) ** 0.7
        if e2e > MAX_E2E_S:
            print(
                f"  {shape} {point[0]}x{point[1]} at {c} streams: answers of ~{e2e:.0f} s, not measured",
                flush=True,
            )
            break
        steps = sweep(args.endpoint, model, point, "concurrency", [c], max(window, WINDOW_ANSWERS * e2e),
                      warmup=min(20.0, max(WARMUP_S, e2e)))  # fmt: skip
        record([row_of(shape, point, s, facts, "") for s in steps], steps, shape, point)
        if not steps or not steps[0]["e2e_s"].get("mean"):
            break
        prev = steps[0]
        best_rps = max(best_rps, prev["requests_per_s"] or 0.0)
    if not best_rps or prev is None:
        return
    e2e = prev["e2e_s"]["mean"]
    for f in OPEN_FRACTIONS:
        rate = round(best_rps * f, 3)
        reqs: list[dict[str, Any]] = []
        steps = sweep(args.endpoint, model, point, "rate", [rate], max(window, WINDOW_ANSWERS * e2e, 20 / rate),
                      warmup=min(20.0, max(WARMUP_S, e2e)), requests=reqs)  # fmt: skip
        rows = [row_of(shape, point, s, facts, f"-u{f:g}") for s in steps]
        record(rows, [{**s, "arrivals": drawn_arrivals(reqs, s)} for s in steps], shape, point)


def level_requests(reqs: list[dict[str, Any]], step: dict[str, Any]) -> list[dict[str, Any]]:
    """A level's requests as `requests.jsonl` keeps them: its window's and its warm-up's (marked)."""
    return [r for r in reqs if r["step"] == step["step"]]


def window_requests(reqs: list[dict[str, Any]], step: dict[str, Any]) -> list[dict[str, Any]]:
    """The requests a level's figures count: those sent in its window."""
    return [r for r in level_requests(reqs, step) if not r.get("warmup")]


def drawn_arrivals(reqs: list[dict[str, Any]], step: dict[str, Any]) -> list[list[float]]:
    """A Poisson level's arrivals as its window drew them, small enough to keep with its step record: each answered
    request's send time from the window's opening (s; the warm-up's negative), prompt and answer tokens, in the
    order sent. `holdout` predicts the level from them (`predict_drawn`)."""
    opens = step["started_at"] + step["warmup_s"]
    mine = sorted(
        (r for r in level_requests(reqs, step) if r.get("error") is None and r.get("output_tokens")),
        key=lambda r: r["start"],
    )
    return [[round(r["start"] - opens, 4), r["input_tokens"] or 1, r["output_tokens"]] for r in mine]


#: Seconds each length of a shape is served (2 streams) after the engine starts, before anything is recorded.
WARMUP_WINDOW_S = 6.0


def warm(endpoint: str, model: str, shape: str, points: Sequence[tuple[int, int]] | None = None) -> None:
    """The first requests after a start compile the shapes they bring (~130 ms TTFT where a warm engine answers in
    ~50): every length of the shape (or `points`) is served a few times first, and nothing of it is recorded."""
    for point in points or POINTS[shape]:
        sweep(endpoint, model, point, "concurrency", [2], WARMUP_WINDOW_S, warmup=2.0)


def own_lengths(point: tuple[int, int]) -> list[tuple[int, int]] | None:
    """What `warm` serves before a command that measures `point` alone: on the machine the grid was measured on,
    every length (None), as the grid was; elsewhere `point` only (a CPU without a matrix unit was still prefilling
    the warm-up's 2,048-token prompts, ~12 s each, when the first level began)."""
    return None if PROCESSOR == REFERENCE_PROCESSOR else [point]


def parsed_points(text: str) -> list[tuple[int, int]]:
    """`--points`: "128x32,512x128" -> [(128, 32), (512, 128)]."""
    return [(int(a), int(b)) for a, b in (p.split("x") for p in text.split(",") if p)]


def raise_priority() -> None:
    """Best effort: this client's session at the highest CFS priority, autogroup nice -20, as engine/engine.sh puts
    the engine's, so that on a shared box neighbours' work does not take the client's core (needs root; a no-op
    otherwise). Run this client under `setsid` so that only its own session is raised."""
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text("-20")


def measure(args: argparse.Namespace) -> int:
    raise_priority()
    if args.csv != str(CSV_PATH):
        OUT["csv"] = Path(args.csv)
        OUT["steps"] = OUT["csv"].with_name(OUT["csv"].stem + "-steps.jsonl")
    RESULTS.mkdir(parents=True, exist_ok=True)
    window = WINDOW_S / (2 if args.quick else 1)
    shapes = [s for s in args.shapes.split(",") if s]
    started = time.monotonic()
    order = sorted(shapes, key=lambda s: s != SHORT[0])  # the short run's shape first
    for shape in order:
        engine("stop")
        engine("start", shape)
        reset_cache()  # the start may have built the shape's model just now: the catalog read before lacks it
        facts = probe(args.endpoint)
        model = facts.served_models[0]
        print(f"{shape}: vLLM {facts.version}, KV {facts.kv_cache_tokens} tokens, {cpu_model()}", flush=True)
        points = (
            [p for p in POINTS[shape] if p in parsed_points(args.points)] if args.points else POINTS[shape]
        )
        warm(args.endpoint, model, shape, points)
        if shape == SHORT[0]:
            t0 = time.monotonic()
            steps = sweep(args.endpoint, model, SHORT[1], "concurrency", list(SHORT[2]), window)
            rows = [row_of(shape, SHORT[1], s, facts, "-short") for s in steps]
            record(rows, steps, shape, SHORT[1])
            print(f"  short run: {time.monotonic() - t0:.0f} s", flush=True)
        for point in points:
            grid_point(args, shape, point, model, facts, window)
    engine("stop")
    print(f"grid measured in {(time.monotonic() - started) / 60:.1f} min -> {OUT['csv']}")
    return 0


def _utilisation(row: Any) -> float | None:
    tag = row.row_id.rsplit("-u", 1)
    return float(tag[1]) if len(tag) == 2 and row.load == "open" else None


def training_rows(rows: list[Any], which: str) -> tuple[list[Any], list[Any]]:
    """(the short run's rows, the rows the holdout fits on): the short run as measured first after the engine
    started, or (`warm`) the grid's own levels of the short run's shape and length at <= 4 streams: the same
    budget, measured after the engine had served a few minutes (the first requests after a start include compiling
    the shapes they bring: the short run's first TTFTs read ~130 ms where warm ones read ~50)."""
    short = [r for r in rows if r.row_id.endswith("-short")]
    if which in ("lengths", "small"):
        shape, levels = SHORT_LENGTHS if which == "lengths" else SHORT_SMALL
        ids = {f"E-{shape}-{p[0]}x{p[1]}-c{c}" for p, c in levels}
        return short, [r for r in rows if r.row_id in ids]
    if which != "warm":
        return short, short
    shape, point, streams = SHORT
    name = f"E-{shape}-{point[0]}x{point[1]}-c"
    warm = [r for r in rows if r.row_id.startswith(name) and r.load == "closed" and r.load_value <= max(streams)
            and r not in short]  # fmt: skip
    return short, warm


def trained_profile(args: argparse.Namespace, rows: list[Any]) -> tuple[Any, list[Any]] | None:
    """The profile `holdout` fits (`--train`) and the rows it predicts; None when the CSV lacks its rows."""
    from sizing.perf.calibration import family_of, profile_for
    from sizing.perf.fit import FAMILY_SIGMA, PRIOR, _profile, _theta, fit_group

    if args.train == "none":
        data = holdout_profiles(args)
        measured_rows = [r for r in rows if not r.row_id.endswith("-short")]
        if not measured_rows:
            print(f"holdout: {args.csv} has no levels to predict")
            return None
        prof = profile_for(measured_rows[0].accelerator, "vllm", data)
        print(f"predicted by profile {data.get('version')} ({prof.basis}):")
        return prof, measured_rows
    if args.train == "steps":
        prof, ids = step_trained(args)
        return prof, [r for r in rows if not r.row_id.endswith("-short") and r.row_id not in ids]
    short, train = training_rows(rows, "warm" if args.train == "warm-steps" else args.train)
    test = [r for r in rows if r not in train and r not in short]
    if not train or not test:
        print(f"holdout: {args.csv} has {len(train)} short-run rows and {len(test)} others; measure first")
        return None
    family = family_of(train[0].accelerator)  # the grid's processor, whose bands the holdout states
    theta = fit_group(train, _theta(PRIOR), FAMILY_SIGMA, family, "vllm")
    print(f"fitted on {len(train)} short-run rows ({', '.join(r.row_id for r in train)}):")
    levels = _profile(theta, family, "vllm", "fit on the short run")
    if args.train == "warm-steps":
        return short_run_steps(args, train, levels), test
    return levels, test


def short_run_steps(args: argparse.Namespace, train: list[Any], levels: Any) -> Any:
    """(`holdout --train warm-steps`) The short run's profile with its four step factors fitted to the engine steps
    its own levels took (the step samples the grid keeps beside its CSV, `-steps.jsonl`: rebuilt from the client's
    records, `sizing.loadtest.steps`), from the level fit's factors (`sizing.perf.stepfit.fit_steps`); the
    per-request cost stays the level fit's. A level's mean TPOT mixes every step its requests shared; its steps
    set the cost of each running sequence apart from the step's own (docs/engine.md, "Queueing on the engine's own
    arrivals")."""
    from sizing.loadtest.stepsample import StepsSample
    from sizing.perf.fit import _row_model
    from sizing.perf.stepfit import fit_steps

    path = Path(args.csv).with_name(Path(args.csv).stem + "-steps.jsonl")
    shape, point, streams = SHORT
    steps: list[EngineStep] = []
    for line in path.read_text().splitlines() if path.exists() else []:
        lv = json.loads(line)
        conc = lv["target"].get("concurrency")
        if lv["shape"] == shape and tuple(lv["point"]) == point and conc and conc <= max(streams):
            sample = lv.get("engine_steps")
            steps += [s for s in StepsSample(**sample).engine_steps() if s.duration_s] if sample else []
    if not steps:
        print(f"  no engine steps of the short run in {path.name}: the level fit alone")
        return levels
    fit = fit_steps(steps, lambda p: _row_model(train[0], p, 0), levels)
    print(f"  then its step factors fitted to the {fit.steps:,} steps its levels took ({path.name}): modelled within"
          f" {fit.mdape_before:.1%} -> {fit.mdape_after:.1%} (median); the per-request cost is the levels'")  # fmt: skip
    return dataclasses.replace(
        fit.profile,
        request_overhead_s=levels.request_overhead_s,
        basis="fit on the short run's levels and steps",
    )


def holdout_profiles(args: argparse.Namespace) -> dict[str, Any]:
    """The calibration `holdout` states its intervals from, and `--train none` predicts with: `--profile`'s, else
    the shipped one (read once: `load_profiles` caches it)."""
    from sizing.perf.calibration import load_profiles

    return load_profiles(args.profile) if getattr(args, "profile", None) else load_profiles()


@dataclasses.dataclass
class Cover:
    """`holdout`'s tally of the stated 80% intervals per metric: whether each holds its measurement and how wide it
    is (high / low), as stated (a latency's with its amplification, `sizing.perf.amplification`) and, for the
    latencies, as it would be stated without it (`flat`)."""

    inside: dict[str, list[bool]] = dataclasses.field(default_factory=dict)
    width: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    flat: dict[str, list[bool]] = dataclasses.field(default_factory=dict)
    flat_width: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def add(self, key: str, value: float, stated: dict[str, Any] | None, flat: dict[str, Any] | None) -> None:
        for iv, held, wide in ((stated, self.inside, self.width), (flat, self.flat, self.flat_width)):
            if iv:
                held.setdefault(key, []).append(iv["low"] <= value <= iv["high"])
                wide.setdefault(key, []).append(iv["high"] / iv["low"] if iv["low"] > 0 else math.inf)

    def print_widths(self) -> None:
        def median(values: list[float] | None) -> str:
            return f"{statistics.median(values):.1f}x" if values else "-"

        print("median width of the stated interval (high/low), amplified / unamplified: " + ", ".join(
            f"{k} {median(w)} / {median(self.flat_width.get(k))}" for k, w in self.width.items()))  # fmt: skip


def drawn_levels(csv: Path) -> dict[str, dict[str, Any]]:
    """The grid's Poisson levels whose step records keep the arrivals their windows drew (`drawn_arrivals`), by
    their row id less its utilisation tag (`row_of`)."""
    path = csv.with_name(csv.stem + "-steps.jsonl")
    out = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        lv = json.loads(line)
        if "rate_rps" in lv["target"] and lv.get("arrivals"):
            out[level_id(lv["shape"], lv["point"], lv["target"])] = lv
    return out


def predict_drawn(row: Any, prof: Any, lv: dict[str, Any], metrics: Any) -> dict[str, float]:
    """A Poisson level predicted from the arrivals its window drew, not from its rate: every request replayed as it
    was sent, the warm-up's included (`replayed`), and read as the load test reads a window: the means over the
    requests sent in it, and the tokens delivered in it (`sizing.loadtest.metrics.delivered_tokens`, each answer's
    tokens evenly spaced after its first). One window of 13-200 requests is one draw of arrivals
    (docs/engine.md, "A Poisson window is one draw"); predicted from its rate, a level errs by that draw too."""
    from sizing.perf.fit import _row_model

    a = np.array(lv["arrivals"], dtype=float)
    sent, inp, out = a[:, 0], a[:, 1].astype(np.int64), a[:, 2].astype(np.int64)
    per = replayed(sent, inp, out, _row_model(row, prof, 0))
    window = lv["duration_s"]
    inside = (sent >= 0) & (sent < window)
    # each simulated answer as the client would have recorded it, its tokens evenly spaced after the first
    answers = [
        RequestRecord(
            start=t0,
            end=t0 + e2e,
            ttft_s=ttft / 1e3,
            itl_s=[(e2e - ttft / 1e3) / max(n - 1, 1)] * (n - 1),
            output_tokens=n,
        )
        for t0, ttft, e2e, n in zip(
            sent.tolist(), per["ttft_ms"].tolist(), per["e2e_s"].tolist(), out.tolist(), strict=True
        )
    ]
    got = {
        "ttft": float(np.mean(per["ttft_ms"][inside])),
        "tpot": float(np.nanmean(per["tpot_ms"][inside])),
        "e2e": float(np.mean(per["e2e_s"][inside])),
        "throughput": delivered_tokens(answers, 0.0, window) / window,
    }
    return {k: v for k, v in got.items() if k in metrics}


def predicted(
    row: Any, prof: Any, lv: dict[str, Any] | None, groups: bool, want: dict[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """A held-out level's prediction of the metrics it measured (`want`; from the arrivals its window drew where
    `lv` keeps them, `predict_drawn`) and each latency's amplification there (`sizing.perf.amplification`)."""
    from sizing.perf.amplification import amplifications, slower_steps
    from sizing.perf.fit import predict_row

    def predict(p: Any) -> dict[str, float]:
        return predict_drawn(row, p, lv, want) if lv else predict_row(row, p, in_groups=groups)

    got = predict(prof)
    return got, amplifications(got, predict(slower_steps(prof)))


def holdout(args: argparse.Namespace) -> int:
    from sizing.perf.calibration import interval_for, stated_interval
    from sizing.perf.calrows import read_rows
    from sizing.perf.fit import measured

    rows = read_rows(Path(args.csv))
    trained = trained_profile(args, rows)
    if trained is None:
        return 2
    prof, test = trained
    print("  " + ", ".join(f"{k} {v:.4g}" for k, v in prof.params().items()))
    bands = interval_for(prof.family, "vllm", holdout_profiles(args))
    errs: dict[str, list[float]] = {}
    faster: dict[str, list[bool]] = {}
    cover = Cover()
    lines = []
    by_shape: dict[tuple[str, str], list[float]] = {}
    in_band: dict[str, list[bool]] = {}
    scatter: dict[str, list[float]] = {}
    drawn = {} if args.asked else drawn_levels(Path(args.csv))
    replays = 0
    for r in test:
        want = measured(r)
        lv = drawn.get(r.row_id.rsplit("-u", 1)[0]) if r.load == "open" else None
        replays += lv is not None
        got, amp = predicted(r, prof, lv, args.groups, want)
        windows = window_draws(r, prof, want, in_band, scatter)
        busy = (_utilisation(r) or 0.0) >= BUSY
        for metric, value in want.items():
            p = got.get(metric)
            if p is None or not value:
                continue
            keys = [metric] + (["ttft>50%"] if metric == "ttft" and busy else [])
            for k in keys:
                errs.setdefault(k, []).append(abs(p - value) / value)
                # faster: a latency predicted lower, a throughput predicted higher, than measured
                faster.setdefault(k, []).append(p < value if metric != "throughput" else p > value)
                cover.add(
                    k,
                    value,
                    stated_interval(p, metric, bands, amplification=amp.get(metric)),
                    stated_interval(p, metric, bands) if metric in amp else None,
                )
            band = windows.band(WINDOW_FIGURE[metric]) if windows is not None else None
            one = f"  one window {band[0]:9.2f}-{band[1]:9.2f}" if band else ""
            amplified = f"  amplified x{amp[metric]:.2f}" if amp.get(metric, 1.0) > 1.0 else ""
            lines.append(
                f"  {r.row_id:<34} {metric:<10} measured {value:9.2f}  predicted {p:9.2f}{one}{amplified}"
            )
            by_shape.setdefault((r.model.split("/")[-1], metric), []).append(p / value)
    if args.verbose:
        print("\n".join(lines))
    print(
        f"\nheld out: {len(test)} rows; the stated 80% interval is the product's for the family ({bands['tpot'].get('basis', '-')})"
    )
    if replays:
        print(
            f"{replays} Poisson levels predicted from the arrivals their windows drew (--asked: from their rates)"
        )
    print_scores(errs, faster, cover.inside, cover.flat)
    cover.print_widths()
    if in_band:
        print_window_draws(in_band, scatter)
    print("\nmedian predicted/measured per shape, and the median error:")
    for (shape, metric), shares in sorted(by_shape.items()):
        mdape = 100 * statistics.median(abs(x - 1) for x in shares)
        print(
            f"  {shape:<12} {metric:<10} {statistics.median(shares):5.2f}  {mdape:5.1f}% ({len(shares)} levels)"
        )
    return 0


def print_scores(
    errs: dict[str, list[float]],
    faster: dict[str, list[bool]],
    inside: dict[str, list[bool]],
    flat: dict[str, list[bool]] | None = None,
) -> None:
    """The holdout's table: per metric, levels, MdAPE, the share predicted faster and the stated interval's cover
    (and, `flat`, the cover of the latencies' intervals without their amplification)."""
    print(f"{'metric':<11} {'n':>4} {'MdAPE':>7} {'faster':>7} {'in 80%':>7} {'unamplified':>12}")
    for k in ("ttft", "tpot", "throughput", "e2e", "ttft>50%"):
        if k not in errs:
            continue
        n = len(errs[k])
        cover = f"{100 * sum(inside[k]) / len(inside[k]):6.0f}%" if inside.get(k) else "      -"
        was = (flat or {}).get(k)
        before = f"{100 * sum(was) / len(was):11.0f}%" if was else "           -"
        print(
            f"{k:<11} {n:>4} {100 * statistics.median(errs[k]):6.1f}% {100 * sum(faster[k]) / n:6.0f}% {cover}"
            f" {before}"
        )


def window_draws(
    row: Any,
    prof: Any,
    want: dict[str, float],
    in_band: dict[str, list[bool]],
    scatter: dict[str, list[float]],
) -> Any:
    """A Poisson level read in a window (`sizing.perf.fit.row_windows`; None for any other row): whether each
    measured figure is one the windows' draws give (their 10th-90th percentile), into `in_band`, and how far one
    window lies from the level's own figure, into `scatter`."""
    from sizing.perf.fit import row_windows

    windows = row_windows(row, prof)
    if windows is None:
        return None
    for metric, value in want.items():
        lo, hi = windows.band(WINDOW_FIGURE[metric])
        in_band.setdefault(metric, []).append(lo <= value <= hi)
        scatter.setdefault(metric, []).append(windows.scatter(WINDOW_FIGURE[metric]))
    return windows


def print_window_draws(in_band: dict[str, list[bool]], scatter: dict[str, list[float]]) -> None:
    print(
        f"\n{len(in_band.get('ttft', []))} Poisson levels, each simulated as its window read it: the windows' own"
        " 10th-90th percentile (one draw of arrivals to the next) holds the measured figure for "
        + ", ".join(f"{k} {sum(v)} of {len(v)}" for k, v in in_band.items())
    )
    print(
        "  one window's median distance from its level's own figure (what an exact prediction errs by against"
        " one window; the median over those levels): "
        + ", ".join(f"{k} {100 * statistics.median(v):.1f}%" for k, v in scatter.items())
    )


def step_trained(args: argparse.Namespace) -> tuple[Any, set[str]]:
    """(`holdout --train steps`) The CPU profile fitted on the engine's own steps at the short run's budget: the
    closed-loop levels of at most `SHORT`'s streams in the step records (`--records`, one shape), their steps
    rebuilt from the client's records, the four step factors fitted from the literature prior
    (`sizing.perf.stepfit`), the per-request cost from first tokens at an idle engine; and the row ids of the grid's
    own levels of the same shape, length and streams, which the holdout leaves out."""
    from sizing.perf.fit import PRIOR, _profile, _theta
    from sizing.perf.stepfit import fit_steps, request_overhead

    path = Path(args.records or records_path("small-llama"))
    levels = [json.loads(line) for line in path.read_text().splitlines() if line]
    short = [lv for lv in levels if lv["target"].get("concurrency", float("inf")) <= max(SHORT[2])]
    shape = short[0]["shape"]
    prior = _profile(_theta(PRIOR), "xeon-spr", "vllm", "fit on the short run's steps")
    steps = [s for lv in short for s in rebuild([RequestRecord.from_row(r) for r in lv["records"]])]
    fit = fit_steps(steps, lambda p: _step_model(shape, p), prior)
    one = [
        RequestRecord.from_row(r) for lv in short if lv["target"]["concurrency"] == 1 for r in lv["records"]
    ]
    overhead = request_overhead(one, _step_model(shape, fit.profile))
    prof = dataclasses.replace(fit.profile, request_overhead_s=overhead or fit.profile.request_overhead_s)
    window = sum(lv["duration_s"] for lv in short)
    print(f"fitted on the steps of {len(short)} {shape} levels at <= {max(SHORT[2])} streams ({path.name},"
          f" {window:.0f} s of windows): {fit.steps} steps timed, modelled within {100 * fit.mdape_before:.1f}% ->"
          f" {100 * fit.mdape_after:.1f}% (median), the request's own cost from {len(one)} one-stream first tokens")  # fmt: skip
    ids = {f"E-{shape}-{lv['point'][0]}x{lv['point'][1]}-c{lv['target']['concurrency']:g}" for lv in short}
    return prof, ids


#: The learning loop's workload: the engine's default model at a few requests a second, on this machine's hardware.
LEARNING_SPEC = {
    "name": "engine-learning",
    "model": "sizing-engine/tiny-llama",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"mean": 512, "p95": 700}, "output": {"mean": 128, "p95": 170}},
    "slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 30}},
    "constraints": {"region": "us-east-1", "deployments": ["eks"], "capacity": ["on-demand"],
                    "quantizations": ["bf16"], "engines": ["vllm"], "min_replicas": 1},
}  # fmt: skip
#: `learning --shape`: the spec per model. small-llama serves about six 128/32 requests a second at most here (its
#: 64-stream loop), so its run asks for 128/32 at 2 a second; it reads its weights from memory and repeats within
#: 2-3% ("Repeatability"), where tiny-llama's cache-resident weights move by a fifth from minute to minute.
LEARNING_SPECS: dict[str, dict[str, Any]] = {
    "tiny-llama": LEARNING_SPEC,
    "small-llama": {
        **LEARNING_SPEC,
        "name": "engine-learning-small",
        "model": "sizing-engine/small-llama",
        "tokens": {"input": {"mean": 128, "p95": 170}, "output": {"mean": 32, "p95": 45}},
    },
}


#: Repeatability tolerance: a level measured again minutes later on this shared box (client and engine pinned to
#: their own cores) should agree within this share on TPOT and throughput, and within twice it on TTFT, whose
#: small absolute values move most with a neighbour's load (assumed from the engine tier's own spread: TPOT at one
#: stream ranged 6-18 ms across runs on a busy box, docs/engine.md).
REPEAT_TOLERANCE = 0.15


def repeatability(args: argparse.Namespace) -> None:
    """The short run's levels measured again (the engine serving the same model) against the grid's own."""
    from sizing.perf.calrows import read_rows

    first = {r.load_value: r for r in read_rows(Path(args.csv)) if r.row_id.endswith("-short")}
    if not first:
        return
    facts = probe(args.endpoint)
    steps = sweep(args.endpoint, facts.served_models[0], SHORT[1], "concurrency", list(SHORT[2]), WINDOW_S)
    print(
        f"repeatability (the short run again; tolerance {REPEAT_TOLERANCE:.0%}, TTFT {2 * REPEAT_TOLERANCE:.0%}):"
    )
    for s in steps:
        c = s["target"]["concurrency"]
        was = first.get(c)
        if was is None or not s["tpot_ms"].get("mean"):
            continue
        diffs = {
            "ttft": s["ttft_ms"]["mean"] / was.ttft_ms - 1 if was.ttft_ms else float("nan"),
            "tpot": s["tpot_ms"]["mean"] / was.tpot_ms - 1 if was.tpot_ms else float("nan"),
            "tok/s": s["output_tokens_per_s"] / was.output_tokens_per_s - 1
            if was.output_tokens_per_s
            else float("nan"),
        }
        print(f"  {c:g} streams: " + ", ".join(f"{k} {v:+.0%}" for k, v in diffs.items()))


#: `repeat`: rounds of the short run on one engine and the pause between them (s), so that the last round is measured
#: minutes after the first (each round is three 15 s levels).
REPEAT_ROUNDS, REPEAT_PAUSE_S = 3, 60.0
#: The confidence of a round's interval of a mean (normal approximation over its requests; a closed loop's requests
#: are not independent, so it is a lower bound of the uncertainty).
Z95 = 1.96


def _mean_ci(values: list[float]) -> tuple[float, float]:
    """A mean and its 95% half-width (0 for a single value)."""
    m = statistics.fmean(values)
    return m, (Z95 * statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0)


def started(endpoint: str, shape: str, point: tuple[int, int], level: str) -> str:
    """The engine (re)started serving `shape` and warmed for `point` as the grid's is; says what it serves (and the
    `level` about to be measured). Returns the served model's name; the caller stops the engine."""
    engine("stop")
    engine("start", shape)
    facts = probe(endpoint)
    model = str(facts.served_models[0])
    print(f"{shape} {point[0]}/{point[1]}{level}: vLLM {facts.version}, {cpu_model()}{LAYOUT_NOTE},"
          f" load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    warm(endpoint, model, shape, own_lengths(point))
    return model


def repeat(args: argparse.Namespace) -> int:
    """The short run's levels measured in rounds minutes apart on one engine, started and warmed as the grid's
    is: per level, each round's TTFT and TPOT means with their 95% intervals from the round's requests and its
    throughput, then the spread across rounds (largest over smallest, less 1) against the stated tolerance. A spread
    well beyond the rounds' own intervals is the box or the engine moving, not sampling."""
    raise_priority()
    prompt, answer = (int(x) for x in args.point.split("/"))
    shape, point, streams = args.shape, (prompt, answer), SHORT[2]
    rounds: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    try:
        model = started(args.endpoint, shape, point, "")
        for i in range(args.rounds):
            if i:
                time.sleep(args.pause)
            reqs: list[dict[str, Any]] = []
            t = time.strftime("%H:%M:%S")
            rounds.append((sweep(args.endpoint, model, point, "concurrency", list(streams), WINDOW_S, requests=reqs),
                           reqs))  # fmt: skip
            print(f"  round {i + 1} at {t}, load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        engine("stop")
    limits = {"ttft": 2 * REPEAT_TOLERANCE, "tpot": REPEAT_TOLERANCE, "tok/s": REPEAT_TOLERANCE}
    print(f"\nrepeatability: {args.rounds} rounds {args.pause:g} s apart (tolerance: TPOT and throughput"
          f" {REPEAT_TOLERANCE:.0%}, TTFT {2 * REPEAT_TOLERANCE:.0%}); mean +- 95% interval (requests)")  # fmt: skip
    worst = 0
    for k, c in enumerate(streams):
        cells: dict[str, list[str]] = {m: [] for m in limits}
        values: dict[str, list[float]] = {m: [] for m in limits}
        for steps, reqs in rounds:
            step = steps[k]
            mine = [RequestRecord.from_row(r) for r in window_requests(reqs, step) if r.get("error") is None]
            ttft = [r.ttft_s * 1e3 for r in mine if r.ttft_s is not None]
            tpot = [s * 1e3 for r in mine if (s := r.tpot_s) is not None]
            for name, vals in (("ttft", ttft), ("tpot", tpot)):
                if vals:
                    m, h = _mean_ci(vals)
                    values[name].append(m)
                    cells[name].append(f"{m:6.1f} +-{h:4.1f} ({len(vals)})")
            values["tok/s"].append(step["output_tokens_per_s"])
            cells["tok/s"].append(f"{step['output_tokens_per_s']:6.1f}")
        for name, limit in limits.items():
            vals = values[name]
            spread = max(vals) / min(vals) - 1 if vals and min(vals) > 0 else float("nan")
            ok = spread <= limit
            worst += not ok
            print(f"  {c:g} streams  {name:6s} " + "   ".join(cells[name])
                  + f"   spread {spread:.0%} {'within' if ok else 'over'} {limit:.0%}")  # fmt: skip
    return 0 if worst == 0 else 1


#: `windows`: where a Poisson level measured in consecutive windows is kept (steps and request records, a line per
#: call), and the grid's own window and warm-up for a 128/32 Poisson level on a slow core.
WINDOWS_PATH = RESULTS / f"engine-poisson-windows-{INSTANCE}.jsonl"
POISSON_WINDOW_S, POISSON_WARMUP_S = 50.0, 17.0


def lag1(values: Sequence[float]) -> float:
    """The correlation of each value with the next (in the order sent); NaN with fewer than three."""
    if len(values) < 3:
        return float("nan")
    return float(np.corrcoef(values[:-1], values[1:])[0, 1])


def windows(args: argparse.Namespace) -> int:
    """One Poisson level measured in consecutive windows on one engine, started and warmed as the grid's is: each
    window's requests, TTFT, TPOT (mean +- the 95% interval its requests give as if independent), the correlation of
    each request's TPOT with the next one's, and throughput; then the spread across windows. Kept in WINDOWS_PATH
    (docs/engine.md, "A Poisson window is one draw")."""
    raise_priority()
    prompt, answer = (int(x) for x in args.point.split("/"))
    shape, point = args.shape, (prompt, answer)
    reqs: list[dict[str, Any]] = []
    try:
        model = started(args.endpoint, shape, point, f" at {args.rate:g}/s")
        steps = sweep(args.endpoint, model, point, "rate", [args.rate] * args.windows, args.window,
                      warmup=args.warmup, requests=reqs)  # fmt: skip
    finally:
        engine("stop")
    with WINDOWS_PATH.open("a") as fh:
        fh.write(json.dumps({"shape": shape, "point": list(point), "rate": args.rate, "cpu": cpu_model(),
                             "date": str(date.today()), "steps": steps, "records": reqs}) + "\n")  # fmt: skip
    print_windows(steps, reqs)
    return 0


def print_windows(steps: list[dict[str, Any]], reqs: list[dict[str, Any]]) -> None:
    figures: dict[str, list[float]] = {"ttft": [], "tpot": [], "tok/s": []}
    for step in steps:
        mine = [RequestRecord.from_row(r) for r in window_requests(reqs, step) if r.get("error") is None]
        mine.sort(key=lambda r: r.start)
        tpot = [t * 1e3 for r in mine if (t := r.tpot_s) is not None]
        m, h = _mean_ci(tpot) if len(tpot) > 1 else (float("nan"), float("nan"))
        figures["ttft"].append(step["ttft_ms"]["mean"])
        figures["tpot"].append(m)
        figures["tok/s"].append(step["output_tokens_per_s"])
        print(f"  window {step['step'] + 1}: {step['requests']:3d} requests, TTFT {step['ttft_ms']['mean']:8.1f} ms,"
              f" TPOT {m:7.1f} +-{h:6.1f} ms (as if independent; next request's TPOT correlates {lag1(tpot):.2f}),"
              f" {step['output_tokens_per_s']:6.1f} tokens/s")  # fmt: skip
    for name, vals in figures.items():
        print(
            f"  {name:6s} across windows: {min(vals):.1f}-{max(vals):.1f} (largest over smallest {max(vals) / min(vals):.1f}x)"
        )


#: `arrivals`: the profiles a measured level's own arrivals are replayed under, in the order printed.
ARRIVAL_PROFILES = ("short run", "short run+steps", "shipped", "its own steps")


def arrival_profiles(lv: dict[str, Any], csv: Path) -> dict[str, Any]:
    """The profiles `arrivals` simulates a level under: fitted on the grid's warm short run (the holdout's
    `--train warm`), the same with its step factors fitted to the short run's own steps (`--train warm-steps`), the
    shipped calibration's for the grid's processor, and the shipped one with its step factors
    fitted to the level's own engine steps (`sizing.perf.stepfit.fit_steps`): the step time as this run measured
    it, so that only the scheduler's dynamics are left to differ."""
    from sizing.perf.calibration import profile_for
    from sizing.perf.calrows import read_rows
    from sizing.perf.fit import _row_model
    from sizing.perf.stepfit import fit_steps

    rows = read_rows(csv)
    model = f"sizing-engine/{lv['shape']}"
    row = next((r for r in rows if r.model == model), None)
    if row is None:
        raise SystemExit(f"arrivals: {csv.name} has no level of {model} to take its deployment from (--csv)")
    ns = argparse.Namespace(train="warm", csv=str(csv), profile=None)
    short = trained_profile(ns, rows)
    # the short run's steps refine the same level fit (`--train warm-steps`), not a second one
    short_steps = short_run_steps(ns, training_rows(rows, "warm")[1], short[0]) if short else None
    shipped = profile_for(row.accelerator, "vllm")
    timed = [s for s in rebuild([RequestRecord.from_row(r) for r in lv["records"] if r.get("error") is None])
             if s.duration_s]  # fmt: skip
    own = fit_steps(timed, lambda p: _row_model(row, p, 0), shipped)
    print(f"  its own {own.steps:,} timed steps: modelled/measured MdAPE {own.mdape_before:.1%} with the shipped"
          f" profile, {own.mdape_after:.1%} fitted to them")  # fmt: skip
    profiles = dict(
        zip(ARRIVAL_PROFILES, (short[0] if short else None, short_steps, shipped, own.profile), strict=True)
    )
    return {"row": row, **{k: v for k, v in profiles.items() if v is not None}}


def replayed_level(records: list[RequestRecord], sm: Any) -> dict[str, np.ndarray]:
    """Each request's TTFT (ms), TPOT (ms) and e2e (s), simulated with the arrival times and lengths it was sent
    with (`sizing.perf.simulator.Replay` at the records' own rate), in the order sent."""
    return replayed(
        np.array([r.start for r in records]),
        np.array([r.input_tokens or 1 for r in records]),
        np.array([r.output_tokens or 1 for r in records]),
        sm,
    )


def replayed(sent: np.ndarray, inp: np.ndarray, out: np.ndarray, sm: Any) -> dict[str, np.ndarray]:
    """`replayed_level` from the send times (s, ascending) and lengths of its requests."""
    from sizing.base.distributions import TokenDistribution
    from sizing.perf.simulator import Replay, simulate
    from sizing.traces.replay import TraceReplay

    t = sent - sent[0]
    n = t.size
    trace = TraceReplay(
        key=f"measured-{n}-{t[-1]:.3f}-{int(inp.sum())}",
        t=t,
        inp=inp,
        out=out,
        hit=np.zeros(n, dtype=np.int64),
        reuse_distance=np.zeros(n),
    )
    fixed = TokenDistribution.fixed(1)  # not read: a replay's lengths are the trace's
    res = simulate(sm, Replay(trace.mean_rate, trace), fixed, fixed, n_requests=n, warmup=0.0)
    return res.per_request


def arrivals(args: argparse.Namespace) -> int:
    """A Poisson level measured by `windows` (its line in WINDOWS_PATH), simulated with the arrival times and
    lengths its requests were really sent with, under each of ARRIVAL_PROFILES: what the simulator's dynamics miss
    once the draw of arrivals is no longer in question, and what its step time does (docs/engine.md, "Queueing on
    the engine's own arrivals"). Each window's mean against the simulated mean of the same requests."""
    from sizing.perf.fit import _row_model

    path = Path(args.file)
    lines = [ln for ln in path.read_text().splitlines() if ln] if path.exists() else []
    if not -len(lines) <= args.line < len(lines):
        print(f"arrivals: {path} has {len(lines)} measured levels, no line {args.line} (`windows` measures one)",
              file=sys.stderr)  # fmt: skip
        return 2
    lv = json.loads(lines[args.line])
    print(f"{lv['shape']} {lv['point'][0]}/{lv['point'][1]} at {lv['rate']:g}/s, {lv.get('date', '')}"
          f" ({len(lv['records'])} requests in {len(lv['steps'])} windows), grid {Path(args.csv).name}")  # fmt: skip
    got = arrival_profiles(lv, Path(args.csv))
    row = got.pop("row")
    kept = sorted((r for r in lv["records"] if r.get("error") is None), key=lambda r: r["start"])
    records = [RequestRecord.from_row(r) for r in kept]
    # the warm-up's requests are replayed (the engine was running them when the window opened), not counted
    window = np.array([-1 if r.get("warmup") else r["step"] for r in kept])
    measured = {
        "ttft": np.array([r.ttft_s or 0.0 for r in records]) * 1e3,
        "tpot": np.array([r.tpot_s or np.nan for r in records]) * 1e3,
        "e2e": np.array([r.e2e_s for r in records]),
    }
    simulated = {}
    for name, prof in got.items():
        per = replayed_level(records, _row_model(row, prof, 0))
        simulated[name] = {"ttft": per["ttft_ms"], "tpot": per["tpot_ms"], "e2e": per["e2e_s"]}
        print(f"  {name}: " + ", ".join(f"{k} {v:.4g}" for k, v in prof.params().items() if k in
              ("compute_eff", "bandwidth_eff", "step_overhead_s", "seq_overhead_s", "request_overhead_s")))  # fmt: skip
    print(f"  {'window':<8} {'metric':<6} {'measured':>9} " + " ".join(f"{n:>14}" for n in got))
    for w in [*sorted(set(window.tolist()) - {-1}), None]:
        mask = window == w if w is not None else window >= 0
        label = f"{w + 1} ({mask.sum()})" if w is not None else f"all ({mask.sum()})"
        for metric in ("ttft", "tpot", "e2e"):
            m = float(np.nanmean(measured[metric][mask]))
            cells = []
            for name in got:
                s = float(np.nanmean(simulated[name][metric][mask]))
                cells.append(f"{s:8.4g} {100 * (s / m - 1):+4.0f}%")
            print(f"  {label:<8} {metric:<6} {m:9.4g} " + " ".join(f"{c:>14}" for c in cells))
    return 0


def unseen_model_profile(path: Path, model: str, family: str) -> Path:
    """The shipped profile with the CPU `family` refitted on its load-test rows of every model but `model`:
    what the product would have shipped had that model never been measured on this engine (the learning loop's
    case: a team's own model on hardware the reference profile knows from others). Written to `path`."""
    from sizing.perf.calibration import PROFILE_PATH, family_of
    from sizing.perf.calrows import LOADTEST_ROWS_NAME, read_rows
    from sizing.perf.fit import FAMILY_SIGMA, PRIOR, _entry, _theta, fit_group

    data = json.loads(PROFILE_PATH.read_text())
    rows = [
        r
        for r in read_rows(PROFILE_PATH.with_name(LOADTEST_ROWS_NAME))
        if r.model != model and family_of(r.accelerator) == family
    ]
    theta = fit_group(rows, _theta(PRIOR), FAMILY_SIGMA, family, "vllm")
    for key, entry in data["profiles"].items():
        if key.startswith(f"{family}/"):
            fitted = _entry(
                theta, len(rows), f"{family} x vllm without {model} (benchmarks/engine.py learning)"
            )
            entry.update({k: v for k, v in fitted.items() if k not in ("rows", "basis")})
            entry["basis"], entry["rows"] = fitted["basis"], fitted["rows"]
    data["version"] = f"{data.get('version', 'none')}-without-{model.rsplit('/', 1)[-1]}"
    path.write_text(json.dumps(data))
    print(f"reference profile without {model}: {len(rows)} rows; " + ", ".join(
        f"{k} {data['profiles'][f'{family}/vllm'][k]}" for k in ("compute_eff", "bandwidth_eff", "step_overhead_s",
                                                                    "seq_overhead_s", "request_overhead_s")))  # fmt: skip
    return path


def score_unmeasured(
    csv: Path, shape: str, model: str, base: Any, correction: Any, keep: Callable[[Any], bool] | None = None
) -> None:
    """The grid's levels of `model` (those `keep` says), predicted by `base` before and after a `correction` (a
    stretch, or a step correction's factors) (MdAPE)."""
    from sizing.learn.correction import corrected
    from sizing.perf.calrows import read_rows
    from sizing.perf.fit import measured, predict_row

    rows = [r for r in read_rows(csv) if r.model == model and not r.row_id.endswith("-short")]
    rows = [r for r in rows if keep is None or keep(r)]
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    # a step correction replaces the profile's factors: its figures are simulated; a stretch's are its closed form
    stepped = base.with_step_factors(correction["steps"]) if correction and correction.get("steps") else None
    for r in rows:
        got = predict_row(r, base)
        new = predict_row(r, stepped) if stepped is not None else {}
        for metric, value in measured(r).items():
            if metric not in ("ttft", "tpot", "throughput") or metric not in got:
                continue
            before.setdefault(metric, []).append(abs(got[metric] - value) / value)
            p = new[metric] if metric in new else corrected(metric, got[metric], correction)
            after.setdefault(metric, []).append(abs(p - value) / value)
    print(f"\nerror at the {len(rows)} grid levels of {shape} not measured for the correction (MdAPE):")
    print(f"{'metric':<11} {'before':>8} {'after':>8}")
    for m in before:
        print(f"{m:<11} {100 * statistics.median(before[m]):7.1f}% {100 * statistics.median(after[m]):7.1f}%")
    # a Poisson level is one window's draw: how far one window lies from its level, and whether the corrected
    # prediction's windows hold the measured figure (a stretch is not simulated: the base profile's windows then)
    in_band: dict[str, list[bool]] = {}
    scatter: dict[str, list[float]] = {}
    for r in rows:
        want = {k: v for k, v in measured(r).items() if k in ("ttft", "tpot", "throughput")}
        window_draws(r, stepped if stepped is not None else base, want, in_band, scatter)
    if in_band:
        print_window_draws(in_band, scatter)


def learning(args: argparse.Namespace) -> int:
    """`sizing run --endpoint --hardware INSTANCE` (this machine's) on the engine with a profile folder, then the
    grid's rows of the same model the run did not measure, predicted before (the shipped profile) and after (its
    adopted correction)."""
    import yaml

    work = Path(tempfile.mkdtemp(prefix="engine-learning-"))
    spec = work / "spec.yaml"
    learning_spec = LEARNING_SPECS[args.shape]
    # the next estimate is read on this machine's family: its instance may be far from the cheapest answer (an EPYC
    # Milan core without a matrix unit is)
    family = INSTANCE.split(".", 1)[0]
    learning_spec = {
        **learning_spec,
        "constraints": {**learning_spec["constraints"], "instance_families": [family]},
    }
    model = str(learning_spec["model"])
    spec.write_text(yaml.safe_dump(learning_spec))
    env = {**os.environ, "SIZING_CALIBRATION_DIR": str(work / "profiles")}
    reference = None
    if args.unseen_model:
        reference = unseen_model_profile(work / "reference.json", model, PROCESSOR)
        env[REFERENCE_PROFILE_ENV] = str(reference)
    engine("stop")
    engine("start", args.shape)
    tokens = learning_spec["tokens"]
    own = own_lengths((tokens["input"]["mean"], tokens["output"]["mean"]))
    warm(
        args.endpoint, probe(args.endpoint).served_models[0], args.shape, own
    )  # as the grid was before its levels
    if args.shape == SHORT[0]:
        repeatability(args)
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "run", str(spec), "--endpoint", args.endpoint, "--hardware",
         INSTANCE, "--out", str(work / "run"), "--json"],
        env=env, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    fresh = (
        fresh_levels(args.endpoint, args.shape, work / "fresh.csv")
        if args.fresh and run.returncode == 0
        else None
    )
    engine("stop")
    if run.returncode != 0:
        print(f"sizing run failed ({run.returncode}): {run.stderr.strip()[-800:]}")
        return 1
    result = json.loads(run.stdout)
    learned = (result.get("ranking") or {}).get("learning") or {}
    print(
        f"sizing run: {time.monotonic() - t0:.0f} s; learning: {json.dumps(learned.get('refit') or learned)[:400]}"
    )
    est = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "estimate", str(spec), "--json"], env=env, capture_output=True,
        text=True, cwd=ROOT,
    )  # fmt: skip
    after_est = json.loads(est.stdout).get("architectures") or []
    cpu = [a for a in after_est if a.get("instance_type") == INSTANCE] or after_est
    if cpu:
        print(f"next estimate on {cpu[0]['instance_type']}: basis {cpu[0].get('basis')}")
    else:
        print(f"next estimate: no architecture on {family} meets the spec's SLOs (exit {est.returncode})")
    pred = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "predict", "--model", model, "--instance", INSTANCE, "--input-tokens",
         str(tokens["input"]["mean"]), "--output-tokens", str(tokens["output"]["mean"]), "--concurrency", "1",
         "--json"], env=env, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    if pred.returncode == 0:
        print(f"next prediction on {INSTANCE}: {json.loads(pred.stdout)['calibration']['basis']}")
    score_learning(args, env["SIZING_CALIBRATION_DIR"], model, reference, fresh)
    return 0


def score_learning(args: argparse.Namespace, profiles: str, model: str, reference: Path | None,
                   fresh: Path | None) -> None:  # fmt: skip
    """The adopted correction (from the profile folder `profiles`) scored at the grid's levels the run did not
    measure, and at the fresh levels where they were measured."""
    from sizing.learn.correction import lookup
    from sizing.perf.calibration import load_profiles, profile_for

    # the adopted correction, read as the next estimate reads it
    os.environ["SIZING_CALIBRATION_DIR"] = profiles
    from sizing.learn.profiles import active

    adopted = active() or {}
    hit = lookup(adopted.get("corrections") or {}, PROCESSOR, "vllm", model)
    correction = hit[1] if hit else None
    print(f"adopted: {adopted.get('version', 'none')}; correction {correction}")
    # explicit data: no team correction
    base = profile_for(ACCELERATOR, "vllm", load_profiles(str(reference)) if reference else load_profiles())
    score_unmeasured(Path(args.csv), args.shape, model, base, correction)
    if fresh is not None:
        print(f"\nthe same, at {len(FRESH_LEVELS)} levels measured on the same engine right after the run"
              " (the grid was measured earlier, and this box's speed moves from hour to hour):")  # fmt: skip
        score_unmeasured(fresh, args.shape, model, base, correction)


#: `learning --fresh`: levels of the learning model that its run does not measure (it measures 512/128 at one and
#: two streams here), measured on the same engine right after it, each (prompt, answer, streams, window s): a
#: learning run scored against a grid measured hours before scores the box's drift as well (the EPYC box's one
#: stream read TPOT 12.3 ms in the grid and 16.0 in a run four hours later).
FRESH_LEVELS = ((128, 32, 1, 15.0), (128, 32, 4, 25.0), (128, 32, 16, 50.0), (512, 128, 4, 55.0))


def fresh_levels(endpoint: str, shape: str, path: Path) -> Path:
    """`FRESH_LEVELS` measured on the engine serving `shape`, written as grid rows to `path` (a new file)."""
    facts = probe(endpoint)
    model = facts.served_models[0]
    from sizing.perf.calrows import add_rows

    rows = []
    for prompt, answer, streams, window in FRESH_LEVELS:
        point = (prompt, answer)
        warm(endpoint, model, shape, [point])
        for step in sweep(
            endpoint, model, point, "concurrency", [streams], window, warmup=min(20.0, window / 3)
        ):
            rows.append(row_of(shape, point, step, facts, "-fresh"))
    path.unlink(missing_ok=True)
    add_rows([r for r in rows if r["ttft_ms"] and r["tpot_ms"]], path)
    return path


#: `replay`'s training sets from the saved step records (`steps --measure`): what a learning run of 128/32 measures
#: (its closed loops at 1 and 4 streams, and the capacity search's Poisson levels), those closed loops alone, or
#: every saved level.
REPLAY_TRAINING = {
    "run": lambda point, target: (
        point == (128, 32) and (target.get("concurrency") in (1.0, 4.0) or "rate_rps" in target)
    ),
    "light": lambda point, target: point == (128, 32) and target.get("concurrency") in (1.0, 4.0),
    "all": lambda _point, _target: True,
}


def replay(args: argparse.Namespace) -> int:
    """The learning loop's step correction replayed on saved step records, nothing measured: from the reference
    refitted without the records' model (`unseen_model_profile`), fit the model's step factors to the training
    levels' steps as the refit does (`sizing.learn.stepcorrection.fit`, each level's steps sampled as a run keeps
    them), then score the grid's levels of that model before and after (MdAPE). The fit reads the reference from
    `SIZING_REFERENCE_PROFILE`, so it runs in a process of its own."""
    records = Path(args.records or records_path(args.shape))
    model = f"sizing-engine/{args.shape}"
    work = Path(tempfile.mkdtemp(prefix="engine-replay-"))
    reference = unseen_model_profile(work / "reference.json", model, REFERENCE_PROCESSOR)
    env = {**os.environ, REFERENCE_PROFILE_ENV: str(reference)}
    cmd = [sys.executable, __file__, "replay-fit", "--records", str(records), "--shape", args.shape, "--train",
           args.train, "--csv", args.csv] + (["--unseen-settings"] if args.unseen_settings else [])  # fmt: skip
    return subprocess.run(cmd, env=env, cwd=ROOT).returncode


def _other_settings(row: Any) -> bool:
    """A grid level of settings no `replay` training level had: not 128/32 at 1 or 4 streams or Poisson."""
    return not (row.input_tokens < 200 and (row.load != "closed" or row.load_value in (1, 4)))


def replay_fit(args: argparse.Namespace) -> int:
    from sizing.base.serving_config import ServerFacts
    from sizing.catalog import load_catalog
    from sizing.learn.levels import LevelSteps
    from sizing.learn.stepcorrection import fit
    from sizing.loadtest.steps import sample
    from sizing.perf.calibration import load_profiles, profile_for

    model = f"sizing-engine/{args.shape}"
    picked = REPLAY_TRAINING[args.train]
    items = []
    for n, line in enumerate(Path(args.records).read_text().splitlines()):
        lv = json.loads(line)
        point, target = tuple(lv["point"]), lv["target"]
        if not picked(point, target):
            continue
        lo = lv["started_at"] + lv["warmup_s"]
        kept = sample([RequestRecord.from_row(r) for r in lv["records"]], (lo, lo + lv["duration_s"]))
        conc = target.get("concurrency")
        facts = lv.get("server_facts") or {}
        items.append(LevelSteps(
            run_id="replay", candidate_id="c1", n=n, phase="levels" if conc else "capacity",
            concurrency=int(conc) if conc else None, model=model, family=REFERENCE_PROCESSOR, accelerator=REFERENCE,
            instance_type=REFERENCE_INSTANCE, tensor_parallel=1, quantization="bf16", engine="vllm",
            server_facts=ServerFacts.model_validate({"endpoint": "", **facts}) if facts else None, sample=kept,
        ))  # fmt: skip
        print(f"  {point[0]}/{point[1]} {target}: {kept.timed} timed steps, {len(kept.steps)} kept")
    fitted = fit(items, load_catalog())
    if fitted is None:
        print("too few steps to fit")
        return 1
    base = profile_for(REFERENCE, "vllm", load_profiles())
    print(f"step error {fitted.mdape_before:.1%} -> {fitted.mdape_after:.1%} over {fitted.steps} steps; factors: "
          + ", ".join(f"{k} {getattr(base, k):.4g} -> {v:.4g}" for k, v in fitted.factors.items()))  # fmt: skip
    score_unmeasured(Path(args.csv), args.shape, model, base, {"steps": fitted.factors},
                     _other_settings if args.unseen_settings else None)  # fmt: skip
    return 0


#: The API server's CPU, read at one stream of 128-token prompts with answers of these lengths, then under Poisson
#: arrivals at these rates of 128/32: request and token rates far enough apart to set the per-request cost, the
#: per-token cost and the idle share apart.
FRONTEND_OUTPUTS = (1, 32, 128)
FRONTEND_RATES = (8.0, 16.0)
FRONTEND_WINDOW_S = 15.0


def frontend(args: argparse.Namespace) -> int:
    """What the server's API process (HTTP, tokenisation, detokenisation, streaming) costs in CPU: its share of a
    core over each level's window (its own `process_cpu_seconds_total`) fitted by least squares as an idle share
    plus a cost per request and per output token, over one stream of answers of `FRONTEND_OUTPUTS` tokens and
    Poisson arrivals at `FRONTEND_RATES`. Where it shares the model's core (the engine tier's layout, a one-core
    slice) that time is the model's (`sizing.perf.engines.VLLM_CPU_FRONTEND_REQUEST_S`, `_TOKEN_S`)."""
    import numpy as np

    raise_priority()
    facts = probe(args.endpoint)
    model = facts.served_models[0]
    print(f"vLLM {facts.version} at {args.endpoint}, {cpu_model()}, load average {os.getloadavg()[0]:.1f}")
    levels = [((128, out), "concurrency", 1.0) for out in FRONTEND_OUTPUTS]
    levels += [((128, 32), "rate", rate) for rate in FRONTEND_RATES]
    samples: list[tuple[float, float, float]] = []  # (requests/s, output tokens/s, share of a core)
    for point, mode, level in levels:
        sweep(args.endpoint, model, point, mode, [level], 4.0, warmup=1.0)  # compile the lengths first
        (s,) = sweep(args.endpoint, model, point, mode, [level], FRONTEND_WINDOW_S)
        sv = s.get("server") or {}
        share, seconds = sv.get("frontend_cpu_share"), sv.get("seconds")
        print(f"  {mode} {level:g}, 128/{point[1]}: {sv.get('requests')} requests, API server"
              f" {sv.get('frontend_cpu_ms_per_request')} ms a request, {share} of a core")  # fmt: skip
        if share is not None and seconds and sv.get("requests") and sv.get("generation_tokens") is not None:
            samples.append((sv["requests"] / seconds, sv["generation_tokens"] / seconds, share))
    if len(samples) < 3:
        print("  too few levels with the server's CPU figures to fit")
        return 1
    a = np.array([[1.0, r, t] for r, t, _ in samples])
    y = np.array([x for _, _, x in samples])
    (idle, per_request, per_token), *_ = np.linalg.lstsq(a, y, rcond=None)
    worst = float(np.max(np.abs(a @ np.array([idle, per_request, per_token]) - y)))
    print(f"  share of a core = {idle:.3f} + {per_request * 1e3:.2f} ms x requests/s + {per_token * 1e3:.3f} ms x"
          f" tokens/s (least squares over {len(samples)} levels, within {worst * 100:.1f} points)")  # fmt: skip
    return 0


#: `steps`: per shape, the levels measured: (prompt, answer), closed ("concurrency") or Poisson ("rate"), the levels, the
#: window (s). Light and heavy loads of both lengths, so that decode-only steps of 1-40 sequences and steps with 1-4
#: prompts are all seen; the Poisson rates are about half and 0.8 of what the grid's 64-stream loop sustained.
STEP_PLANS: dict[str, list[tuple[tuple[int, int], str, list[float], float]]] = {
    "small-llama": [
        ((128, 32), "concurrency", [1, 4, 16], 20.0),
        ((128, 32), "rate", [2.993, 4.789], 40.0),
        ((512, 64), "concurrency", [4], 30.0),
        ((512, 64), "rate", [0.698, 1.117], 60.0),
    ],
    "tiny-llama": [
        ((512, 128), "concurrency", [1, 4, 16], 15.0),
        ((512, 128), "rate", [3.173, 5.077], 30.0),
        ((128, 32), "concurrency", [16], 15.0),
        ((128, 32), "rate", [16.0, 25.6], 30.0),
    ],
}


def records_path(shape: str) -> Path:
    return RESULTS / f"engine-steps-{shape}.jsonl"


def steps_measure(args: argparse.Namespace) -> int:
    raise_priority()
    shape = args.shape
    out = Path(args.records or records_path(shape))
    engine("stop")
    engine("start", shape)
    try:
        facts = probe(args.endpoint)
        model = facts.served_models[0]
        warm(args.endpoint, model, shape)
        with out.open("w") as fh:
            for point, mode, levels, window in STEP_PLANS[shape]:
                reqs: list[dict[str, Any]] = []
                steps = sweep(args.endpoint, model, point, mode, levels, window, requests=reqs)
                for s in steps:
                    level = {"shape": shape, "point": list(point), "vllm": facts.version, **s}
                    mine = [r for r in reqs if r["step"] == s["step"]]
                    fh.write(json.dumps({**level, "records": mine}) + "\n")
                    print(f"  {point[0]}/{point[1]} {s['target']}: {len(mine)} requests", flush=True)
    finally:
        engine("stop")
    print(f"records: {out}")
    return 0


@functools.cache
def _deployment(shape: str) -> tuple[Any, Any, Any]:
    """(config, memory fit, catalog) of the grid's deployment of `shape` (its first row in the grid CSV), read once:
    a step fit builds a step model per profile it tries."""
    from sizing.perf.calrows import read_rows
    from sizing.perf.fit import reference_catalog, row_config
    from sizing.perf.memory import memory_fit

    row = next(r for r in read_rows(CSV_PATH) if r.model == f"sizing-engine/{shape}")
    cat = reference_catalog()
    cfg = row_config(row)
    return cfg, memory_fit(cfg, cat), cat


def _step_model(shape: str, profile: Any) -> Any:
    """The estimator's step model of the grid's deployment of `shape` under `profile`."""
    from sizing.perf.step import StepModel

    cfg, fit, cat = _deployment(shape)
    return StepModel(cfg, fit, profile, cat)


def _terms(steps: list[EngineStep]) -> np.ndarray:
    """Each step's terms: 1, running sequences, prefill tokens, prefill attention pairs (each prompt from an empty
    context), context tokens decoded."""
    return np.array(
        [[1.0, s.decode_seqs, s.prefill_tokens, s.prefill_pairs, s.context_tokens] for s in steps],
        dtype=float,
    )


def _split(x: np.ndarray, y: np.ndarray) -> str:
    """Least squares of step times (ms) on the steps' terms, in relative error (each step weighs alike)."""
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return (
        f"{coef[0]:.1f} ms a step, {coef[1]:.2f} ms a running sequence, {coef[2]:.3f} ms a prefill token,"
        f" {coef[3] * 1e3:.2f} us a prefill attention pair, {coef[4] * 1e3:.2f} us a context token"
    )


def steps_compare(args: argparse.Namespace) -> int:
    from sizing.perf.calibration import load_profiles, profile_for
    from sizing.perf.stepfit import by_kind, modelled_s

    path = Path(args.records or records_path(args.shape))
    levels = [json.loads(line) for line in path.read_text().splitlines() if line]
    shape = levels[0]["shape"]
    sm = _step_model(shape, profile_for("xeon-spr", "vllm"))
    by_prompt: dict[int, list[EngineStep]] = {}
    for lv in levels:
        by_prompt.setdefault(lv["point"][0], []).extend(
            rebuild([RequestRecord.from_row(r) for r in lv["records"]])
        )
    every = [s for group in by_prompt.values() for s in group]
    timed = [s for s in every if s.duration_s]
    print(f"{shape}: {len(timed):,} steps timed of {len(every):,} rebuilt over {len(levels)} levels ({path.name});"
          f" modelled with profile {load_profiles().get('version')} xeon-spr/vllm")  # fmt: skip
    print(f"  {'step':<40} {'steps':>6} {'measured ms (p10-p90)':>26} {'modelled ms':>12} {'ratio':>6}")
    for plen, group in sorted(by_prompt.items()):
        for k in by_kind(group, sm, args.min_steps)["kinds"]:
            m = k["measured_ms"]
            cell = f"{m['p50']:7.1f} ({m['p10']:6.1f}-{m['p90']:6.1f})"
            label = f"{plen}-token prompts: {k['kind']}"
            print(f"  {label:<40} {k['steps']:>6} {cell:>26} {k['modelled_ms']:12.1f} {k['ratio']:6.2f}")
    whole = by_kind(every, sm, args.min_steps)
    lo, hi = whole["ratio_p10_p90"]
    print(f"  all steps: modelled/measured median {whole['median_ratio']:.2f} (10th-90th percentile {lo:.2f}-{hi:.2f}),"
          f" MdAPE {100 * whole['mdape']:.1f}%")  # fmt: skip
    meas = np.array([s.duration_s for s in timed], dtype=float) * 1e3
    model = np.array([modelled_s(sm, s) for s in timed]) * 1e3
    x = _terms(timed)
    print(f"  measured, least squares: {_split(x, meas)}")
    print(f"  modelled, least squares: {_split(x, model)}")
    return 0


def steps(args: argparse.Namespace) -> int:
    if args.measure:
        steps_measure(args)
    return steps_compare(args)


def holdout_parser(sub: Any) -> argparse.ArgumentParser:
    """`holdout`'s arguments."""
    h = sub.add_parser("holdout", help="fit on the short run, predict the rest")
    h.add_argument("--csv", default=str(CSV_PATH))
    h.add_argument("--verbose", action="store_true")
    h.add_argument(
        "--groups",
        action="store_true",
        help="simulate each closed loop whose users fell into lock-step in the groups its row states (the"
        " calibration sends them all at once)",
    )
    h.add_argument(
        "--records", help="`--train steps`: the step records (default: engine-steps-small-llama.jsonl)"
    )
    h.add_argument("--train", choices=("short", "warm", "warm-steps", "lengths", "small", "steps", "none"),
                   default="short",
                   help="fit on the short run as measured first after the engine started, on the grid's warm"
                   " levels of the same shape, length and streams (warm-steps: then the step factors on the steps"
                   " those levels took, kept beside the CSV), or on three of its levels of that shape that"
                   " set a request's fixed cost apart from prefill's (SHORT_LENGTHS), or on the engine's own steps"
                   " at <= 4 streams rebuilt from --records (sizing.perf.stepfit); or fit nothing (none): every"
                   " level predicted by a calibration's profile of the grid's processor (--profile), as levels"
                   " measured after that calibration are a fresh check of it")  # fmt: skip
    h.add_argument("--profile", help="`--train none`: the calibration file (default: the shipped profile)")
    h.add_argument(
        "--asked",
        action="store_true",
        help="predict every Poisson level from the rate its window got, not from the arrivals it drew (where the"
        " step records keep them: grids measured since the load test keeps a level's warm-up requests)",
    )
    return h


def windows_parser(sub: Any) -> argparse.ArgumentParser:
    """`windows`' arguments."""
    wp: argparse.ArgumentParser = sub.add_parser(
        "windows", help="one Poisson level measured in consecutive windows on one engine"
    )
    wp.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    wp.add_argument("--shape", default=SHORT[0], choices=SHAPES, help="the model shape served")
    wp.add_argument("--point", default="128/32", help="prompt/answer tokens")
    wp.add_argument("--rate", type=float, default=0.5, help="arrivals a second")
    wp.add_argument("--windows", type=int, default=6)
    wp.add_argument("--window", type=float, default=POISSON_WINDOW_S, help="seconds a window")
    wp.add_argument(
        "--warmup", type=float, default=POISSON_WARMUP_S, help="seconds of warm-up before each window"
    )
    return wp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure the grid on the local engine")
    m.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    m.add_argument("--shapes", default=",".join(SHAPES))
    m.add_argument("--quick", action="store_true", help="half-length windows")
    m.add_argument(
        "--points",
        default="",
        help="only these prompt x answer lengths, e.g. 128x32,512x128 (default: every length of each shape; a"
        " CPU without a matrix unit serves the 2,048-token prompts in ~12 s each)",
    )
    m.add_argument("--csv", default=str(BOX_CSV), help="the rows' file (its step records go beside it)")
    holdout_parser(sub)
    lp = sub.add_parser(
        "learning", help="sizing run --endpoint on the engine, then error before/after its refit"
    )
    lp.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    lp.add_argument("--csv", default=str(BOX_CSV), help="the grid scored (default: this machine's)")
    lp.add_argument(
        "--unseen-model",
        action="store_true",
        help="start from a reference profile whose CPU family never saw the run's model (refitted without its"
        " load-test rows), as a team's own model would be",
    )
    lp.add_argument("--shape", choices=tuple(LEARNING_SPECS), default="tiny-llama", help="the model served")
    lp.add_argument(
        "--fresh",
        action="store_true",
        help="measure FRESH_LEVELS on the same engine right after the run, and score the correction on them too",
    )
    fp = sub.add_parser("frontend", help="the API server's CPU per request and per output token")
    fp.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    rp = sub.add_parser(
        "repeat", help="the short run's levels measured in rounds minutes apart on one engine"
    )
    rp.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    rp.add_argument("--rounds", type=int, default=REPEAT_ROUNDS)
    rp.add_argument("--pause", type=float, default=REPEAT_PAUSE_S, help="seconds between rounds")
    rp.add_argument("--shape", default=SHORT[0], choices=SHAPES, help="the model shape served")
    rp.add_argument("--point", default=f"{SHORT[1][0]}/{SHORT[1][1]}", help="prompt/answer tokens")
    wp = windows_parser(sub)
    sp = sub.add_parser(
        "steps", help="the model's step time against the engine's steps, as the client saw them"
    )
    sp.add_argument("--shape", default="small-llama", choices=tuple(STEP_PLANS))
    sp.add_argument(
        "--records", help="the records file (default: benchmarks/results/engine-steps-SHAPE.jsonl)"
    )
    sp.add_argument("--measure", action="store_true", help="measure the shape's levels first (~6 minutes)")
    sp.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    sp.add_argument("--min-steps", type=int, default=5, help="fewest steps a kind needs to get a line")
    for p in (m, lp, fp, rp, wp, sp):
        p.add_argument(
            "--any-cpu",
            action="store_true",
            help="measure on a CPU the catalog does not know too: its rows (their source names the CPU) are this"
            " machine's, never the reference's",
        )
    ar = sub.add_parser(
        "arrivals", help="a `windows` level simulated with its own arrivals, under four profiles"
    )
    ar.add_argument("--file", default=str(WINDOWS_PATH), help="the windows file (default: this machine's)")
    ar.add_argument("--line", type=int, default=-1, help="which of its levels (default: the last measured)")
    ar.add_argument("--csv", default=str(BOX_CSV), help="the grid whose deployment and short run it reads")
    rl = sub.add_parser("replay", help="the learning loop's step correction on saved step records, scored")
    for p in (rl, sub.add_parser("replay-fit", help=argparse.SUPPRESS)):
        p.add_argument("--shape", default="small-llama", choices=tuple(STEP_PLANS))
        p.add_argument(
            "--records", help="the records file (default: benchmarks/results/engine-steps-SHAPE.jsonl)"
        )
        p.add_argument("--train", choices=tuple(REPLAY_TRAINING), default="run")
        p.add_argument("--csv", default=str(CSV_PATH))
        p.add_argument(
            "--unseen-settings", action="store_true", help="score only grid levels of other settings"
        )
    args = ap.parse_args()
    commands = {
        "measure": measure,
        "holdout": holdout,
        "learning": learning,
        "frontend": frontend,
        "repeat": repeat,
        "windows": windows,
        "arrivals": arrivals,
        "steps": steps,
        "replay": replay,
        "replay-fit": replay_fit,
    }
    measures = args.cmd in ("measure", "learning", "frontend", "repeat", "windows") or (
        args.cmd == "steps" and args.measure
    )
    reference_only = args.cmd == "frontend" or (args.cmd == "steps" and args.measure)
    if reference_only and PROCESSOR != REFERENCE_PROCESSOR and not args.any_cpu:
        # these compare with, and add to, the reference machine's own records (the step records beside its grid)
        print(f"this machine is a {INSTANCE} ({cpu_model()}): `{args.cmd}` measures against the {REFERENCE_INSTANCE}'s"
              " records (docs/engine.md, 'Which instance this is'); nothing measured (--any-cpu measures it anyway)",
              file=sys.stderr)  # fmt: skip
        return 2
    if measures and BOX is None and not args.any_cpu:
        # the rows are written as the catalog instance this machine is: a CPU the catalog does not know would have
        # its figures filed under another's hardware
        print(f"this machine's CPU is {cpu_model()}: no catalog CPU instance is this processor (docs/engine.md, 'Which"
              f" instance this is'); nothing measured (--any-cpu measures it anyway, as {ACCELERATOR}: keep its rows"
              " out of the reference)", file=sys.stderr)  # fmt: skip
        return 2
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
