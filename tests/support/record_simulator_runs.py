"""Re-record the simulator's recorded runs (tests/fixtures/simulator/recorded_runs.json) from the simulator as it is,
for a change that moves its figures on purpose (say why in the file's `about`); the recorded-runs test
(tests/unit/test_perf_simulator_scheduler.py) then holds every later change to them.

    .venv/bin/python tests/support/record_simulator_runs.py "why they were re-recorded"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from sizing.perf.simulator import simulate
from support.replicas import CHAT_IN, CHAT_OUT, replica

RECORDED = Path(__file__).parents[1] / "fixtures" / "simulator" / "recorded_runs.json"
#: what the recorded-runs test simulates
N_REQUESTS, SEED = 400, 11


def main() -> int:
    why = " ".join(sys.argv[1:]).strip()
    if not why:
        print("usage: record_simulator_runs.py WHY (the reason joins the file's `about`)", file=sys.stderr)
        return 2
    data = json.loads(RECORDED.read_text())
    runs = {}
    for name in data["runs"]:
        sm, load, prefix_tokens = replica(name)
        res = simulate(
            sm, load, CHAT_IN, CHAT_OUT, n_requests=N_REQUESTS, seed=SEED, prefix_tokens=prefix_tokens
        )
        runs[name] = {
            **res.as_dict(),
            "output_tokens_generated": res.output_tokens_generated,
            "truncated": res.truncated,
        }
    if why.rstrip(".") not in data["about"]:
        data["about"] = data["about"].rstrip(".") + f"; and {why.rstrip('.')}."
    data["runs"] = runs
    RECORDED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"re-recorded {len(runs)} runs in {RECORDED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
