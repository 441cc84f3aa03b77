"""The API fuzzed as an outside client would: schemathesis `--checks all` against `sizing serve --max-runs 1`, from
the document the server serves, on two seeds. Checks every answer against the document (status, content type,
headers, schema), that schema-valid requests are accepted and schema-violating ones refused, 405 for undeclared
methods, that a deleted run is gone (use after free), no stack trace in any answer (tests/support/api_checks.py),
and no answer slower than API Gateway's 29 s integration limit. The one exception to schemathesis' defaults is
tests/integration/schemathesis.toml's (a reused Idempotency-Key with another body answers 422).

Targets (issue "The contract says what the server accepts"): 0 failures, 0 5xx, no answer over 29 s, 30 examples
per operation, on each seed. Prints, per seed: time, calls, 5xx, slowest answer, failures; exits 1 when a target is
missed (CI: `make fuzz-api`, from .ci/run).

Runs measure an endpoint that refuses every connection (as tests/integration/test_api_serve.py's fuzz does): the
fuzz checks the API's answers, and generated workloads measured by twins and load generators would only spend the
cores. Everything talks to 127.0.0.1.

    .venv/bin/python benchmarks/api_fuzz.py [--seeds 1 2] [--examples 30]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONFIG = ROOT / "tests" / "integration" / "schemathesis.toml"
HOOKS = ROOT / "tests" / "support" / "api_checks.py"
#: API Gateway's integration timeout for REST APIs: no answer of the deployed API may take longer.
ANSWER_LIMIT_S = 29.0
#: Generated examples per operation (the issue's target).
EXAMPLES = 30
#: Two seeds: a pass on one may be luck of the draw.
SEEDS = (1, 2)
#: Seconds to wait for `sizing serve` to print its address (moto, the stack and the resolver start in ~5-10 s,
#: several times that on a busy machine).
START_TIMEOUT_S = 180
#: Seconds schemathesis itself waits for an answer: past the limit, so that a slow answer is reported as slow (the
#: max_response_time check) rather than as a timeout.
REQUEST_TIMEOUT_S = 120
#: Seconds `sizing serve` may take to stop (it cancels what still runs and tears it down) before it is killed.
STOP_TIMEOUT_S = 60
#: One seed's whole fuzz, at most (it took ~10 minutes on a busy 2-core machine).
RUN_TIMEOUT_S = 1800


def serve(out: Path, refused_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`sizing serve --max-runs 1` on a free port, its output to a file (a pipe nobody reads would fill and stop
    the server); returns the process and its URL once it has printed its banner."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *(
                    str(BIN / "sizing"),
                    "serve",
                    "--port",
                    "0",
                    "--quiet",
                    "--max-runs",
                    "1",
                    "--out",
                    str(out),
                ),
                *("--step-seconds", "1.5", "--endpoint", refused_url),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end and proc.poll() is None:
        banner = log.read_text(errors="replace")
        found = re.search(r"http://127\.0\.0\.1:\d+", banner)
        if found and "signing secret" in banner:
            return proc, found.group(0)
        time.sleep(0.5)
    stop(proc)
    raise SystemExit(f"sizing serve did not start: {log.read_text(errors='replace')[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fuzz(url: str, seed: int, examples: int, report: Path) -> dict[str, Any]:
    """One schemathesis run; its figures from the HAR report (every call, its status and time)."""
    # the first answer of a new server builds the document and warms the resolver (seconds on a busy machine):
    # fetched once here, so schemathesis' own load of it (10 s at most) is not what is measured
    with urllib.request.urlopen(f"{url}/openapi.json", timeout=START_TIMEOUT_S) as doc:
        doc.read()
    started = time.monotonic()
    result = subprocess.run(
        [
            *(str(BIN / "schemathesis"), "--config-file", str(CONFIG), "run", f"{url}/openapi.json"),
            *("--checks", "all", "--max-response-time", str(ANSWER_LIMIT_S), "--seed", str(seed)),
            *(
                "--max-examples",
                str(examples),
                "--generation-database",
                "none",
                "--workers",
                "1",
                "--no-color",
            ),
            *(
                "--request-timeout",
                str(REQUEST_TIMEOUT_S),
                "--report",
                "har",
                "--report-har-path",
                str(report),
            ),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
        timeout=RUN_TIMEOUT_S,
    )
    elapsed = time.monotonic() - started
    entries = json.loads(report.read_text())["log"]["entries"] if report.exists() else []
    failures = re.search(r"(\d+) unique failures?", result.stdout)
    return {
        "seed": seed,
        "seconds": elapsed,
        "calls": len(entries),
        "server_errors": sum(1 for e in entries if e["response"]["status"] >= 500),
        "slowest_s": max((e["time"] for e in entries), default=0.0) / 1000,
        "failures": int(failures.group(1)) if failures else (0 if result.returncode == 0 else -1),
        "returncode": result.returncode,
        "output": result.stdout,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--examples", type=int, default=EXAMPLES)
    args = parser.parse_args()
    print(
        f"schemathesis --checks all, {args.examples} examples per operation, sizing serve --max-runs 1",
        flush=True,
    )
    print(f"{'seed':>4} {'time':>8} {'calls':>6} {'5xx':>4} {'slowest':>8} {'failures':>8}", flush=True)
    missed = False
    with tempfile.TemporaryDirectory(prefix="api-fuzz-") as tmp, socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # a port held but never listened on: every connection to it is refused
        refused = f"http://127.0.0.1:{held.getsockname()[1]}"
        for seed in args.seeds:
            # a fresh server per seed: one seed's runs and watches do not shape the next one's answers
            proc, url = serve(Path(tmp) / f"serve-{seed}", refused)
            try:
                f = fuzz(url, seed, args.examples, Path(tmp) / f"seed-{seed}.har")
            finally:
                stop(proc)
            print(
                f"{f['seed']:>4} {f['seconds']:>7.0f}s {f['calls']:>6} {f['server_errors']:>4}"
                f" {f['slowest_s']:>7.1f}s {f['failures']:>8}",
                flush=True,
            )
            if f["returncode"] != 0 or f["server_errors"] or f["slowest_s"] > ANSWER_LIMIT_S:
                missed = True
                print(f["output"][-8000:], flush=True)
    print(
        f"targets (0 failures, 0 5xx, no answer over {ANSWER_LIMIT_S:g} s): {'MISSED' if missed else 'met'}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
