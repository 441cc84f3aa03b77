"""`sizing workload FILE [--json]`: show the technical figures a business spec turns into.
`sizing workload --trace TRACE [--format F] [--model M] [FILE] [--json]`: what a recorded trace says (lengths,
arrivals by hour, burstiness, prefix reuse, sessions), and, with a spec, the workload model sized from it."""

from __future__ import annotations

import argparse
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.commands.output import print_json
from sizing.traces import read_trace, summarize
from sizing.traces.formats import FORMATS
from sizing.workload.derived import resolve
from sizing.workload.parse import load_spec
from sizing.workload.spec import TraceSpec, WorkloadSpec

#: Characters of the widest bar of the hourly chart.
BAR_WIDTH = 40


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "workload", help="derive the workload model from a spec (YAML or JSON), or from a recorded trace"
    )
    p.add_argument("file", nargs="?", help="workload spec (YAML or JSON); optional with --trace")
    p.add_argument(
        "--trace", help="a request trace: Mooncake JSONL, Bedrock invocation log, Data Capture, CSV"
    )
    p.add_argument("--format", choices=FORMATS, default=None, help="the trace's format (detected when unset)")
    p.add_argument(
        "--model", default=None, help="the model whose requests to read from a log holding several"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _with_trace(spec: WorkloadSpec, args: argparse.Namespace) -> WorkloadSpec:
    trace = TraceSpec(path=args.trace, format=args.format, model=args.model)
    return spec.model_copy(update={"trace": trace})


def run(args: argparse.Namespace) -> int:
    if args.file is None and args.trace is None:
        raise InvalidInput("give a workload spec, or --trace FILE", [Problem("file", "missing")])
    if args.file is None:
        figures = summarize(read_trace(args.trace, args.format, args.model))
        if args.json:
            print_json(figures)
        else:
            print("\n".join(trace_lines(figures)))
        return 0
    spec = load_spec(args.file)
    if args.trace is not None:
        spec = _with_trace(spec, args)
    wm = resolve(spec)
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
    if d.get("trace"):
        print("")
        print("\n".join(trace_lines(d["trace"])))
    return 0


def _pct(d: dict[str, Any], q: str) -> str:
    v = d.get(q)
    return "n/a" if v is None else f"{v:,.0f}"


def trace_lines(f: dict[str, Any]) -> list[str]:
    """The trace's figures as text: counts, lengths, arrivals by hour (a bar chart), burstiness, reuse, sessions."""
    lines = [
        f"trace {f['source']} ({f['format']}, {f['digest'][:19]}...): {f['requests']:,} requests over"
        f" {f['span_s'] / 3600:.2f} h" + (f", model {f['model']}" if f.get("model") else ""),
    ]
    if f.get("mean_rps") is not None:
        lines.append(
            f"  rate: mean {f['mean_rps']:.3g} req/s, busiest hour {f['busiest_hour_rps']:.3g} req/s"
        )
    for name, label in (("input_tokens", "input tokens "), ("output_tokens", "output tokens")):
        x = f[name]
        lines.append(
            f"  {label} mean {x['mean']:,.0f}  p50 {_pct(x, 'p50')}  p95 {_pct(x, 'p95')}  p99 {_pct(x, 'p99')}"
            f"  max {x['max']:,}"
        )
    if f.get("input_output_log_correlation") is not None:
        lines.append(f"  input/output correlation (of logs): {f['input_output_log_correlation']:+.2f}")
    for window, b in f["burstiness"].items():
        if b is None:
            lines.append(f"  burstiness at {window}: the trace is too short to tell")
        else:
            lines.append(
                f"  burstiness at {window}: peak-to-mean {b['peak_to_mean']:.2f}, index of dispersion"
                f" {b['index_of_dispersion']:.2f} (Poisson 1, constant gaps 0), peak {b['peak_rps']:.3g} req/s"
            )
    r = f["prefix_reuse"]
    if r["source"] == "none":
        lines.append("  prefix reuse: the trace carries no hash_ids, sessions or prefix groups")
    else:
        lines.append(
            f"  prefix reuse (from {r['source']}): {r['prefix_hit_share']:.0%} of prompt tokens already cached,"
            f" {r['requests_with_hit_share']:.0%} of requests hit, median hit {r['median_hit_tokens']:,} tokens"
            + (f"; {r['blocks_seen_share']:.0%} of blocks seen before" if "blocks_seen_share" in r else "")
        )
    s = f.get("sessions")
    if s:
        lines.append(
            f"  sessions: {s['sessions']:,}, {s['turns_mean']:.1f} turns on average, {s['follow_up_share']:.0%} of"
            " requests follow an earlier turn"
            + (
                f", {s['gap_between_turns_s_median']:.1f} s between turns (median)"
                if s.get("gap_between_turns_s_median") is not None
                else ""
            )
        )
    lines.append(f"  requests per second by {f['hours']}:")
    rates = f["hourly_rps"]
    top = max(rates) or 1.0
    for h, r_h in enumerate(rates):
        if r_h > 0:
            lines.append(f"    {h:02d} {'#' * max(1, round(BAR_WIDTH * r_h / top)):<{BAR_WIDTH}} {r_h:.3g}")
    lines += [f"  {n}" for n in f.get("notes", [])]
    return lines
