"""`sizing estimate FILE [--top N] [--json] [--report out.html]`: architectures ranked by cost under the SLOs."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from sizing.commands.output import print_json, table
from sizing.workload import load_spec

#: Searches shorter than this show no progress bar.
PROGRESS_AFTER_S = 1.0


class ProgressBar:
    """A one-line progress bar on stderr, shown only when the search outlasts PROGRESS_AFTER_S and stderr is a TTY."""

    def __init__(self, stream: Any = sys.stderr) -> None:
        self.stream = stream
        self.start = time.perf_counter()
        self.shown = False

    def __call__(self, done: int, total: int, label: str) -> None:
        if not getattr(self.stream, "isatty", lambda: False)():
            return
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:40]:<40}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 90 + "\r")
            self.stream.flush()


KIND_LABELS = {
    "memory": "do not fit in memory",
    "slo": "miss an SLO",
    "dominated": "cost more than the ranked ones (bound)",
    "unsupported": "unsupported combination",
    "quota": "over a Bedrock quota",
    "budget": "over budget",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "estimate", help="rank candidate architectures by monthly cost under the workload's SLOs"
    )
    p.add_argument("file", help="workload spec (YAML or JSON)")
    p.add_argument(
        "--top", type=int, default=None, help="show the N cheapest (default: 10 in the table, all in JSON)"
    )
    p.add_argument("--json", action="store_true", help="print the JSON result (DESIGN.md contract)")
    p.add_argument(
        "--headroom", type=float, default=None, help="share of SLO capacity kept free at peak (0.2)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default=None, help="also write an HTML report to this path")
    p.set_defaults(func=run)


def _fmt_money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.0f}"


def render_table(result: dict[str, Any], top: int) -> str:
    rows = []
    for a in result["architectures"][:top]:
        p = a["predicted"]
        where = a["instance_type"] or a.get("bedrock", {}).get("model_id", "")
        hw = f"TP{a['tensor_parallel']} {a['quantization']}" if a["tensor_parallel"] else "per-token"
        reps = a["replicas"]
        rows.append(
            [
                a["rank"],
                a["deployment"],
                where,
                hw,
                f"{reps['min']}-{reps['peak']}" if reps else "-",
                f"{p['ttft_ms']['p95']:.0f}",
                f"{p['tpot_ms']['p95']:.1f}",
                f"{p['e2e_s']['p95']:.2f}",
                _fmt_money(a["cost"]["usd_per_month"]),
                _fmt_money(a["cost"].get("usd_per_month_spot")),
                f"{a['cost']['usd_per_million_output_tokens']:.2f}"
                if a["cost"].get("usd_per_million_output_tokens")
                else "-",
            ]
        )
    head = [
        "#",
        "deploy",
        "instance / model",
        "config",
        "replicas",
        "TTFT p95 ms",
        "TPOT p95 ms",
        "e2e p95 s",
        "per month",
        "spot/month",
        "$/M out",
    ]
    return table(head, rows)


def run(args: argparse.Namespace) -> int:
    from sizing.plan import DEFAULT_HEADROOM, estimate

    spec = load_spec(args.file)
    bar = ProgressBar()
    try:
        result = estimate(
            spec,
            top=args.top if args.json else None,
            headroom=DEFAULT_HEADROOM if args.headroom is None else args.headroom,
            seed=args.seed,
            progress=bar,
        )
    finally:
        bar.close()
    if args.report:
        from sizing.report import write_report

        write_report(result, args.report)
    if args.json:
        print_json(result)
        return 0
    w = result["workload"]
    print(f"{w['name']}: {w['model']}")
    print(
        f"  peak {w['peak_rps']:.2f} req/s ({w['peak_concurrency']:.0f} in flight), average {w['avg_rps']:.2f} req/s;"
        f" tokens in {w['input_tokens']['mean']:.0f} / out {w['output_tokens']['mean']:.0f} (mean)"
    )
    print(f"  SLO: {w['slo']}")
    s = result["search"]
    print(
        f"  searched {s['hardware_options']} hardware options, simulated {s['simulated']},"
        f" {s['feasible']} feasible architectures, {s['seconds']:.2f} s\n"
    )
    if result["architectures"]:
        print(render_table(result, args.top or 10))
        best = result["architectures"][0]
        print(f"\nbest: {best['id']} — {_fmt_money(best['cost']['usd_per_month'])}/month on-demand", end="")
        if best["cost"].get("usd_per_month_spot"):
            print(
                f", {_fmt_money(best['cost']['usd_per_month_spot'])}/month with spot above the base", end=""
            )
        print()
        err = (best.get("calibration") or {}).get("expected_error") or {}
        if err:
            typical = ", ".join(f"{k.upper()} ±{err[k]:.0%}" for k in ("ttft", "tpot") if k in err)
            print(
                f"  its predictions are typically within {typical} of a measurement (cross-validated median"
                f" error; calibration: {best['calibration']['basis']})"
            )
    else:
        print("no architecture meets the SLOs:", result.get("infeasible", {}).get("message", ""))
    reasons: dict[str, int] = {}
    for r in result["rejected"]:
        key = KIND_LABELS.get(r.get("kind", ""), "other")
        reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        print("rejected: " + ", ".join(f"{n} {k}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1])))
    return 0
