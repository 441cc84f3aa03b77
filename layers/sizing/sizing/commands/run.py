"""`sizing run FILE [--endpoint URL] [--top K] [--out DIR]`: a full sizing run on the embedded default.

The same state machine as in AWS executes on moto; candidates become local twins (or the given endpoint), real
Locust load-tests them, and the ranking shows their figures beside the predicted ones at the same load level.
A twin's figures are our own model's simulation: they are labelled "simulated (twin)", an endpoint's "measured"."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from sizing.base.errors import InvalidInput, Problem
from sizing.base.text import ORIGIN_LABELS, table
from sizing.base.vocabulary import ENDPOINT, TWIN
from sizing.catalog import load_catalog
from sizing.results import Architecture, Measured, Predicted
from sizing.upgrade import upgrade_result
from sizing.workload.parse import load_spec


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sizing_local import add_level_seconds

    p = sub.add_parser("run", help="estimate, provision, load-test and rank on the embedded default (no AWS)")
    p.add_argument("file", help="workload spec (YAML or JSON)")
    p.add_argument(
        "--endpoint", default=None, help="measure this OpenAI-compatible URL instead of local twins"
    )
    p.add_argument(
        "--hardware",
        default=None,
        metavar="INSTANCE_TYPE",
        help="with --endpoint: the instance type the server runs on (such as g6e.xlarge); the run measures the"
        " estimate's architecture on it, so its levels calibrate that hardware (docs/learning.md)",
    )
    p.add_argument(
        "--served-model",
        default=None,
        metavar="NAME",
        help="with --endpoint: the name the server serves the workload's model under (vLLM's"
        " --served-model-name); default: the server's only model when it serves one (GET /v1/models)",
    )
    p.add_argument(
        "--capacity-search",
        action="store_true",
        help="after each candidate's closed-loop levels, search its arrival rate at the SLO edge with a confidence"
        " interval (docs/loadgen.md; minutes a candidate), and re-price a row only when that interval excludes the"
        " estimate's capacity",
    )
    p.add_argument("--top", type=int, default=3, help="candidates to measure (default 3)")
    p.add_argument("--out", default=None, help="results folder (default runs/<time>)")
    add_level_seconds(p)
    p.add_argument("--budget", type=float, default=None, help="refuse when measuring would cost more (USD)")
    p.add_argument("--json", action="store_true", help="print the result JSON")
    p.set_defaults(func=run)


def _fmt(v: Any, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def run(args: argparse.Namespace) -> int:
    from sizing_local.stack import run_local

    if not 1 <= args.top <= 10:
        raise InvalidInput("--top must be between 1 and 10", [Problem("top", f"{args.top}")])
    spec = load_spec(args.file)  # clear errors before anything starts
    raw = spec.model_dump(mode="json", exclude_none=True)
    served = None
    if args.endpoint and not args.hardware:
        raise InvalidInput(
            "--endpoint needs --hardware INSTANCE_TYPE, the instance type the server runs on: its figures belong to"
            " that hardware only, and without it they would be filed under another (nothing was run or stored)",
            [Problem("hardware", "needs a value with --endpoint")],
        )
    if args.served_model and not args.endpoint:
        raise InvalidInput(
            "--served-model names the model of the server --endpoint measures; give --endpoint URL too",
            [Problem("served_model", "needs --endpoint")],
        )
    if args.hardware:
        raw = _on_hardware(raw, args.hardware, args.endpoint)
        served = _served_model(args.endpoint, args.served_model, spec.model)
    out = Path(args.out or f"runs/{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}")
    start = time.monotonic()

    def on_state(kind: str, name: str) -> None:
        if kind == "entered":
            print(f"[{time.monotonic() - start:6.1f}s] {name}", file=sys.stderr, flush=True)
        else:
            print(f"[{time.monotonic() - start:6.1f}s]   failed: {name}", file=sys.stderr, flush=True)

    result = run_local(
        raw,
        top_k=args.top,
        endpoint_url=args.endpoint,
        served_model=served,
        out_dir=out,
        step_s=args.step_seconds,
        warmup_s=args.warmup_seconds,
        budget_usd=args.budget,
        on_state=on_state,
        extra_env={"LOADTEST_CAPACITY_SEARCH": "true"} if args.capacity_search else None,
    )
    payload = {
        "run": result.run,
        "execution_status": result.execution.get("status"),
        "ranking": result.ranking,
        "architectures": result.architectures,
        "measurements": result.measurements,
    }
    (out / "result.json").write_text(json.dumps(payload, indent=2, default=str))
    _write_report(payload, out)
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
        return 0 if result.run["status"] == "SUCCEEDED" else 1
    run_ = result.run
    print(f"\nrun {run_['run_id']}: {run_['status']}" + (f" — {run_['error']}" if run_.get("error") else ""))
    archs = upgrade_result({"architectures": result.architectures[:10]}, "run's result").architectures
    twin = any(a.measured is not None and a.measured.origin == TWIN for a in archs)
    label = ORIGIN_LABELS[TWIN if twin else ENDPOINT]
    short = "sim (twin)" if twin else "meas"
    rows = []
    for a in archs:
        m = a.measured or Measured()
        # predicted at the load level the run measured, when the run re-simulated it; else at the peak
        at = m.predicted_at_level
        p = a.predicted
        if at is not None and at.model_fields_set:
            p = Predicted(ttft_ms=at.ttft_ms, tpot_ms=at.tpot_ms, e2e_s=at.e2e_s)
        rows.append(
            [
                a.rank or "-",
                a.id,
                _fmt(p.ttft_ms.p95),
                _fmt(m.ttft_ms.p95 if m.ttft_ms else None),
                _fmt(p.e2e_s.p95, 2),
                _fmt(m.e2e_s.p95 if m.e2e_s else None, 2),
                _fmt(a.per_replica.rps_slo_limit if a.per_replica else None, 2),
                _capacity_cell(m),
                "yes" if a.meets_slo else "no",
                f"${a.cost.usd_per_month:,.0f}",
            ]
        )
    print(
        table(
            [
                "#",
                "architecture",
                "TTFT p95 ms pred",
                short,
                "e2e p95 s pred",
                short,
                "max rps/replica pred",
                short,
                "meets SLO",
                "per month",
            ],
            rows,
        )
    )
    if twin:
        how = (
            f"'{short}' figures are {label}: a local twin serves at our own performance model's pace, so they"
            " check the pipeline, not the model's accuracy"
        )
    else:
        how = f"'{short}' figures are {label} on the endpoint"
    replayed = any(a.measured is not None and a.measured.trace_digest for a in archs)
    levels = "level of the recorded trace replayed (open loop)" if replayed else "closed-loop level"
    print(
        f"\n{how}. They are at the highest {levels} that met the SLOs (the lowest level when none did);"
        " the predicted ones are re-simulated at that same level (at the peak operating point for a row the run"
        " did not load); max rps/replica is the arrival rate at which the SLOs still hold (before headroom): the"
        " capacity search's, with the interval its confident verdicts bound it to"
    )
    _print_notes(archs)
    print(f"results: {out / 'result.json'}; report: {out / 'report.html'}")
    return 0 if run_["status"] == "SUCCEEDED" else 1


def _print_notes(archs: list[Architecture]) -> None:
    """Per measured row: the capacity search's verdict, whose deployment was measured, where the server differs."""
    for a in archs:
        m = a.measured or Measured()
        if m.capacity is not None and m.capacity.verdict and not m.measured_on:
            print(f"capacity: {a.id}: {m.capacity.verdict}")
        if m.note:
            print(f"note: {a.id}: {m.note}")
        if m.differs:
            print(
                f"note: {a.id} was measured on a server that runs otherwise than estimated: {'; '.join(m.differs)}"
            )


def _capacity_cell(measured: Measured) -> str:
    """The measured capacity per replica: the search's, with its interval, else the closed-loop levels'."""
    cap = measured.capacity
    if cap is None or not cap.model_fields_set:
        return _fmt(measured.capacity_rps, 2)
    if cap.capacity_rps is None:
        return "none met"
    return f"{cap.capacity_rps:.2f} ({_fmt(cap.low_rps, 2)}-{_fmt(cap.high_rps, 2)})"


def _on_hardware(raw: dict[str, Any], hardware: str, endpoint: str | None) -> dict[str, Any]:
    """The spec restricted to the instance type the user's server runs on (the estimate's architecture on it is
    what the run measures and attributes the levels to). InvalidInput naming --hardware otherwise."""

    if not endpoint:
        raise InvalidInput(
            "--hardware names the instance type of the server --endpoint measures; give --endpoint URL too",
            [Problem("hardware", "needs --endpoint")],
        )
    name = hardware.removeprefix("ml.")
    if name not in load_catalog().instances:
        raise InvalidInput(
            f"--hardware: unknown instance type '{hardware}' (sizing catalog instances lists them)",
            [Problem("hardware", f"'{hardware}' is not an instance type the catalog knows")],
        )
    constraints = {**(raw.get("constraints") or {}), "instance_types": [name]}
    return {**raw, "constraints": constraints}


def _served_model(endpoint: str, given: str | None, workload_model: str) -> str | None:
    """The name to send requests under: the one given, the workload's model when the server serves it, or the
    server's only model. InvalidInput, one line, when the server is down or serves another model."""
    from sizing.loadtest.server import describe_server, served_model

    name, facts = served_model(endpoint, given, prefer=workload_model)
    if facts is not None:
        print(describe_server(facts), file=sys.stderr)
    if name != workload_model:
        print(f"measuring {workload_model} as the server serves it: '{name}'", file=sys.stderr)
    return name


def _write_report(payload: dict[str, Any], out: Path) -> None:
    """The report folder: the HTML report of the run (measured beside predicted) and the result as YAML."""
    from sizing.report import write_run_report

    (out / "result.yaml").write_text(
        yaml.safe_dump(json.loads(json.dumps(payload, default=str)), sort_keys=False)
    )
    try:
        write_run_report(payload, out / "report.html")
    except Exception as exc:  # the report is a by-product: the run's results are already written
        print(f"report not written: {exc}", file=sys.stderr)
