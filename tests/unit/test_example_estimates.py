"""The example workloads' estimates, to the last digit: a change that is meant to leave the planner's answers alone
(a refactor, a split, a typed reader) leaves them as they were recorded. A change that moves them on purpose
re-records them and says why (tests/support/record_example_estimates.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.examples import EXAMPLES, example_estimate, fingerprint

RECORDED = Path(__file__).parents[1] / "fixtures" / "estimates" / "examples.json"


@pytest.mark.parametrize("stem", [p.stem for p in EXAMPLES])
def test_the_example_estimate_is_the_recorded_one(stem: str):
    # GIVEN the example's estimate as recorded
    recorded = json.loads(RECORDED.read_text())["estimates"][stem]
    # WHEN the planner estimates the example now
    now = fingerprint(example_estimate(stem))
    # THEN its ranking, costs and replicas are the recorded ones, and so is every other figure of the document
    assert now["architectures"] == recorded["architectures"], (
        "the example's ranking moved: if on purpose, re-record (tests/support/record_example_estimates.py WHY)"
    )
    assert now["sha256"] == recorded["sha256"], (
        "the example's estimate moved beyond its ranking and costs: if on purpose, re-record"
        " (tests/support/record_example_estimates.py WHY)"
    )
