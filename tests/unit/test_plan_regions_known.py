"""Regions without guesses: hardware whose availability in the Region the dated price snapshot does not cover is
"unknown", never assumed sold: each such row says so (priced from us-east-1), or is left out on request."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.plan import estimate
from sizing.workload.parse import parse_spec


def _spec(region: str, **constraints: Any) -> dict[str, Any]:
    return {
        "name": "chat",
        "model": "llama-3.1-8b",
        "users": {"total": 2000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
        "tokens": {"input": {"mean": 1000, "p95": 3000}, "output": {"mean": 200, "p95": 500}},
        "slo": {"ttft_ms": {"p95": 1000}, "e2e_s": {"p95": 10}},
        "constraints": {
            "region": region,
            "deployments": ["eks"],
            "instance_types": ["g5.12xlarge", "p4d.24xlarge"],
            **constraints,
        },
    }


@pytest.mark.slow
def test_availability_in_a_snapshot_region_is_known_and_outside_it_unknown() -> None:
    # given a Region of the price snapshot and one outside it (London)
    inside = estimate(parse_spec(_spec("eu-west-1"))).document()
    outside = estimate(parse_spec(_spec("eu-west-2"))).document()
    # then in the snapshot's Region the rows are sold there at its prices; outside it each row is unknown and says
    # its price is us-east-1's
    assert inside["architectures"] and all(a["availability"] == "sold here" for a in inside["architectures"])
    assert all(a["price_region"] is None for a in inside["architectures"])
    assert outside["architectures"]
    assert all(a["availability"] == "unknown" for a in outside["architectures"])
    assert all(a["price_region"] == "us-east-1" for a in outside["architectures"])


@pytest.mark.slow
def test_require_known_availability_leaves_unknown_hardware_out_and_says_why() -> None:
    # given a Region outside the snapshot and the constraint
    result = estimate(parse_spec(_spec("eu-west-2", require_known_availability=True))).document()
    # then nothing of unknown availability is ranked, and each type left out says why
    assert result["architectures"] == []
    left = [r for r in result["rejected"] if "require_known_availability" in r["reason"]]
    assert {r["id"] for r in left} == {"g5.12xlarge@eu-west-2", "p4d.24xlarge@eu-west-2"}
    assert "known to be sold" in result["infeasible"]["message"]
