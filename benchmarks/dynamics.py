"""The simulator's scheduler dynamics against vLLM's own (V1) scheduler on the real engine.

    make engine                                   # the venv and models once (engine/engine.sh)
    setsid .venv/bin/python benchmarks/dynamics.py measure   # ~15 minutes: starts and stops the engine itself
    .venv/bin/python benchmarks/dynamics.py compare          # offline: fit on the low-load levels, predict the rest

`measure` serves tiny-llama on core 0 and measures, with the product's own load generator on core 1:
- `low`: closed loops of 1, 2 and 4 streams (512/128 tokens) and one stream of 128/32 and 2,048/64: the low load
  the step time is fitted from;
- `sat`: 48 streams of 512/128, the saturated rate;
- `queue`: Poisson arrivals of 512/128 at 0.3-0.95 of that rate: TTFT and queueing above 50% utilisation;
- `chunk`: 2,048-token prompts joining running decodes (2 and 8 streams of 2,048/128) beside 8 streams of 128/128:
  chunked prefill's effect on decode (TPOT, and the inter-token latency's tail);
- `prefix`: 4 streams of 2,048/64 with 1,536 tokens of every prompt shared, and without: prefix caching;
- `preempt`: the engine restarted with a KV cache of 48 blocks (6,144 tokens) and 16 streams of 512/256 (12,288
  tokens wanted): preemption when KV runs out;
- `lockstep` (not in the default parts): closed loops of 4, 16 and 64 streams of 128/32 and 512/128, 30-s
  windows: the lock-step groups a closed loop of fixed lengths falls into (`StepResult.lockstep_group`), and the
  simulator's TTFT with its users at random phases and in groups of the size measured (docs/engine.md,
  "Lock-step");
- `sched` (not in the default parts): closed loops of 1-48 streams, long prompts and a Poisson level, served by the
  engine's asynchronous planner (vLLM's default) and then by its synchronous one (`--no-async-scheduling`): what
  planning each step a step ahead costs a new request's first token.
Before the levels, every prompt length is served a few times (the first requests after a start compile the shapes
they bring). Each level is written as one JSON line (`benchmarks/results/dynamics.jsonl`) with the server's own
figures over its window (queue time, prefix-cache hits, preemptions, KV capacity).

`compare` fits the CPU profile on the `low` levels alone (the product's own fit, `sizing.perf.fit.fit_group`),
simulates every level with the server's own settings (KV capacity, batch and token limits, the shared prefix) and
prints measured against simulated: TTFT mean/p50/p90, TPOT, the inter-token latency's p95, throughput, preemptions
and the prefix-cache hit share. No timed assertion: figures to read (docs/engine.md, "Dynamics").

Priority: on a shared 2-core box the engine and this client are each given their own core and, where this runs as
root, the highest autogroup priority (`/proc/<pid>/autogroup`, nice -20) so neighbours' work does not enter the
figures; run it under `setsid` so only this client's session is raised.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "dynamics.jsonl"
ENGINE = ROOT / "engine" / "engine.sh"
MODELS = ROOT / ".engine" / "models"
os.environ.setdefault("SIZING_CATALOG_DIR", str(MODELS / "catalog"))


from sizing.loadtest import run_sweep  # noqa: E402
from sizing.loadtest.server import probe  # noqa: E402

SHAPE = "tiny-llama"
ACCELERATOR = "xeon-spr-c7i.large"
#: the engine's KV blocks for the preemption part: 48 x 128 tokens, under half of what 16 streams of 512/256 hold
PREEMPT_BLOCKS = 48
#: Poisson rates as fractions of the saturated closed loop's rate
QUEUE_FRACTIONS = (0.3, 0.5, 0.7, 0.85, 0.95)
#: streams decoding beside the lone prompt of the `mixed` part
MIXED_BACKGROUND = (0, 3, 8)


def raise_priority() -> None:
    """Best effort: this client's session at the highest CFS priority, autogroup nice -20 (needs root; a no-op
    otherwise), as engine/engine.sh puts the engine's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text("-20")


def engine(cmd: str, **env: str) -> None:
    subprocess.run(
        [str(ENGINE), cmd], check=True, cwd=ROOT,
        env={**os.environ, "SIZING_ENGINE_MODEL": SHAPE, "SIZING_ENGINE_SHAPES": SHAPE, **env},
    )  # fmt: skip


def level(endpoint: str, model: str, part: str, mode: str, value: float, point: tuple[int, int],
          window: float, warmup: float, **extra: Any) -> dict[str, Any]:  # fmt: skip
    sweep_extra = {k: v for k, v in extra.items() if k != "background"}
    with tempfile.TemporaryDirectory() as tmp:
        steps = run_sweep(
            endpoint, model, [value], out_dir=tmp, mode=mode, input_tokens=point[0], output_tokens=point[1],
            duration_s=window, warmup_s=warmup, quiet=True, **sweep_extra,
        )  # fmt: skip
    s = steps[0].model_dump(mode="json")
    rec = {"part": part, "mode": mode, "value": value, "point": list(point), "load1": os.getloadavg()[0],
           **{k: v for k, v in extra.items() if k in ("shared_prefix_tokens", "background")}, **s}  # fmt: skip
    srv = s.get("server") or {}
    print(
        f"  {part:<8} {mode[:4]} {value:7.3g}  {point[0]}/{point[1]}  n={s['requests']:<4} "
        f"ttft {s['ttft_ms'].get('mean') or float('nan'):7.1f} (p90 {s['ttft_ms'].get('p90') or float('nan'):7.1f}) "
        f"tpot {s['tpot_ms'].get('mean') or float('nan'):6.2f} itl95 {s['itl_ms'].get('p95') or float('nan'):6.1f} "
        f"{s['requests_per_s']:6.2f} req/s  queue {srv.get('queue_ms', float('nan')):7.1f} ms "
        f"hits {srv.get('prefix_cache_hit_share', float('nan')):.2f} preempt {srv.get('preemptions', '-')} "
        f"load {rec['load1']:.1f}",
        flush=True,
    )
    return rec


class Session:
    """One measuring session: the endpoint, the served model and its facts, and the levels kept so far (each also
    appended to the output file as it is measured)."""

    def __init__(self, endpoint: str, out: Path) -> None:
        self.ep = endpoint
        self.out = out
        self.model = ""
        self.facts: dict[str, Any] = {}
        self.recs: list[dict[str, Any]] = []
        #: whether the server plans asynchronously (vLLM 0.32.0's default; the `sched` part also serves without)
        self.asynchronous = True

    def serve(self, **env: str) -> None:
        engine("start", **env)
        facts = probe(self.ep)
        self.facts = {"kv_cache_tokens": facts.kv_cache_tokens, "max_model_len": facts.max_model_len}
        self.model = facts.served_models[0]
        print(f"engine {facts.version}: KV {facts.kv_cache_tokens} tokens, context {facts.max_model_len}")

    def run(self, part: str, mode: str, value: float, point: tuple[int, int], window: float, warmup: float,
            **extra: Any) -> dict[str, Any]:  # fmt: skip
        return level(self.ep, self.model, part, mode, value, point, window, warmup, **extra)

    def keep(self, part: str, mode: str, value: float, point: tuple[int, int], window: float, warmup: float,
             **extra: Any) -> dict[str, Any]:  # fmt: skip
        r = self.run(part, mode, value, point, window, warmup, **extra)
        r["facts"] = dict(self.facts)
        r["async_scheduling"] = self.asynchronous
        # where the server's API process and engine core ran (engine/engine.sh reads the same variable)
        r["frontend_core"] = os.environ.get("SIZING_ENGINE_FRONTEND_CORE")
        self.recs.append(r)
        with self.out.open("a") as fh:
            fh.write(json.dumps(r) + "\n")
        return r


def part_low(s: Session) -> None:
    for c in (1, 2, 4):
        s.keep("low", "concurrency", c, (512, 128), 15.0, 3.0)
    for point in ((128, 32), (2048, 64)):
        s.keep("low", "concurrency", 1, point, 12.0, 3.0)


#: the `lockstep` part's closed loops: (streams, prompt/answer tokens), each a 30-s window after a 5-s warm-up
LOCKSTEP_LEVELS = tuple((c, p) for p in ((128, 32), (512, 128)) for c in (4, 16, 64))


def part_lockstep(s: Session) -> None:
    for c, point in LOCKSTEP_LEVELS:
        s.keep("lockstep", "concurrency", c, point, 30.0, 5.0)


def part_queue(s: Session, sat: float) -> None:
    for f in QUEUE_FRACTIONS:
        rate = round(sat * f, 3)
        s.keep(f"queue{f:g}", "rate", rate, (512, 128), max(40.0, 80 / rate), 8.0)


def part_chunk(s: Session) -> None:
    s.keep("chunk", "concurrency", 8, (128, 128), 20.0, 5.0)
    for c in (2, 8):
        s.keep("chunk", "concurrency", c, (2048, 128), 25.0, 6.0)


def part_mixed(s: Session) -> None:
    """One 2,048-token prompt at a time (answers of 2 tokens: its TTFT is its prefill) while 0, 3 or 8 other
    streams decode long answers: what a prefill step costs beside running decodes."""
    for bg in MIXED_BACKGROUND:
        with ThreadPoolExecutor(1) as ex:
            behind = ex.submit(s.run, "mixed-bg", "concurrency", bg, (128, 1024), 30.0, 3.0) if bg else None
            if behind is not None:
                time.sleep(8.0)  # the background's decodes are running
            s.keep("mixed", "concurrency", 1, (2048, 2), 14.0, 2.0, background=bg)
            if behind is not None:
                behind.result()


def part_prefix(s: Session) -> None:
    s.keep("prefix", "concurrency", 4, (2048, 64), 20.0, 4.0)
    s.keep("prefix", "concurrency", 4, (2048, 64), 20.0, 4.0, shared_prefix_tokens=1536)


def part_preempt(s: Session) -> None:
    s.serve(SIZING_ENGINE_KV_BLOCKS=str(PREEMPT_BLOCKS))
    s.run("warmup", "concurrency", 2, (512, 64), 6.0, 2.0)
    s.keep("preempt", "concurrency", 4, (512, 256), 20.0, 5.0)
    s.keep("preempt", "concurrency", 16, (512, 256), 40.0, 10.0)
    engine("stop")


#: the `sched` part's levels (part, mode, value, (input, output), window s, warm-up s), served once by each planner
SCHED_LEVELS: tuple[tuple[str, str, float, tuple[int, int], float, float], ...] = (
    ("sched", "concurrency", 1, (512, 128), 15.0, 3.0),
    ("sched", "concurrency", 4, (512, 128), 15.0, 3.0),
    ("sched", "concurrency", 16, (512, 128), 20.0, 5.0),
    ("sched", "concurrency", 48, (512, 128), 20.0, 8.0),
    ("sched", "concurrency", 8, (2048, 128), 20.0, 6.0),
    ("sched", "concurrency", 4, (2048, 64), 20.0, 4.0),
    ("sched", "rate", 4.1, (512, 128), 40.0, 8.0),
)


def part_sched(s: Session) -> None:
    """The same levels served by the engine's asynchronous planner (vLLM's default: step k+1 planned when step k
    starts) and by its synchronous one (`--no-async-scheduling`), one server after the other: what planning a step
    ahead costs a new request, measured."""
    for planner in ("async", "sync"):
        s.serve(**({"SIZING_ENGINE_ASYNC_SCHEDULING": "0"} if planner == "sync" else {}))
        s.asynchronous = planner == "async"
        for point in ((512, 128), (2048, 64)):
            s.run("warmup", "concurrency", 2, point, 6.0, 2.0)
        for part, mode, value, point, window, warmup in SCHED_LEVELS:
            s.keep(part, mode, value, point, window, warmup)
        engine("stop")
    s.asynchronous = True


def measure(args: argparse.Namespace) -> int:
    raise_priority()
    if args.frontend_core is not None:
        os.environ["SIZING_ENGINE_FRONTEND_CORE"] = str(args.frontend_core)
    RESULTS.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    s = Session(args.endpoint, Path(args.out))
    if parts - {"preempt", "sched"}:
        if args.restart:
            engine("stop")
        s.serve()
        for point in ((128, 32), (512, 128), (2048, 64)):  # warm-up: every shape the levels bring, compiled
            s.run("warmup", "concurrency", 2, point, 6.0, 2.0)
        if "low" in parts:
            part_low(s)
        sat = args.sat_rps
        if "sat" in parts or (not sat and parts & {"queue"}):
            sat = s.keep("sat", "concurrency", 48, (512, 128), 30.0, 10.0)["requests_per_s"]
        if "queue" in parts:
            part_queue(s, sat)
        if "chunk" in parts:
            part_chunk(s)
        if "mixed" in parts:
            part_mixed(s)
        if "prefix" in parts:
            part_prefix(s)
        if "lockstep" in parts:
            part_lockstep(s)
        engine("stop")
    if "sched" in parts:
        part_sched(s)
    if "preempt" in parts:
        part_preempt(s)
    print(f"{len(s.recs)} levels -> {s.out}")
    return 0


def row_of(r: dict[str, Any], facts: dict[str, Any]) -> Any:
    from sizing.perf.calrows import CalRow

    closed = r["mode"] == "concurrency"
    return CalRow(
        row_id=f"D-{r['part']}-{r['point'][0]}x{r['point'][1]}-{r['value']:g}",
        source="first-party: benchmarks/dynamics.py", study="sizing-dynamics", engine="vllm",
        accelerator=ACCELERATOR, tp=1, model=f"sizing-engine/{SHAPE}", quantization="bf16",
        input_tokens=r.get("input_tokens") or r["point"][0], output_tokens=r.get("output_tokens") or r["point"][1],
        load="closed" if closed else "open", load_value=r["value"], max_num_seqs=128,
        max_model_len=facts.get("max_model_len") or 4096, kv_cache_tokens=facts.get("kv_cache_tokens"),
        ttft_ms=r["ttft_ms"].get("mean"), tpot_ms=r["tpot_ms"].get("mean"), e2e_s=r["e2e_s"].get("mean"),
        output_tokens_per_s=r.get("output_tokens_per_s") or None, requests_per_s=r.get("requests_per_s") or None,
        origin="loadtest", engine_version="0.32.0",
    )  # fmt: skip


def lone_prefill_ms(row: Any, prof: Any, background: int, context: int = 600) -> float:
    """The step model's TTFT of one prompt admitted beside `background` decoding sequences of `context` tokens
    each: the API server's share; with a batch decoding, the rest of the step it arrives in (half a step, on
    average); then the prompt's chunks within the step budget, each step also decoding the background (the engine's
    decode tokens take their share of the budget first)."""
    from sizing.perf.fit import reference_catalog, row_config
    from sizing.perf.memory import memory_fit
    from sizing.perf.step import StepModel

    cat = reference_catalog()
    cfg = row_config(row)
    sm = StepModel(cfg, memory_fit(cfg, cat), prof, cat)
    step = sm.timing()
    left, done, t = int(row.input_tokens), 0, sm.request_overhead_s
    if background:
        t += 0.5 * step.iteration_time(0, background, background * context, 0.0, 0)
    while left > 0:
        take = min(left, sm.max_num_batched_tokens - background)
        t += step.iteration_time(take, background, background * context, take * (done + take / 2))
        left, done = left - take, done + take
    return t * 1e3


def lockstep_sim(row: Any, prof: Any, group: int) -> Any:
    """The row's closed loop simulated as `sizing.perf.fit.simulate_row` does, with its users in lock-step groups
    of `group` (1: at random phases), as the estimator re-simulates a measured level (`ClosedLoop.group`)."""
    from sizing.perf.engines import build_scheduler
    from sizing.perf.fit import (
        MAX_REQUESTS,
        MIN_REQUESTS_FIXED,
        ROUNDS,
        _dists,
        profile_key,
        reference_catalog,
        row_config,
    )
    from sizing.perf.memory import memory_fit
    from sizing.perf.simulator import ClosedLoop, simulate
    from sizing.perf.step import StepModel

    cat = reference_catalog()
    cfg = row_config(row)
    sm = StepModel(cfg, memory_fit(cfg, cat), prof, cat)
    sm.schedule_as(build_scheduler(profile_key(row), row.max_model_len or 4096, row.engine_version))
    c = max(1, round(row.load_value))
    i_dist, o_dist = _dists(row)
    res = simulate(
        sm,
        ClosedLoop(c, group=group),
        i_dist,
        o_dist,
        n_requests=min(MAX_REQUESTS, max(MIN_REQUESTS_FIXED, ROUNDS * c)),
    )
    return res


def print_lockstep(
    lockstep: list[tuple[dict[str, Any], Any]], prof: Any, errs: dict[str, list[float]]
) -> None:
    """The `lockstep` levels: their users' groups, and TTFT/TPOT measured against the simulator's with the users at
    random phases and in groups of the size measured (each TTFT's error kept in `errs`)."""
    print("\nclosed loops of fixed lengths: the groups their users went out in (request-weighted), and TTFT/TPOT"
          " measured against the simulator's with the users at random phases and in groups of that size")  # fmt: skip
    for r, row in lockstep:
        g = r.get("lockstep_group")
        one, many = lockstep_sim(row, prof, 1), lockstep_sim(row, prof, max(1, round(g or 1)))
        spread = (one.ttft_ms.mean, one.tpot_ms.mean)
        grouped = (many.ttft_ms.mean, many.tpot_ms.mean)
        tt, tp = r["ttft_ms"].get("mean") or float("nan"), r["tpot_ms"].get("mean") or float("nan")
        print(f"  {r['value']:>3g} streams {r['point'][0]}/{r['point'][1]}: groups {g or float('nan'):5.1f}  "
              f"TTFT {tt:7.1f} | random phases {spread[0]:7.1f} | in groups {grouped[0]:7.1f}   "
              f"TPOT {tp:6.2f} | {spread[1]:6.2f} | {grouped[1]:6.2f}  (load {r['load1']:.1f})")  # fmt: skip
        for tag, sim in (("ttft, random phases", spread[0]), ("ttft, in groups", grouped[0])):
            if tt == tt:
                errs.setdefault(f"lockstep {tag}", []).append(sim / tt - 1)


def compare(args: argparse.Namespace) -> int:
    from sizing.perf.fit import FAMILY_SIGMA, PRIOR, _profile, _theta, fit_group, simulate_row

    recs = [json.loads(x) for x in Path(args.out).read_text().splitlines() if x.strip()]
    if not recs:
        print(f"compare: nothing in {args.out}; measure first")
        return 2
    rows = [(r, row_of(r, r.get("facts") or {})) for r in recs]
    train = [row for r, row in rows if r["part"] == "low"]
    theta = fit_group(train, _theta(PRIOR), FAMILY_SIGMA, "xeon-spr", "vllm")
    prof = _profile(theta, "xeon-spr", "vllm", "fit on the low-load levels")
    print(
        f"fitted on {len(train)} low-load levels: "
        + ", ".join(f"{k} {v:.4g}" for k, v in prof.params().items())
    )
    sat = next((r["requests_per_s"] for r, _ in rows if r["part"] == "sat"), None)
    print(f"\n{'level':<30} {'util':>5} {'':>4} {'TTFT mean':>10} {'p50':>8} {'p90':>8} {'TPOT':>7} "
          f"{'ITL p95':>8} {'req/s':>6} {'preempt':>7} {'hits':>5}")  # fmt: skip
    errs: dict[str, list[float]] = {}
    mixed = [(r, row) for r, row in rows if r["part"] == "mixed"]
    lockstep = [(r, row) for r, row in rows if r["part"] == "lockstep"]
    for r, row in rows:
        if (r["part"] == "low" and not args.all) or r["part"] in ("mixed", "lockstep"):
            continue
        res = simulate_row(row, prof, prefix_tokens=int(r.get("shared_prefix_tokens") or 0))
        util = r["value"] / sat if sat and r["mode"] == "rate" else None
        srv = r.get("server") or {}
        meas = (r["ttft_ms"].get("mean"), r["ttft_ms"].get("p50"), r["ttft_ms"].get("p90"), r["tpot_ms"].get("mean"),
                r["itl_ms"].get("p95"), r["requests_per_s"], srv.get("preemptions"),
                srv.get("prefix_cache_hit_share"))  # fmt: skip
        sim_hits = (
            min(1.0, int(r.get("shared_prefix_tokens") or 0) / row.input_tokens)
            if r.get("shared_prefix_tokens")
            else 0.0
        )
        sim = (res.ttft_ms.mean, res.ttft_ms.p50, res.ttft_ms.p90, res.tpot_ms.mean, res.itl_ms.p95,
               res.requests_per_s, res.preemptions, sim_hits)  # fmt: skip
        name = f"{r['part']} {r['point'][0]}/{r['point'][1]} {'c' if r['mode'] == 'concurrency' else 'r'}{r['value']:g}"
        for tag, vals in (("meas", meas), ("sim", sim)):
            cells = [f"{v:10.1f}" if i == 0 else f"{v:8.1f}" if i in (1, 2, 4) else f"{v:7.2f}" if i == 3
                     else f"{v:6.2f}" if i == 5 else f"{v:7d}" if i == 6 and isinstance(v, int) else
                     f"{v:5.2f}" if i == 7 and isinstance(v, float) else "      -" for i, v in enumerate(vals)]  # fmt: skip
            print(f"{name if tag == 'meas' else '':<30} {'' if util is None or tag == 'sim' else f'{util:5.2f}':>5} "
                  f"{tag:>4} " + " ".join(cells))  # fmt: skip
        for metric, i in (("ttft", 0), ("ttft p90", 2), ("tpot", 3), ("throughput", 5)):
            if metric == "throughput" and r["mode"] != "concurrency":
                continue  # an open loop's throughput is its arrival rate, whatever the server
            m, p = meas[i], sim[i]
            if m and p is not None and p == p:
                key = metric + (" >50%" if util and util >= 0.5 else "")
                errs.setdefault(key, []).append(float(p) / float(m) - 1)
    sched = [r for r, _ in rows if r["part"] == "sched"]
    if sched:
        print("\nthe same levels, the engine planning a step ahead (async) and not (sync), measured: TTFT, TPOT, the"
              " server's time from scheduling to first token, and TTFT in steps (TTFT / TPOT)")  # fmt: skip
        for r in sched:
            srv = r.get("server") or {}
            tt, tp = r["ttft_ms"].get("mean") or float("nan"), r["tpot_ms"].get("mean") or float("nan")
            print(f"  {'async' if r.get('async_scheduling', True) else 'sync':<5} {r['mode'][:4]} {r['value']:>5g} "
                  f"{r['point'][0]}/{r['point'][1]}: TTFT {tt:7.1f} TPOT {tp:6.2f} prefill "
                  f"{srv.get('prefill_ms') or float('nan'):7.1f} TTFT/TPOT {tt / tp:5.1f} (load {r['load1']:.1f})")  # fmt: skip
    if mixed:
        print(
            "\na lone 2,048-token prompt beside decoding streams (TTFT, ms): measured, and the step model's"
        )
        for r, row in mixed:
            got = lone_prefill_ms(row, prof, int(r.get("background") or 0))
            print(f"  {r.get('background', 0):>2} streams decoding: measured {r['ttft_ms'].get('mean'):7.1f}"
                  f" (p90 {r['ttft_ms'].get('p90'):7.1f}), step model {got:7.1f}")  # fmt: skip
    if lockstep:
        print_lockstep(lockstep, prof, errs)
    print("\nsimulated / measured - 1, median (n):")
    for k, v in sorted(errs.items()):
        print(
            f"  {k:<18} {100 * statistics.median(v):+6.1f}%  ({len(v)}: {', '.join(f'{100 * x:+.0f}' for x in v)})"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure the dynamics levels on the local engine")
    m.add_argument("--endpoint", default=f"http://127.0.0.1:{os.environ.get('SIZING_ENGINE_PORT', '8765')}")
    m.add_argument("--parts", default="low,sat,queue,chunk,mixed,prefix,preempt")
    m.add_argument(
        "--sat-rps", type=float, default=0.0, help="the saturated rate, when `sat` is not measured"
    )
    m.add_argument("--out", default=str(OUT))
    m.add_argument("--restart", action="store_true", help="restart the engine even if it serves already")
    m.add_argument(
        "--frontend-core", type=int, default=None,
        help="run the server's API process and engine core on this core, the model alone on core 0 (vLLM's own CPU"
        " layout); default: all on core 0",
    )  # fmt: skip
    c = sub.add_parser("compare", help="fit on the low-load levels, simulate every level, print both")
    c.add_argument("--out", default=str(OUT))
    c.add_argument("--all", action="store_true", help="print the low-load levels too")
    args = ap.parse_args()
    return {"measure": measure, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
