"""Reliability figures: runs the reliability suite (tests/reliability) and prints what it tried and what was
lost — inputs fuzzed (API from its OpenAPI document, hostile bodies, CLI, Slack), faults injected into sizing runs
on the embedded default, concurrent requests held, security checks. docs/reliability.md quotes these figures.
Prints figures; the suite's own assertions decide pass or fail.

    .venv/bin/python benchmarks/reliability.py            # everything, slow tests included (~10 min)
    .venv/bin/python benchmarks/reliability.py --quick    # the default test selection only (~1-2 min)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = "tests/reliability"
#: Characters of a run's error shown per fault.
ERROR_CHARS = 90


def run_suite(quick: bool) -> tuple[dict[str, Any], str, float]:
    """Run the suite with $RELIABILITY_FIGURES set; return its figures, pytest's summary line and the wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        figures_path = Path(tmp) / "figures.json"
        env = {**os.environ, "RELIABILITY_FIGURES": str(figures_path), "POWERTOOLS_LOG_LEVEL": "CRITICAL"}
        marker = "not slow and not e2e" if quick else "not e2e"
        cmd = [sys.executable, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider", "-m", marker]
        start = time.monotonic()
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - start
        lines = [ln for ln in out.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
        summary = lines[-1].strip("= ") if lines else f"pytest exited {out.returncode}"
        if out.returncode != 0:
            print(out.stdout[-4000:], file=sys.stderr)
        figures = (
            json.loads(figures_path.read_text())
            if figures_path.exists()
            else {"sums": {}, "observations": []}
        )
    return figures, summary, elapsed


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in cells[1:]]
    )


def report(figures: dict[str, Any], summary: str, elapsed: float, quick: bool) -> str:
    sums: dict[str, dict[str, int]] = figures.get("sums", {})
    obs: list[dict[str, Any]] = figures.get("observations", [])
    out = [f"Reliability suite ({'quick' if quick else 'full'}): {summary} in {elapsed:.0f} s", ""]

    bad = [
        ("API, schemathesis (OpenAPI, per operation)", "bad_input.schemathesis", "cases", "server_errors"),
        ("API, schemathesis stateful (calls)", "bad_input.schemathesis_stateful", "calls", "server_errors"),
        (
            "API, hostile bodies x routes x content types",
            "bad_input.hostile_bodies",
            "requests",
            "server_errors",
        ),
        ("API, odd paths and queries", "bad_input.odd_paths", "requests", "server_errors"),
        ("API, specs naming a server file", "bad_input.server_files", "requests", "server_errors"),
        (
            "API, almost-right workload specs (POST /estimates)",
            "bad_input.structured_specs",
            "specs",
            "server_errors",
        ),
        ("CLI, sizing predict arguments", "bad_input.cli_predict", "calls", "tracebacks"),
        ("CLI, spec files (workload/estimate)", "bad_input.cli_spec_files", "files", "tracebacks"),
        ("Slack, /sizing messages", "bad_input.slack_messages", "messages", None),
    ]
    rows: list[list[Any]] = []
    total = 0
    for label, key, count, failures in bad:
        s = sums.get(key, {})
        if not s:
            continue
        total += s.get(count, 0)
        rows.append([label, s.get(count, 0), s.get(failures, 0) if failures else "-", s.get("written", 0)])
    out += [
        "Bad input",
        table(rows, ["source", "inputs", "5xx / tracebacks", "partial writes"]),
        f"total inputs: {total}",
        "",
    ]

    faults = [o for o in obs if o["name"] == "fault"]
    rows = [
        [
            f["fault"],
            f["execution"],
            f["run_status"],
            (f.get("error") or "-")[:ERROR_CHARS],
            f["processes_seen"],
            f["left_behind"],
        ]
        for f in faults
    ]
    out += [
        "Faults injected (embedded default)",
        table(rows, ["fault", "execution", "GET /runs/{id}", "error shown", "processes seen", "left behind"]),
        "",
    ]

    rows = []
    for o in obs:
        if o["name"] == "concurrency.runs":
            rows.append(
                [
                    "POST /runs, same and different Idempotency-Key",
                    o["requests"],
                    f"{o['containers']} containers",
                    f"{o['keys']} keys, {o['conflicts_retried']} 409s retried, {o['runs_stored']} runs, {o['executions']} executions",
                    o["lost"],
                    o["duplicated"],
                ]
            )
        elif o["name"] == "concurrency.estimates":
            rows.append(
                [
                    "POST /estimates, identical",
                    o["requests"],
                    f"{o['containers']} containers",
                    "all 200, one ranking",
                    o["lost"],
                    0,
                ]
            )
        elif o["name"] == "concurrency.cancels":
            rows.append(
                [
                    "POST /runs/{id}/cancel, one run",
                    o["requests"],
                    f"{o['containers']} containers",
                    f"{o['accepted']} accepted, {o['conflicts']} conflicts, ends {o['final']}",
                    0,
                    0,
                ]
            )
        elif o["name"] == "concurrency.serve":
            rows.append(
                [
                    "sizing serve burst (mixed)",
                    o["requests"],
                    f"{o['threads']} threads",
                    f"{o['server_errors']} 5xx, {o['keys']} keys",
                    0,
                    o["duplicated"],
                ]
            )
    out += [
        "Concurrent requests (loopback, bounded)",
        table(rows, ["what", "requests", "parallelism", "outcome", "lost", "duplicated"]),
        "",
    ]

    rows = []
    for o in obs:
        if o["name"] == "security.iam":
            rows.append(
                [
                    "IAM least privilege (template.yaml)",
                    f"{o['resources_checked']} resources",
                    f"{o['problems']} problems",
                ]
            )
        elif o["name"] == "security.kubernetes":
            rows.append(
                [
                    "Kubernetes objects by run label",
                    f"{o['requests_checked']} API requests, {o['foreign_objects']} foreign objects",
                    f"{o['foreign_changed']} foreign changed, {o['deletes']} deletes (all ours)",
                ]
            )
    tampered = sums.get("security.slack_tampered", {}).get("requests", 0)
    if tampered:
        rows.append(["Slack signature", f"{tampered} tampered requests", "all refused"])
    out += ["Security", table(rows, ["check", "tried", "result"])]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the default (not slow) tests")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = parser.parse_args()
    figures, summary, elapsed = run_suite(args.quick)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    print(report(figures, summary, elapsed, args.quick))
    return 0 if "failed" not in summary else 1


if __name__ == "__main__":
    raise SystemExit(main())
