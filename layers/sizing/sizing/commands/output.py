"""JSON on standard output for the commands' `--json` (tables and labels: `sizing.base.text`)."""

from __future__ import annotations

import json
import sys
from typing import Any

#: The exit code of `sizing estimate` when no architecture meets the SLOs, and of `sizing predict` when the
#: deployment does not fit in memory (0: answered; 2: bad input). Here, not beside the result it describes, so
#: `sizing predict` starts without importing the result models.
EXIT_NO_ARCHITECTURE = 3


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
