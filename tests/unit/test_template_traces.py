"""The trace-reading parts of template.yaml: the stack reads request traces only from the buckets its
TraceBuckets parameter names, with GetObject and ListBucket alone, and grants that to exactly what reads a trace
(the API's estimate, the run's estimate and collect steps, a watch's re-sizing, the load generator that
replays it)."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.store.schema import load_template

#: What reads a workload's trace: the API (POST /estimates), the run's estimate and collect steps (each builds the
#: workload model), the re-sizing of a saved watch on a release, and the load generator (it replays the trace).
READERS = {"ApiFunction", "StepEstimateFunction", "StepCollectFunction", "ReleaseFanoutFunction"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(load_template())


def test_traces_are_read_only_from_the_named_buckets_and_only_read(template: dict[str, Any]) -> None:
    # GIVEN the trace-reading policy
    policy = template["Resources"]["TraceReadPolicy"]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    # THEN it exists only where buckets are named, and allows reading objects and listing those buckets alone
    assert policy["Condition"] == "HasTraceBuckets"
    assert template["Parameters"]["TraceBuckets"]["Default"] == ""
    assert sorted(st["Action"] for st in statements) == ["s3:GetObject", "s3:ListBucket"]
    for st in statements:
        assert "TraceBuckets" in str(st["Resource"]) and "*" not in str(st["Resource"]).replace("/*", "")


def test_what_reads_a_trace_holds_the_policy_and_nothing_else_does(template: dict[str, Any]) -> None:
    # GIVEN the template's functions and the load generator's role
    resources = template["Resources"]
    holders = {
        name
        for name, res in resources.items()
        if res["Type"] == "AWS::Serverless::Function"
        and "TraceReadPolicy" in str(res["Properties"].get("Policies"))
    }
    # THEN exactly the readers hold it (when buckets are named), and the load generator's task role is attached
    assert holders == READERS
    assert resources["TraceReadPolicy"]["Properties"]["Roles"] == [{"Ref": "LoadTestTaskRole"}]
