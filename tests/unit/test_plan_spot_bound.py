"""The search's cost bound on a workload allowed only spot capacity: its architectures are ranked by their spot
cost, so the bound that prunes options must be a spot cost too, or a cheap-on-spot option is pruned by its
on-demand price and the top of the ranking misses it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sizing.plan import estimate
from sizing.workload.parse import parse_spec

#: A batch workload on EKS spot only, over two GPU families whose spot discounts differ: the g6 options are
#: dearer than g6e on demand but cheaper on spot, so an on-demand bound pruned one of the eight cheapest.
SPOT_ONLY: dict[str, Any] = {
    "name": "spot-summaries",
    "model": "Qwen/Qwen2.5-32B-Instruct",
    "preset": "batch",
    "rate": {"peak_rps": 3},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 3000, "p95": 8000}, "output": {"mean": 400, "p95": 900}},
    "slo": {"e2e_s": {"p99": 300}},
    "constraints": {
        "capacity": ["spot"],
        "deployments": ["eks"],
        "min_replicas": 1,
        "instance_families": ["g6", "g6e"],
    },
}
TOP = 8
#: More than the options of the workload: nothing is pruned, every option is simulated and ranked.
EXHAUSTIVE = 10_000
BOUND = re.compile(r"costs at least \$([\d,]+)/month")


def _ranked(result: dict[str, Any]) -> list[tuple[str, float]]:
    return [(a["id"], a["cost"]["usd_per_month_spot"]) for a in result["architectures"]]


@pytest.fixture(scope="module")
def searches() -> tuple[dict[str, Any], dict[str, Any]]:
    spec = parse_spec(SPOT_ONLY)
    return estimate(spec, top=TOP).document(), estimate(spec, top=EXHAUSTIVE).document()


def test_a_spot_only_workload_gets_the_top_an_exhaustive_search_gets(searches):
    # given a workload allowed only spot capacity
    pruned, exhaustive = searches
    # when the branch and bound ranks the top eight and an exhaustive search ranks every option
    # then both rank the same architectures first, at the same spot costs
    assert all(a["capacity_type"] == "spot" for a in exhaustive["architectures"])
    assert _ranked(pruned) == _ranked(exhaustive)[:TOP]


def test_every_pruned_option_costs_at_least_its_bound_on_spot(searches):
    # given the options the branch and bound pruned as dominated, with the bound it gave each
    pruned, exhaustive = searches
    dominated = [r for r in pruned["rejected"] if r["kind"] == "dominated"]
    assert dominated
    # when each is looked up in the exhaustive ranking
    for r in dominated:
        match = BOUND.search(r["reason"])
        assert match, r["reason"]
        bound = float(match.group(1).replace(",", ""))
        costs = [
            a["cost"]["usd_per_month_spot"] for a in exhaustive["architectures"] if f":{r['id']}:" in a["id"]
        ]
        # then the spot cost it is ranked by is at least its bound (the bound is shown rounded to the dollar)
        assert all(cost >= bound - 0.5 for cost in costs), (r["id"], bound, costs)
