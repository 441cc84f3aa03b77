"""How long a local run takes: `sizing run` end to end, and where its time goes.

    .venv/bin/python benchmarks/local_run.py [examples/chatbot.yaml] [--top 1] [--capacity-search] [--runs 1]
        [-- extra sizing run arguments]

Runs `sizing run` as a user would (a child process, the embedded AWS, local twins, real Locust), reads the state
timestamps it prints, and reports the wall time, the time to the first load test (start, estimate, provisioning)
and each candidate's load test, with the machine's load average before and after: on a shared machine the
figures are only as quiet as it was. The targets of the measurement issue: a one-candidate run with the capacity
search within 90 s, `make run` (the example chatbot, three candidates, no search) within 90 s.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STATE = re.compile(r"^\[\s*([\d.]+)s\]\s+(\S+)")


def one_run(args: argparse.Namespace, extra: list[str]) -> dict[str, object]:
    cmd = [sys.executable, "-m", "sizing.cli", "run", str(args.example), "--top", str(args.top)]
    if args.capacity_search:
        cmd.append("--capacity-search")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        began = time.monotonic()
        proc = subprocess.run([*cmd, "--out", out, *extra], capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - began
    states = [
        (float(m.group(1)), m.group(2)) for line in proc.stderr.splitlines() if (m := STATE.match(line))
    ]
    first_load = next((t for t, s in states if s == "LoadTest"), None)
    collect = next((t for t, s in states if s == "CollectAndRank"), None)
    return {"rc": proc.returncode, "wall_s": wall, "first_load_test_s": first_load, "collect_s": collect,
            "load_before": load_before, "load_after": os.getloadavg()[0],
            "tail": "" if proc.returncode == 0 else proc.stderr[-2000:]}  # fmt: skip


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("example", nargs="?", default=Path("examples/chatbot.yaml"), type=Path)
    ap.add_argument("--top", type=int, default=1)
    ap.add_argument("--capacity-search", action="store_true")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args(argv)
    what = f"sizing run {args.example} --top {args.top}" + (
        " --capacity-search" if args.capacity_search else ""
    )
    print(f"{what} {' '.join(extra)} on {os.cpu_count()} cores")
    for i in range(args.runs):
        r = one_run(args, extra)
        print(f"run {i + 1}: {r['wall_s']:.0f} s wall (exit {r['rc']}); first load test at {r['first_load_test_s']} s,"
              f" collect at {r['collect_s']} s; load average {r['load_before']:.1f} before, {r['load_after']:.1f}"
              f" after", flush=True)  # fmt: skip
        if r["tail"]:
            print(r["tail"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
