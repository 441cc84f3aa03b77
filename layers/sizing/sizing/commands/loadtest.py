"""`sizing loadtest --endpoint URL --model NAME (--concurrency 1,4,16 | --rates 0.5,1,2 | --workload FILE)
[--input-tokens N|MEAN:P95 --output-tokens ...] [--sla-search --slo ttft_ms.p95=800,...] [--workers N] --out DIR`:
measure an endpoint step by step. Locust runs in a child process; this process never imports it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.base.text import table
from sizing.commands.output import print_json
from sizing.loadtest import run_sweep
from sizing.loadtest.capacity import level_requests
from sizing.loadtest.config import DEFAULT_DURATION_S, fresh_seed
from sizing.loadtest.server import describe_server, served_model
from sizing.traces import read_trace
from sizing.traces.formats import FORMATS
from sizing.traces.replay import window as replay_window
from sizing.workload.derived import build_model
from sizing.workload.parse import load_spec

#: Fractions of the workload's peak users (or rate) a `--workload` sweep steps through.
WORKLOAD_FRACTIONS = (0.25, 0.5, 1.0)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "loadtest", help="load-test an endpoint: concurrency or rate steps, or a workload's users"
    )
    p.add_argument(
        "--endpoint", required=True, help="http(s)://host:port, bedrock://REGION or sagemaker://NAME"
    )
    p.add_argument(
        "--model",
        "--served-model",
        dest="model",
        default=None,
        help="the name the server serves the model under (or the Bedrock model id); default, for an http(s)"
        " server that serves one model: that model (GET /v1/models)",
    )
    level = p.add_mutually_exclusive_group()
    level.add_argument("--concurrency", help="concurrent streams per step, e.g. 1,4,16,64")
    level.add_argument("--rates", help="Poisson request rates (req/s) per step, e.g. 0.5,1,2,4")
    level.add_argument(
        "--workload", help="workload spec (YAML/JSON): its users with think time, tokens and SLO"
    )
    level.add_argument(
        "--trace",
        help="replay a recorded trace (Mooncake, Bedrock log, Data Capture, CSV; docs/traces.md): its busiest"
        " hour's requests at their recorded gaps and lengths, prefixes shared as its hash_ids share them;"
        " time-scaled to each of --trace-rates (default: as recorded)",
    )
    p.add_argument(
        "--trace-rates", default=None, help="with --trace: rates (req/s) to time-scale it to, e.g. 1,2,4"
    )
    p.add_argument(
        "--trace-format", choices=FORMATS, default=None, help="the trace's format (detected when unset)"
    )
    p.add_argument(
        "--trace-model", default=None, help="the model whose requests to replay from a log of several"
    )
    p.add_argument(
        "--capacity-from",
        type=float,
        metavar="RATE",
        help="search the arrival rate at the SLO edge (--slo), from RATE req/s (the predicted capacity): Poisson"
        " levels (with --trace: the trace time-scaled to each level's rate) bracketing by 1.5x, then bisecting"
        " until the edge is known to +/-5%%; each level runs on while a target's 95%% interval straddles its"
        " limit (docs/loadgen.md)",
    )
    p.add_argument("--users", help="with --workload: user counts per step (default: 25/50/100%% of peak)")
    p.add_argument("--input-tokens", default=None, help="N (fixed) or MEAN:P95 (lognormal); default 512")
    p.add_argument("--output-tokens", default=None, help="N (fixed) or MEAN:P95 (lognormal); default 128")
    p.add_argument(
        "--shared-prefix",
        type=int,
        default=None,
        metavar="N",
        help="tokens every synthesized prompt starts with, the same in all requests (a system prompt a prefix"
        " cache can serve); with --workload, its tokens.shared_prefix; default 0",
    )
    p.add_argument(
        "--dataset", help="JSONL prompts (prompt or messages, optional output_tokens) instead of synthetic"
    )
    p.add_argument("--api", choices=["chat", "completions"], default="chat")
    p.add_argument("--sagemaker-payload", choices=["openai", "tgi"], default="openai")
    p.add_argument("--no-ignore-eos", action="store_true", help="let the server stop early (no ignore_eos)")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="measured window per step in seconds (default 20; plus warm-up and a tail)",
    )
    p.add_argument(
        "--warmup", type=float, default=None, help="warm-up seconds per step, excluded (default 5)"
    )
    p.add_argument("--slo", default="", help="SLO targets, e.g. ttft_ms.p95=800,tpot_ms.p95=60,e2e_s.p95=2.5")
    p.add_argument(
        "--sla-search", action="store_true", help="find the highest level meeting every SLO target"
    )
    p.add_argument("--max-level", type=float, default=None, help="SLA search upper bound (default 1024)")
    p.add_argument("--workers", type=int, default=0, help="Locust worker processes (0: one process)")
    p.add_argument("--max-requests", type=int, default=None, help="stop after this many requests")
    p.add_argument("--max-total", type=float, default=None, help="stop after this many seconds")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the synthesized prompts (default: a fresh one each run, printed, so a server's prefix cache"
        " cannot serve this run's prompts from an earlier one's; give it to send the same prompts again)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="K",
        help="the server runs K times faster than real time (a twin started with --time-scale K): levels, windows,"
        " SLO limits and results are given and shown in its time (default 1)",
    )
    p.add_argument("--out", required=True, help="output directory (steps.jsonl, steps.csv, summary.json)")
    p.add_argument("--json", action="store_true", help="print the steps as JSON")
    p.add_argument(
        "--save-requests",
        action="store_true",
        help="also write every request (times, tokens, errors) to requests.jsonl in --out; those sent in a"
        " level's warm-up are marked warmup",
    )
    p.set_defaults(func=run)


def _floats(text: str, name: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidInput(f"--{name}: give numbers separated by commas", [Problem(name, text)]) from None
    if not values:
        raise InvalidInput(f"--{name}: give at least one value", [Problem(name, text)])
    return values


def parse_slo(text: str) -> list[tuple[str, str, float]]:
    """`ttft_ms.p95=800,e2e_s.p99=3` -> [(metric, percentile, limit), ...]."""
    out: list[tuple[str, str, float]] = []
    for part in filter(None, (x.strip() for x in text.split(","))):
        try:
            key, value = part.split("=", 1)
            metric, pct = key.split(".", 1)
            out.append((metric, pct, float(value)))
        except ValueError:
            raise InvalidInput(
                f"--slo: '{part}' is not METRIC.PERCENTILE=LIMIT", [Problem("slo", "e.g. ttft_ms.p95=800")]
            ) from None
    return out


def _from_workload(path: str, users: str | None) -> dict[str, Any]:
    spec = load_spec(path)
    wm = build_model(spec)
    fields: dict[str, Any] = {
        "slo": list(spec.slo.targets()),
        "shared_prefix_tokens": spec.tokens.shared_prefix or 0,
    }
    if spec.tokens.input is not None and spec.tokens.output is not None:
        fields["input_tokens"], fields["output_tokens"] = spec.tokens.input, spec.tokens.output
    else:  # a samples file: its means stand for the distributions
        fields["input_tokens"], fields["output_tokens"] = (
            round(wm.input_tokens.mean),
            round(wm.output_tokens.mean),
        )
    if wm.peak_active_users is not None and wm.think_time_s is not None:
        peak = wm.peak_active_users
        fields["mode"] = "users"
        fields["think_time_s"] = wm.think_time_s
        fields["levels"] = (
            _floats(users, "users")
            if users
            else sorted({max(1, round(peak * f)) for f in WORKLOAD_FRACTIONS})
        )
    else:
        fields["mode"] = "rate"
        fields["levels"] = [round(wm.peak_rps * f, 4) for f in WORKLOAD_FRACTIONS]
    return fields


def describe_capacity(out_dir: str) -> str:
    """The capacity search's answer in words, from the run's summary."""
    import json
    from pathlib import Path

    cap = json.loads((Path(out_dir) / "summary.json").read_text()).get("capacity") or {}
    rate = cap.get("capacity_rps")
    if rate is None:
        return f"capacity: {cap.get('note', 'not found')}"
    lo, hi = cap.get("low_rps"), cap.get("high_rps")
    interval = f"{'-' if lo is None else f'{lo:g}'} to {'-' if hi is None else f'{hi:g}'} req/s"
    return f"capacity: {rate:g} req/s (95% verdicts bound it {interval}); {cap.get('note', '')}"


def _levels(
    args: argparse.Namespace, extra: dict[str, Any]
) -> tuple[str, list[float], list[tuple[str, str, float]]]:
    """The sweep's mode, levels and SLO targets from the command line (a workload's fields go into `extra`)."""
    if args.capacity_from is not None and (args.concurrency or args.rates or args.workload):
        given = "--concurrency" if args.concurrency else "--rates" if args.rates else "--workload"
        raise InvalidInput(
            f"--capacity-from: not with {given}: the capacity search chooses its own levels (it takes --trace,"
            " whose arrivals and lengths it then replays)",
            [Problem("capacity_from", f"not allowed with {given}")],
        )
    if args.capacity_from is not None and args.trace_rates:
        raise InvalidInput(
            "--trace-rates: not with --capacity-from: the capacity search time-scales the trace to the rates it"
            " probes",
            [Problem("trace_rates", "not allowed with --capacity-from")],
        )
    if not (args.concurrency or args.rates or args.workload or args.trace or args.capacity_from is not None):
        raise InvalidInput(
            "give one of --concurrency, --rates, --workload, --trace or --capacity-from",
            [Problem("levels", "none given")],
        )
    if args.workload:
        fields = _from_workload(args.workload, args.users)
        mode, levels = fields.pop("mode"), fields.pop("levels")
        window = args.duration if args.duration is not None else DEFAULT_DURATION_S
        think = fields.get("think_time_s") or 0.0
        if mode == "users" and window < think:
            raise InvalidInput(
                f"--duration: a window of {window:g} s is shorter than the workload's think time ({think:.0f} s"
                " between a user's requests): most users would send nothing in it. Give --duration of at least"
                f" {think:.0f} s",
                [Problem("duration", f"at least {think:.0f} s with this workload")],
            )
        slo = parse_slo(args.slo) if args.slo else fields.pop("slo")
        fields.pop("slo", None)
        extra.update(fields)
        return mode, levels, slo
    capacity = _capacity_search(args, extra) if args.capacity_from is not None else None
    if args.trace:
        win = replay_window(read_trace(args.trace, args.trace_format, args.trace_model))
        extra["replay"] = win.as_load()
        rates = _floats(args.trace_rates, "trace-rates") if args.trace_rates else [round(win.mean_rate, 4)]
        print(
            f"trace: {win.n} requests from the busiest hour, recorded at {win.mean_rate:.3g} req/s"
            f" ({extra['replay']['digest'][:19]}...)"
            + (f"; time-scaled to each rate the capacity search probes from {args.capacity_from:g} req/s"
               if capacity is not None else ""),
            file=sys.stderr,
        )  # fmt: skip
        if capacity is not None:
            return "rate", [], capacity
        return "rate", rates, parse_slo(args.slo)
    if capacity is not None:
        return "rate", [], capacity
    mode = "rate" if args.rates else "concurrency"
    return (
        mode,
        _floats(args.rates or args.concurrency, mode if args.rates else "concurrency"),
        parse_slo(args.slo),
    )


def _capacity_search(args: argparse.Namespace, extra: dict[str, Any]) -> list[tuple[str, str, float]]:
    """The capacity search's start in `extra` and its SLO targets, or InvalidInput naming what is missing."""
    slo = parse_slo(args.slo)
    if not slo:
        raise InvalidInput(
            "--capacity-from: give the SLO targets to search against (--slo e2e_s.p95=2.5,...)",
            [Problem("slo", "needed with --capacity-from")],
        )
    if args.capacity_from <= 0:
        raise InvalidInput(
            "--capacity-from: give a rate above 0 req/s", [Problem("capacity_from", str(args.capacity_from))]
        )
    # levels near the edge read the requests the strictest percentile needs there, within the window cap
    extra["capacity_search"] = {
        "start": args.capacity_from,
        "level_requests": level_requests([p for _, p, _ in slo]),
    }
    return slo


def _print_steps(steps: list[Any]) -> None:
    rows = [
        [
            s.step,
            " ".join(f"{k}={v:g}" for k, v in s.target.items()),
            s.requests,
            ", ".join(f"{n} {kind}" for kind, n in s.errors.items()) or 0,
            s.unfinished,
            f"{s.requests_per_s:.2f}",
            f"{s.output_tokens_per_s:.0f}",
            s.ttft_ms.p50,
            s.ttft_ms.p95,
            s.tpot_ms.p95,
            s.e2e_s.p95,
            "" if s.meets_slo is None else ("yes" if s.meets_slo else "no"),
        ]
        for s in steps
    ]
    heads = ["step", "target", "requests", "errors", "unfinished", "req/s", "tok/s", "ttft p50 ms", "ttft p95 ms",
             "tpot p95 ms", "e2e p95 s", "meets SLO"]  # fmt: skip
    print(table(heads, rows))
    for st in steps:
        if st.server is not None and st.server.requests:
            sv = st.server
            print(
                f"  step {st.step}, the server's own means: TTFT {sv.ttft_ms} ms, TPOT {sv.tpot_ms} ms, e2e"
                f" {sv.e2e_s} s over {sv.requests} requests, prefix-cache hits"
                f" {'-' if sv.prefix_cache_hit_share is None else f'{sv.prefix_cache_hit_share:.0%}'}"
            )
        for c in st.checks:
            interval = f"{c.ci_low if c.ci_low is not None else '?'} to {c.ci_high if c.ci_high is not None else '?'}"
            print(
                f"  step {st.step}: {c.target} {c.value} (95% interval {interval}, {c.samples} requests) vs"
                f" {c.limit:g}: {c.verdict}" + (f", {c.note}" if c.note else "")
            )
        if st.overload is not None and st.overload.overloaded:
            stopped = ", the level stopped early" if st.overload.stopped_early else ""
            print(f"  step {st.step}: fails: {st.overload.reason()}{stopped}")
        for flag in st.flags:
            print(f"  step {st.step}: warning: {flag}")


def run(args: argparse.Namespace) -> int:
    extra: dict[str, Any] = {"api": args.api, "sagemaker_payload": args.sagemaker_payload}
    mode, levels, slo = _levels(args, extra)  # bad input refused before the server is asked anything
    model, facts = served_model(args.endpoint, args.model)
    seed = fresh_seed() if args.seed is None else args.seed
    extra["seed"] = seed
    if facts is not None:
        print(describe_server(facts), file=sys.stderr)
    print(f"prompts: seed {seed} (--seed {seed} sends the same prompts again)", file=sys.stderr)
    if args.input_tokens is not None:
        extra["input_tokens"] = args.input_tokens
    if args.output_tokens is not None:
        extra["output_tokens"] = args.output_tokens
    if args.shared_prefix is not None:
        extra["shared_prefix_tokens"] = args.shared_prefix  # LoadTestConfig refuses a negative one, naming it
    for opt, key in (("dataset", "dataset"), ("max_requests", "max_requests"), ("max_total", "max_total_s"),
                     ("max_level", "max_level"), ("time_scale", "time_scale")):  # fmt: skip
        if getattr(args, opt) is not None:
            extra[key] = getattr(args, opt)
    if args.no_ignore_eos:
        extra["ignore_eos"] = False
    if args.save_requests:
        extra["save_requests"] = True
    steps = run_sweep(
        args.endpoint, model, levels, out_dir=args.out, mode=mode, duration_s=args.duration,
        warmup_s=args.warmup, slo=slo, sla_search=args.sla_search, workers=args.workers, **extra,
    )  # fmt: skip
    if args.json:
        print_json([s.model_dump(mode="json") for s in steps])
        return 0
    _print_steps(steps)
    if args.capacity_from is not None:
        print(describe_capacity(args.out))
    print(
        f"results: {args.out}/steps.jsonl, steps.csv, summary.json"
        + (", requests.jsonl" if args.save_requests else "")
    )
    return 0
