"""Compute of the functions in template.yaml: the ones that run the planner while a caller waits get a full vCPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.store.schema import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
#: Lambda allots one full vCPU at 1,769 MB and a proportional share below it
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
FULL_VCPU_MB = 1769


@pytest.mark.parametrize(
    "function",
    [
        "ApiFunction",  # POST /estimates answers with the planner's result
        "SlackCommandsFunction",  # /size answers Slack within its 3 s
        "SlackInteractionsFunction",
        "StepEstimateFunction",  # the run's estimate step
        "ReleaseFanoutFunction",  # re-sizes a release's watches, two estimates each
    ],
)
def test_a_function_that_runs_the_planner_has_a_full_vcpu(function):
    # given the deployed template and its Globals
    template = load_template(TEMPLATE)
    default_mb = template["Globals"]["Function"]["MemorySize"]
    # when the function's memory is read (its own, else the Globals')
    memory = template["Resources"][function]["Properties"].get("MemorySize", default_mb)
    # then it is at least the size at which Lambda gives one whole vCPU: the planner is one CPU-bound thread, and
    # on a share of a vCPU it answers proportionally slower than the benchmarks measure on one core
    assert memory >= FULL_VCPU_MB, f"{function}: {memory} MB is {memory / FULL_VCPU_MB:.2f} of a vCPU"
