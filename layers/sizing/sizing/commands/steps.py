"""`sizing steps`: a real server's engine steps, rebuilt from a load test's request records, against the estimator's
step time for the deployment it served (docs/engine.md, "Steps the client saw")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.base.vocabulary import ENGINES, QUANTIZATIONS
from sizing.commands.output import print_json
from sizing.perf.config import HardwareConfig
from sizing.perf.step import StepModel

REQUESTS = "requests.jsonl"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "steps",
        help="a server's engine steps, rebuilt from `sizing loadtest --save-requests` records, against the"
        " estimator's step time (2 for bad input)",
    )
    p.add_argument("results", help=f"a `sizing loadtest --save-requests` output folder (its {REQUESTS})")
    p.add_argument("--model", required=True, help="the model the server served: catalog id or alias")
    p.add_argument("--instance", required=True, help="the instance type it ran on, e.g. g6e.12xlarge")
    p.add_argument("--tp", type=int, default=None, help="tensor parallel devices it ran with")
    p.add_argument("--quant", choices=QUANTIZATIONS, default="bf16")
    p.add_argument("--engine", choices=ENGINES, default="vllm")
    p.add_argument(
        "--fit",
        action="store_true",
        help="also fit the step time's factors to the steps (sizing.perf.stepfit) and show them beside the"
        " estimator's",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def read_records(folder: Path) -> list[tuple[Any, Any]]:
    """(load level, `RequestRecord`) of every request in the folder's `requests.jsonl`; a clear error naming the
    file (and line) when it is missing or not a load test's."""
    from sizing.loadtest.metrics import RequestRecord

    path = folder / REQUESTS
    if not path.is_file():
        why = f"no {REQUESTS} in {folder}: measure with `sizing loadtest ... --save-requests --out {folder}`"
        raise InvalidInput(why, [Problem("results", why)])
    out = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append((row.get("step"), RequestRecord.from_row(row)))
        except (ValueError, TypeError, AttributeError) as exc:
            why = f"{path.name} line {n} is not a request record ({type(exc).__name__})"
            raise InvalidInput(why, [Problem("results", why)]) from None
    if not out:
        why = f"{path} holds no requests"
        raise InvalidInput(why, [Problem("results", why)])
    return out


def summarise(args: argparse.Namespace) -> dict[str, Any]:
    from sizing.loadtest.steps import rebuild
    from sizing.perf.stepfit import STEP_FACTORS, by_kind, fit_steps

    records = read_records(Path(args.results))
    cfg = HardwareConfig.create(args.model, args.instance, args.tp, args.quant, args.engine)
    sm = StepModel.for_config(cfg)
    # the steps of each load level apart: a level's requests never share a step with another's (its warm-up's
    # requests among them: the window's first steps are rebuilt with what was already running)
    levels: dict[Any, list[Any]] = {}
    for level, rec in records:
        levels.setdefault(level, []).append(rec)
    steps = [s for recs in levels.values() for s in rebuild(recs)]
    out: dict[str, Any] = {
        "model": args.model,
        "instance_type": args.instance,
        "tensor_parallel": cfg.tensor_parallel,
        "engine": args.engine,
        "profile": {"family": sm.profile.family, "version": sm.profile.version, **sm.profile.params()},
        "levels": len(levels),
        **by_kind(steps, sm),
    }
    if args.fit:
        try:
            fit = fit_steps(steps, lambda p: StepModel(cfg, sm.fit, p), sm.profile)
        except ValueError as exc:
            raise InvalidInput(f"--fit: {exc}", [Problem("fit", str(exc))]) from None
        out["fit"] = {
            "factors": {n: round(getattr(fit.profile, n), 6) for n in STEP_FACTORS},
            "estimator": {n: getattr(sm.profile, n) for n in STEP_FACTORS},
            "mdape_before": round(fit.mdape_before, 4),
            "mdape_after": round(fit.mdape_after, 4),
        }
    return out


def run(args: argparse.Namespace) -> int:
    out = summarise(args)
    if args.json:
        print_json(out)
        return 0
    print(
        f"{out['model']} on {out['instance_type']} (tp {out['tensor_parallel']}, {out['engine']}): {out['timed']:,}"
        f" steps timed of {out['rebuilt']:,} rebuilt over {out['levels']} levels; estimator profile"
        f" {out['profile']['family']} {out['profile']['version']}"
    )
    if not out["kinds"]:
        print("  no step had a duration (every step followed an idle engine): measure more than one stream")
        return 0
    print(
        f"  {'step':<26} {'prompt':>7} {'steps':>6} {'measured ms p50 (p10-p90)':>28} {'modelled ms':>12} {'ratio':>6}"
    )
    for k in out["kinds"]:
        m = k["measured_ms"]
        cell = f"{m['p50']:.1f} ({m['p10']:.1f}-{m['p90']:.1f})"
        prompt = f"{k['prompt_tokens']:.0f}" if k["prompt_tokens"] else "-"
        print(
            f"  {k['kind']:<26} {prompt:>7} {k['steps']:>6} {cell:>28} {k['modelled_ms']:>12.1f} {k['ratio']:>6.2f}"
        )
    lo, hi = out["ratio_p10_p90"]
    print(
        f"  all timed steps: modelled/measured median {out['median_ratio']:.2f} ({lo:.2f}-{hi:.2f}),"
        f" median error {100 * out['mdape']:.1f}%"
    )
    if "fit" in out:
        f = out["fit"]
        cells = ", ".join(f"{n} {f['estimator'][n]:.4g} -> {v:.4g}" for n, v in f["factors"].items())
        print(
            f"  fitted to the steps: {cells}; median error {100 * f['mdape_before']:.1f}% -> {100 * f['mdape_after']:.1f}%"
        )
    return 0
