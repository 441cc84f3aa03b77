"""What the release tests share: the model the sample release announces and a small workload to watch or
estimate with."""

from __future__ import annotations

import json
from typing import Any

#: A state machine that succeeds at once: the release tests start runs without running them.
TRIVIAL_ASL = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
#: The model the sample release announces: not in the shipped catalog (which has only its -Instruct variant).
RELEASED = "meta-llama/Llama-4-Scout-17B-16E"


def support_chat(model: str) -> dict[str, Any]:
    """A 5 requests/s chat workload on `model`, held to g6e/p5 with fp8 so each estimate stays about a second."""
    return {
        "name": "support-chat",
        "model": model,
        "rate": {"peak_rps": 5},
        "tokens": {"input": {"mean": 1000, "p95": 3000}, "output": {"mean": 200, "p95": 500}},
        "slo": {"ttft_ms": {"p95": 1500}, "tpot_ms": {"p95": 80}},
        "constraints": {
            "deployments": ["eks"],
            "instance_families": ["g6e", "p5"],
            "quantizations": ["fp8"],
            "capacity": ["on-demand"],
        },
    }
