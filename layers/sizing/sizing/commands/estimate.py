"""`sizing estimate FILE [--top N] [--json] [--report out.html]`: architectures ranked by cost under the SLOs."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from sizing.answer import AnswerRow, answer_rows, region_text, with_rows
from sizing.base.text import table
from sizing.commands.output import EXIT_NO_ARCHITECTURE, print_json
from sizing.outcome import impossible_constraints
from sizing.plan.traceeffect import with_effect
from sizing.results import Allowance, Architecture, EstimateResult, factors_read
from sizing.results.blocks import SearchStats
from sizing.workload.derived import resolve
from sizing.workload.parse import load_spec
from sizing.workload.spec import WorkloadSpec

#: Reasons the table gives for Bedrock's absence at most (one per offer refused; the JSON has every one).
BEDROCK_REASONS_SHOWN = 3
#: Searches shorter than this show no progress bar.
PROGRESS_AFTER_S = 1.0


class ProgressBar:
    """A one-line progress bar on stderr, shown only when the search outlasts PROGRESS_AFTER_S and stderr is a TTY."""

    def __init__(self, stream: Any = None) -> None:
        # stderr as it is now (a default argument would keep the one of import time, closed under a test's capture)
        self.stream = stream if stream is not None else sys.stderr
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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "estimate",
        help="rank candidate architectures by monthly cost under the workload's SLOs (exit 3 when none meets"
        " them, 2 for bad input)",
    )
    p.add_argument("file", help="workload spec (YAML or JSON)")
    p.add_argument(
        "--top", type=int, default=None, help="show the N cheapest (default: 10 in the table, all in JSON)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the JSON result (sizing.results.EstimateResult; docs/api.md)",
    )
    p.add_argument(
        "--headroom", type=float, default=None, help="share of SLO capacity kept free at peak (0.2)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default=None, help="also write an HTML report to this path")
    p.set_defaults(func=run)


def _fmt_money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.0f}"


def _fmt_figure(x: float | None, digits: int) -> str:
    """A predicted latency in the table's unit, or `-` where the answer has none (a Bedrock batch job states only
    its completion window, not per-request TTFT or TPOT)."""
    return "-" if x is None else f"{float(x):.{digits}f}"


#: Above this an e2e figure is a job's wall time, printed in hours (86400.00 s reads as a typo, 24.0 h does not).
E2E_HOURS_FROM_S = 3600.0


def _fmt_e2e(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{float(x) / 3600:.1f} h" if float(x) >= E2E_HOURS_FROM_S else f"{float(x):.2f}"


def _metric_label(key: str) -> str:
    """`e2e_s.p95` -> `e2e p95`."""
    metric, _, pct = key.partition(".")
    return f"{metric.split('_', 1)[0]} {pct}".strip()


def _headroom(a: Architecture) -> str:
    """Load headroom (spare share of the SLO capacity at peak) and the tightest SLO's latency margin:
    `68% load, e2e p95 41%`."""
    h = a.headroom
    load = h.load_pct if h is not None else a.headroom_pct
    parts = [] if load is None else [f"{float(load):.0f}% load"]
    if h is not None and h.tightest and h.tightest_pct is not None:
        parts.append(f"{_metric_label(h.tightest)} {float(h.tightest_pct):.0f}%")
    return ", ".join(parts) or "-"


def _replicas(row: AnswerRow) -> str:
    f = row.figures
    if f.replicas_peak is None:
        return "-"
    return f"{f.replicas_min}-{f.replicas_peak}"


def render_table(result: EstimateResult, top: int, rows: list[AnswerRow] | None = None) -> str:
    """The ranked rows (`sizing.answer`): the figures that apply to each row's kind; a job has no requests in
    flight at a steady rate, so its cell is `-`."""
    shown = (rows if rows is not None else answer_rows(result))[:top]
    archs = result.architectures[:top]
    pcts = shown[0].figures.percentiles if shown else {"ttft_ms": "p95", "tpot_ms": "p95", "e2e_s": "p95"}
    lines = []
    for row, a in zip(shown, archs, strict=True):
        f = row.figures
        lines.append(
            [
                row.rank,
                row.deployment.lower(),
                row.where,
                row.config.removesuffix(f" {a.engine}") if a.engine else row.config,
                row.kind,
                row.tier,
                _replicas(row),
                _fmt_figure(f.in_flight, 1),
                _fmt_figure(f.ttft_ms, 0),
                _fmt_figure(f.tpot_ms, 1),
                _fmt_e2e(f.e2e_s),
                _headroom(a),
                _fmt_money(f.usd_per_month),
                _fmt_money(f.usd_per_month_spot),
                f"{f.usd_per_million_output_tokens:.2f}" if f.usd_per_million_output_tokens else "-",
            ]
        )
    head = [
        "#",
        "deploy",
        "instance / model",
        "config",
        "kind",
        "tier",
        "replicas",
        "in flight",
        f"TTFT {pcts['ttft_ms']} ms",
        f"TPOT {pcts['tpot_ms']} ms",
        f"e2e {pcts['e2e_s']} s",
        "headroom",
        "per month",
        "spot/month",
        "$/M out",
    ]
    return table(head, lines)


def render_notes(result: EstimateResult, top: int, rows: list[AnswerRow] | None = None) -> list[str]:
    """Per row: what it rests on, its quotas and availability (the row's qualifiers), what tuning changed, a job's
    cost and wall time, spot, and the dearer instance sizes folded into it."""
    lines = []
    shown = (rows if rows is not None else answer_rows(result))[:top]
    for row, a in zip(shown, result.architectures[:top], strict=True):
        notes: list[str] = [row.basis]
        notes += [q.message for q in row.quotas]
        if (phrase := row.availability_phrase()) is not None:
            notes.append(phrase)
        tuning = a.tuning
        if tuning is not None and tuning.summary and tuning.changed:
            notes.append(tuning.summary)
        batch = a.batch
        if batch is not None:
            what = {
                "batch job": "Bedrock batch inference",
                "async job": "SageMaker asynchronous inference job",
            }.get(row.kind, "the day's requests on a real-time endpoint")
            notes.append(f"{what}: {_fmt_money(batch.usd_per_job)} a job, done within {batch.wall_time_h} h")
        spot = a.spot
        if a.capacity_type == "spot" and spot is not None and spot.message:
            notes.append(spot.message)
        others = [o for o in a.also_fits_on if o.instance_type]
        if others:
            notes.append(
                "also fits on "
                + ", ".join(f"{o.instance_type} ({_fmt_money(o.usd_per_month)}/month)" for o in others)
            )
        lines.append(f"  #{a.rank} " + "; ".join(notes))
    return lines


def render_managed(result: EstimateResult) -> list[str]:
    """The managed offers priced but not ranked (they miss an SLO), one line each: what they would cost and why
    they are not in the table, so a buyer sees the managed price beside the hosted answers."""
    ranked = {a.id for a in result.architectures}
    reasons = {r.id: r.reason for r in result.rejected}
    lines = []
    for m in result.managed_options:
        if m.id in ranked or m.meets_slo:
            continue
        why = reasons.get(m.id) or "misses an SLO"
        quota = m.quota
        flag = f"; {quota.message}" if quota is not None and quota.needs_increase and quota.message else ""
        lines.append(f"  not ranked: {m.id} {_fmt_money(m.cost.usd_per_month)}/month -- {why}{flag}")
    return lines


def _estimate(args: argparse.Namespace, spec: WorkloadSpec) -> EstimateResult:
    """The estimate, with a progress bar while the search runs."""
    from sizing.plan.search import DEFAULT_HEADROOM, estimate

    bar = ProgressBar()
    options: dict[str, Any] = {
        "top": args.top if args.json else None,
        "headroom": DEFAULT_HEADROOM if args.headroom is None else args.headroom,
        "seed": args.seed,
    }
    try:
        result = estimate(spec, progress=bar, slo_cost=True, **options)
    finally:
        bar.close()
    # a replayed trace: the same workload with Poisson arrivals at the same means, to say what the trace changed
    return with_effect(spec, result, lambda twin: estimate(twin, **options))


def _print_header(result: EstimateResult) -> None:
    """The workload as resolved, and what the search covered."""
    w = result.workload
    tokens_in = w.input_tokens.mean if w.input_tokens is not None else None
    tokens_out = w.output_tokens.mean if w.output_tokens is not None else None
    print(f"{w.name}: {w.model}")
    print(
        f"  peak {w.peak_rps or 0.0:.2f} req/s, average {w.avg_rps or 0.0:.2f} req/s;"
        f" tokens in {tokens_in or 0.0:.0f} / out {tokens_out or 0.0:.0f} (mean)"
    )
    print(f"  SLO: {w.slo.model_dump(exclude_none=True) if w.slo is not None else {}}")
    trace = w.trace
    if trace is not None and trace.effect is not None and trace.effect.model_fields_set:
        print(f"  trace: {trace.effect.summary}")
    for note in trace.notes if trace is not None else []:
        print(f"  trace: {note}")
    if (where := region_text(result.region)) is not None:
        print(f"  {where}")
    s = result.search or SearchStats()
    print(
        f"  searched {s.hardware_options} hardware options, simulated {s.simulated},"
        f" {s.feasible} feasible architectures, {s.seconds or 0.0:.2f} s\n"
    )


def _print_best(best: Architecture) -> None:
    """The cheapest architecture's monthly cost, and how close its predictions typically come to a measurement."""
    print(f"\nbest: {best.id} — {_fmt_money(best.cost.usd_per_month)}/month on-demand", end="")
    if best.cost.usd_per_month_spot:
        print(f", {_fmt_money(best.cost.usd_per_month_spot)}/month with spot above the base", end="")
    print()
    allowance = best.headroom.allowance if best.headroom is not None else None
    if allowance is not None:
        print(f"  {allowance_line(allowance)}")
    calibration = best.calibration
    err = calibration.expected_error if calibration is not None else {}
    if calibration is not None and err:
        typical = ", ".join(f"{k.upper()} ±{err[k]:.0%}" for k in ("ttft", "tpot") if k in err)
        print(
            f"  its predictions are typically within {typical} of a measurement (cross-validated median"
            f" error; calibration: {calibration.basis})"
        )


def allowance_line(a: Allowance) -> str:
    """What a sizing at a confidence allowed for the estimator's error at the busiest hour, in one line."""
    return (
        f"sized at confidence {a.confidence:g}: predicted {factors_read(a.latency, a.amplification)} at its busiest"
        f" hour, capacity x{a.capacity:.2f} (the estimator's held-out error at that quantile)"
    )


def _print_ranking(result: EstimateResult, top: int) -> None:
    """The ranked table with its notes, the managed offers not ranked, the summary and the best answer."""
    rows = answer_rows(result)
    print(render_table(result, top, rows))
    print(
        "  in flight: requests per replica at peak (simulated; none for a job); headroom: spare share of the SLO"
        " capacity at peak, and the tightest SLO's margin below its limit"
    )
    notes = render_notes(result, top, rows)
    if notes:
        print("\n".join(notes))
    managed = render_managed(result)
    if managed:
        print("\n".join(managed))
    costs = slo_cost_lines(result)
    if costs:
        print("\n" + "\n".join(costs))
    if result.summary:
        print(f"\n{result.summary}")
    _print_best(result.architectures[0])


def slo_cost_lines(result: EstimateResult) -> list[str]:
    """What each stated SLO target costs: `TTFT p99 150 ms → 300 ms: $784,350 → $96,033/month`, each relaxed
    alone (bound doubled), the binding one marked."""
    costs = [c for c in result.slo_costs if c.line]
    if not costs:
        return []
    lines = ["cost of each SLO (each target relaxed alone, its bound doubled):"]
    lines += [f"  {c.line}" + ("  <- binds" if c.binding else "") for c in costs]
    return lines


def _print_infeasible(result: EstimateResult) -> None:
    inf = result.infeasible
    binding = (inf.binding if inf is not None else None) or "-"
    message = (inf.message if inf is not None else None) or ""
    print(f"no architecture meets the SLOs (exit {EXIT_NO_ARCHITECTURE}): binding SLO {binding}; {message}")
    costs = slo_cost_lines(result)
    if costs:
        print("\n".join(costs))


def _print_rejected(result: EstimateResult) -> None:
    """How many candidates each kind of reason rejected, most first."""
    reasons: dict[str, int] = {}
    for r in result.rejected:
        key = KIND_LABELS.get(r.kind, "other")
        reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        print("rejected: " + ", ".join(f"{n} {k}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1])))
    for line in bedrock_left_out(result):
        print(line)


def bedrock_left_out(result: EstimateResult) -> list[str]:
    """Why Bedrock is not in the ranking, when it was considered and none of its offers ranked (residency, a
    model Bedrock does not offer, a quota): one line each, so it is not dropped without a word."""
    if any(a.deployment == "bedrock" for a in result.architectures):
        return []
    why = [r.reason for r in result.rejected if r.id.startswith("bedrock:") and r.reason]
    return [f"Bedrock: {reason}" for reason in dict.fromkeys(why)][:BEDROCK_REASONS_SHOWN]


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.file)
    estimated = _estimate(args, spec)
    refusal = impossible_constraints(estimated, spec)
    if refusal is not None:
        raise refusal  # exit 2: the constraints contradict the model, nothing could be estimated
    if args.report:
        from sizing.report import write_report

        # the report's curves re-simulate exactly what the table's figures came from: this workload, this seed
        write_report(estimated.document(), args.report, workload=resolve(spec), seed=args.seed)
    exit_code = 0 if estimated.architectures else EXIT_NO_ARCHITECTURE
    if args.json:
        print_json(with_rows(estimated))
        return exit_code
    print_answer(estimated, args.top or TABLE_TOP)
    return exit_code


#: Rows the table shows unless `--top` says otherwise.
TABLE_TOP = 10


def print_answer(result: EstimateResult, top: int = TABLE_TOP) -> None:
    """The answer as the default output prints it: the workload, the ranked rows with their notes, the cost of each
    SLO and the summary (or why nothing is feasible), and what was rejected."""
    _print_header(result)
    if result.architectures:
        _print_ranking(result, top)
    else:
        _print_infeasible(result)
    _print_rejected(result)
