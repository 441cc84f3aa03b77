"""The scheduled janitor function: a sample EventBridge event in, finished runs' resources out, a metric."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import boto3
import pytest
from fakes.kube import FakeKube
from fakes.lambda_context import lambda_context
from moto import mock_aws
from pytest_httpserver import HTTPServer
from support.events import load_event

from sizing.base.errors import InvalidInput
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.eks import EksProvisioner
from sizing.deploy.kube import KubeClient
from sizing.deploy.sagemaker import SageMakerProvisioner
from sizing.lambdas import load_function
from sizing.store.schema import create_table

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TABLE = "llm-sizing-janitor-test"
GPU = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
SM = DeployTarget.from_id("sagemaker:g4dn.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")


def load_handler() -> ModuleType:
    """The function as a fresh container sees it: settings and clients built from this test's environment."""
    app = load_function("functions/janitor/")
    app.services.set(None)
    return app


@pytest.fixture
def context() -> SimpleNamespace:
    return lambda_context("llm-sizing-janitor-dev", timeout_s=300, memory_mb=512)


def test_the_scheduled_sweep_removes_a_finished_runs_resources_and_counts_them(
    httpserver: HTTPServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    context: SimpleNamespace,
) -> None:
    fake = FakeKube().with_hf_secret()
    httpserver.expect_request(re.compile(".*")).respond_with_handler(fake.werkzeug_handler)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LLMSizingTest")
    with mock_aws():
        # given a finished run and a running one, each with an EKS and a SageMaker candidate
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb, TABLE)
        sm = boto3.client("sagemaker", region_name="us-east-1")
        kube = KubeClient(httpserver.url_for("/"))
        for run, status in (("run-done", "SUCCEEDED"), ("run-live", "RUNNING")):
            ddb.put_item(
                TableName=TABLE, Item={"PK": {"S": f"RUN#{run}"}, "SK": {"S": "RUN"}, "status": {"S": status}}
            )
            EksProvisioner(kube, poll_s=0).apply(GPU, run, GPU.id)
            SageMakerProvisioner("arn:aws:iam::123456789012:role/sm", client=sm).apply(SM, run, SM.id)
        # and the function's environment pointing at that table and cluster
        monkeypatch.setenv("TABLE_NAME", TABLE)
        monkeypatch.setenv("EKS_CLUSTER_NAME", "sizing")
        monkeypatch.setenv("EKS_ENDPOINT", httpserver.url_for("/").rstrip("/"))
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        app = load_handler()
        # when the schedule fires
        result = app.lambda_handler(load_event("janitor_scheduled"), context)
        # then the finished run's 10 resources are gone, the running run is kept
        assert {d["run_id"] for d in result["deleted"]} == {"run-done"}
        assert len(result["deleted"]) == 6 + 1 + 3
        assert result["kept_runs"] == ["run-live"]
        assert result["errors"] == []
        assert len(sm.list_endpoints()["Endpoints"]) == 1
    # and a ResourcesDeleted metric of 10 was emitted
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert any(m.get("ResourcesDeleted") == [10.0] or m.get("ResourcesDeleted") == 10.0 for m in emf)


def test_settings_refuse_a_missing_table() -> None:
    app = load_handler()
    with pytest.raises(InvalidInput, match="TABLE_NAME"):
        app.JanitorSettings.from_env({"EKS_CLUSTER_NAME": "sizing"})
    s = app.JanitorSettings.from_env({"TABLE_NAME": "t", "DRY_RUN": "true", "SWEEP_SAGEMAKER": "false"})
    assert s.dry_run and not s.sweep_sagemaker and s.eks_cluster_name == ""
