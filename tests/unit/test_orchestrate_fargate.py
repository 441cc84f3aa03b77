"""The Fargate launcher's request to ECS (checked against ECS's API model by botocore's Stubber): the load
generator's one task is sized for the workers its sweep needs."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sizing.orchestrate.budget import sweep_workers, workers_for
from sizing.orchestrate.launchers import FargateLauncher
from sizing.orchestrate.settings import OrchestrationSettings

SETTINGS = OrchestrationSettings(
    TABLE_NAME="llm-sizing-test",
    LOADTEST_CLUSTER_ARN="loadtest",
    LOADTEST_MASTER_TASK_DEF="llm-sizing-loadtest",
    LOADTEST_SUBNETS="subnet-1",
)


def _expected(cpu: str, memory: str) -> dict[str, Any]:
    return {
        "cluster": "loadtest",
        "taskDefinition": "llm-sizing-loadtest",
        "launchType": "FARGATE",
        "count": 1,
        "networkConfiguration": ANY,
        "overrides": {"cpu": cpu, "memory": memory, "containerOverrides": ANY},
        "tags": ANY,
        "startedBy": ANY,
    }


@pytest.mark.parametrize(
    ("streams", "cpu", "memory"), [(64, "4096", "8192"), (640, "8192", "16384"), (2048, "16384", "32768")]
)
def test_the_task_is_sized_for_the_workers_of_the_sweeps_highest_level(streams, cpu, memory):
    # given a load task whose highest level needs workers_for(streams) workers
    task = {"run_id": "r1", "candidate_id": "c1", "workers": workers_for(streams), "levels": [streams]}
    ecs = boto3.client("ecs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    # when the launcher starts it, then ECS is asked for the size that holds the master and every worker at
    # 2 vCPU / 4 GB each (a request ECS's API model accepts)
    with Stubber(ecs) as stub:
        stub.add_response("run_task", {"tasks": [{"taskArn": "arn:task/1"}]}, _expected(cpu, memory))
        out = FargateLauncher(SETTINGS, ecs_client=ecs).start(task)
        stub.assert_no_pending_responses()
    assert out == {"launched": "fargate", "tasks": ["arn:task/1"]}


def test_a_sweeps_workers_follow_its_highest_level_and_the_embedded_default_keeps_one_process():
    # given the configured workers on AWS (2) and on the embedded default (0, one process)
    # then a sweep up to 2,048 streams of a plain-HTTP endpoint gets the 7 its highest level needs, a small one the
    # configured 2, one read without the kernel's stamps (SageMaker) the 5 of its lower density at 1,024, and the
    # embedded default never starts workers
    got = (
        sweep_workers(2, [256, 1024, 2048]),
        sweep_workers(2, [8, 16, 32]),
        sweep_workers(2, [1024], stamped=False),
        sweep_workers(0, [1024]),
    )
    assert got == (7, 2, 5, 0)
