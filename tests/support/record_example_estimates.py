"""Re-record the example workloads' estimates (tests/fixtures/estimates/examples.json) from the planner as it is, for
a change that moves them on purpose (a refitted calibration, a new price, a model change; say why in the file's
`about`). The example-estimates test (tests/unit/test_example_estimates.py) then holds every later change to them
to the last digit: a refactor must leave them as they were.

    .venv/bin/python tests/support/record_example_estimates.py "why they were re-recorded"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from support.examples import EXAMPLES, example_estimate, fingerprint

RECORDED = Path(__file__).parents[1] / "fixtures" / "estimates" / "examples.json"


def main() -> int:
    why = " ".join(sys.argv[1:]).strip()
    if not why:
        print("usage: record_example_estimates.py WHY (the reason joins the file's `about`)", file=sys.stderr)
        return 2
    data = (
        json.loads(RECORDED.read_text())
        if RECORDED.exists()
        else {"about": "The example workloads' estimates"}
    )
    if why.rstrip(".") not in data["about"]:
        data["about"] = data["about"].rstrip(".") + f"; re-recorded: {why.rstrip('.')}."
    data["estimates"] = {path.stem: fingerprint(example_estimate(path.stem)) for path in EXAMPLES}
    RECORDED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"re-recorded {len(data['estimates'])} estimates in {RECORDED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
