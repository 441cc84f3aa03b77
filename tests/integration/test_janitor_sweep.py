"""The janitor finds run-labelled resources on a (fake) cluster and on SageMaker (moto) and removes those of
finished or expired runs — and nothing else."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from fakes.kube import FakeKube
from moto import mock_aws
from pytest_httpserver import HTTPServer

from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.eks import EksProvisioner
from sizing.deploy.janitor import DynamoRunStatus, InMemoryRunStatus, decide, sweep
from sizing.deploy.kube import KubeClient
from sizing.deploy.sagemaker import SageMakerProvisioner

pytestmark = pytest.mark.integration

#: 2026-01-01T00:00:00Z, when the fake cluster says every object was created.
CREATED = 1_767_225_600.0
HOUR = 3600.0
GPU = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
SM = DeployTarget.from_id("sagemaker:g4dn.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")


@pytest.fixture
def kube(httpserver: HTTPServer) -> tuple[FakeKube, KubeClient]:
    fake = FakeKube().with_hf_secret()
    httpserver.expect_request(re.compile(".*")).respond_with_handler(fake.werkzeug_handler)
    return fake, KubeClient(httpserver.url_for("/"))


@pytest.fixture
def sagemaker() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sagemaker", region_name="us-east-1")


def provision(client: KubeClient, sm: Any, run_id: str, started: float) -> None:
    """Provision one EKS and one SageMaker candidate of a run that started at `started` (4 h deadline)."""
    EksProvisioner(client, poll_s=0, clock=lambda: started).apply(GPU, run_id, GPU.id)
    SageMakerProvisioner("arn:aws:iam::123456789012:role/sm", client=sm, clock=lambda: started).apply(
        SM, run_id, SM.id
    )


def runs_left(fake: FakeKube, sm: Any) -> set[str]:
    eks = {
        o["metadata"]["labels"][L.RUN_ID]
        for o in fake.objects.values()
        if L.RUN_ID in o["metadata"].get("labels", {})
    }
    arns = [e["EndpointArn"] for e in sm.list_endpoints()["Endpoints"]]
    arns += [c["EndpointConfigArn"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]
    arns += [m["ModelArn"] for m in sm.list_models()["Models"]]
    tagged = {t["Value"] for a in arns for t in sm.list_tags(ResourceArn=a)["Tags"] if t["Key"] == L.RUN_ID}
    return eks | tagged


def test_finished_and_expired_runs_are_swept_and_running_ones_kept(
    kube: tuple[FakeKube, KubeClient], sagemaker: Any
) -> None:
    fake, client = kube
    # given four runs: finished, running within its deadline, running past it, and cancelling
    now = CREATED + 2 * HOUR
    provision(client, sagemaker, "run-done", CREATED)
    provision(client, sagemaker, "run-live", CREATED + HOUR)
    provision(client, sagemaker, "run-late", CREATED - 3 * HOUR)
    provision(client, sagemaker, "run-cancel", CREATED)
    lookup = InMemoryRunStatus(
        {"run-done": "SUCCEEDED", "run-live": "RUNNING", "run-late": "RUNNING", "run-cancel": "CANCELLING"}
    )
    # when the janitor sweeps
    report = sweep(lookup, kube=client, sagemaker=sagemaker, now=now)
    # then only the running run within its deadline is left, and the shared namespace is untouched
    assert runs_left(fake, sagemaker) == {"run-live"}
    assert report.kept_runs == ["run-live"]
    assert report.errors == []
    assert "llm-sizing" in fake.names("Namespace")
    reasons = {(s.run_id, s.reason) for s in report.deleted}
    assert ("run-done", "run SUCCEEDED") in reasons
    assert ("run-late", "past its deadline") in reasons
    # each swept run lost its 6 Kubernetes objects, its NodeClaim and its 3 SageMaker resources
    assert len(report.deleted) == 3 * (6 + 1 + 3)


def test_an_unknown_runs_resources_go_once_older_than_the_longest_run(
    kube: tuple[FakeKube, KubeClient], sagemaker: Any
) -> None:
    fake, client = kube
    EksProvisioner(client, poll_s=0, clock=lambda: CREATED + 10 * HOUR).apply(GPU, "run-ghost", GPU.id)
    lookup = InMemoryRunStatus({})
    # the deadline (set at apply) has not passed, but the objects are older than the orphan limit
    early = sweep(lookup, kube=client, now=CREATED + HOUR, orphan_after_s=4 * HOUR)
    assert early.deleted == [] and early.kept_runs == ["run-ghost"]
    late = sweep(lookup, kube=client, now=CREATED + 5 * HOUR, orphan_after_s=4 * HOUR)
    assert {s.reason for s in late.deleted} == {"unknown run, older than 4 h"}
    assert fake.names("NodePool") == []


def test_a_dry_run_reports_without_deleting(kube: tuple[FakeKube, KubeClient], sagemaker: Any) -> None:
    fake, client = kube
    provision(client, sagemaker, "run-done", CREATED)
    report = sweep(InMemoryRunStatus({"run-done": "FAILED"}), kube=client, sagemaker=sagemaker, dry_run=True)
    assert report.dry_run and len(report.deleted) == 6 + 1 + 3
    assert runs_left(fake, sagemaker) == {"run-done"}


def test_an_unreachable_cluster_does_not_stop_the_sagemaker_sweep(sagemaker: Any) -> None:
    # given a SageMaker endpoint of a finished run and a cluster nobody answers on
    SageMakerProvisioner("arn:aws:iam::123456789012:role/sm", client=sagemaker).apply(SM, "run-done", SM.id)
    dead = KubeClient("http://127.0.0.1:9", timeout_s=1)
    # when
    report = sweep(InMemoryRunStatus({"run-done": "SUCCEEDED"}), kube=dead, sagemaker=sagemaker)
    # then the endpoint is gone and the cluster problem is reported
    assert sagemaker.list_endpoints()["Endpoints"] == []
    assert report.errors and report.errors[0].startswith("listing eks")


def test_decide_in_words() -> None:
    assert decide("SUCCEEDED", None, None, now=0, orphan_after_s=1) == "run SUCCEEDED"
    assert decide("RUNNING", 10.0, None, now=5, orphan_after_s=1) is None
    assert decide("RUNNING", 10.0, None, now=10, orphan_after_s=1) == "past its deadline"
    assert decide(None, None, 0.0, now=3600, orphan_after_s=7200) is None
    assert decide("PENDING", None, 0.0, now=10**6, orphan_after_s=1) is None  # known and not expired


@mock_aws
def test_dynamo_lookup_reads_the_run_item_status() -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="runs",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(
        TableName="runs", Item={"PK": {"S": "RUN#r1"}, "SK": {"S": "RUN"}, "status": {"S": "FAILED"}}
    )
    lookup = DynamoRunStatus("runs", ddb)
    assert lookup.status("r1") == "FAILED"
    assert lookup.status("r2") is None
