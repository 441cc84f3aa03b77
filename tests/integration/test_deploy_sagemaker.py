"""SageMakerProvisioner on moto: model → endpoint config → endpoint, tagged; teardown by tag."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sizing.base.aws import tag_map
from sizing.base.errors import InvalidInput
from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.kube import ProvisioningError
from sizing.deploy.sagemaker import SageMakerProvisioner

pytestmark = pytest.mark.integration

ROLE = "arn:aws:iam::123456789012:role/sagemaker-execution"
#: moto validates instance types against an older list: g4dn.12xlarge (4x T4) is on it.
ARCH = DeployTarget.from_id(
    "sagemaker:g4dn.12xlarge:tp4:int4:vllm:on-demand",
    "meta-llama/Llama-3.1-8B",
    replicas={"peak": 3, "min": 2},
)


@pytest.fixture
def sm() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sagemaker", region_name="us-east-1")


def names(sm: Any) -> dict[str, list[str]]:
    return {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        "configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sm.list_models()["Models"]],
    }


def test_apply_creates_a_tagged_endpoint_configured_from_the_architecture(sm: Any) -> None:
    # given
    prov = SageMakerProvisioner(ROLE, client=sm, clock=lambda: 1_800_000_000.0)
    # when
    endpoint = prov.apply(ARCH, "run-sm", ARCH.id)
    # then one model, config and endpoint exist under one name, tagged with the run, candidate and deadline
    name = endpoint.details["endpoint_name"]
    assert names(sm) == {"endpoints": [name], "configs": [name], "models": [name]}
    desc = sm.describe_endpoint(EndpointName=name)
    tags = tag_map(sm.list_tags(ResourceArn=desc["EndpointArn"])["Tags"])
    assert tags[L.RUN_ID] == "run-sm" and tags[L.CANDIDATE_ID] == ARCH.id
    assert int(tags[L.EXPIRES_AT]) == 1_800_000_000 + 4 * 3600
    variant = sm.describe_endpoint_config(EndpointConfigName=name)["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g4dn.12xlarge"
    assert variant["InitialInstanceCount"] == 2
    env = sm.describe_model(ModelName=name)["PrimaryContainer"]["Environment"]
    assert env["OPTION_TENSOR_PARALLEL_DEGREE"] == "4"
    assert env["OPTION_QUANTIZE"] == "bitsandbytes"
    assert endpoint.url.endswith(f"/endpoints/{name}/invocations")
    assert prov.ready(endpoint)


def test_reapply_reuses_what_exists(sm: Any) -> None:
    prov = SageMakerProvisioner(ROLE, client=sm)
    first = prov.apply(ARCH, "run-sm", ARCH.id)
    assert prov.apply(ARCH, "run-sm", ARCH.id) == first
    assert len(names(sm)["endpoints"]) == 1


def test_teardown_removes_only_the_runs_tagged_resources(sm: Any) -> None:
    # given endpoints of two runs
    prov = SageMakerProvisioner(ROLE, client=sm)
    prov.apply(ARCH, "run-a", ARCH.id)
    keep = prov.apply(ARCH, "run-b", ARCH.id)
    # when run-a is torn down
    report = prov.teardown("run-a")
    # then its three resources are deleted and run-b's remain
    assert len(report.deleted) == 3 and report.complete
    only = keep.details["endpoint_name"]
    assert names(sm) == {"endpoints": [only], "configs": [only], "models": [only]}


def test_a_failed_apply_leaves_nothing(sm: Any) -> None:
    # given a candidate whose endpoint SageMaker refuses (after its model and config were created)
    prov = SageMakerProvisioner(ROLE, client=sm)
    original = sm.create_endpoint

    def refuse(**kwargs: Any) -> Any:
        raise sm.exceptions.ClientError(
            {"Error": {"Code": "ResourceLimitExceeded", "Message": "quota"}}, "CreateEndpoint"
        )

    sm.create_endpoint = refuse
    # when
    with pytest.raises(ProvisioningError, match="quota"):
        prov.apply(ARCH, "run-fail", ARCH.id)
    sm.create_endpoint = original
    # then the model and config created before are gone
    assert names(sm) == {"endpoints": [], "configs": [], "models": []}


def test_the_endpoint_states_the_serving_config_as_estimated(sm: Any) -> None:
    # given an -Instruct model on its hardware defaults
    arch = DeployTarget.from_id(
        "sagemaker:g4dn.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B-Instruct"
    )
    serving = arch.resolve().serving
    assert serving is not None
    # when
    endpoint = SageMakerProvisioner(ROLE, client=sm).apply(arch, "run-sm", arch.id)
    env = sm.describe_model(ModelName=endpoint.details["endpoint_name"])["PrimaryContainer"]["Environment"]
    # then LMI is told the served model exactly as named and every setting of the ServingConfig
    assert env["HF_MODEL_ID"] == endpoint.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert env["OPTION_MAX_MODEL_LEN"] == str(serving.max_model_len)
    assert env["OPTION_MAX_ROLLING_BATCH_SIZE"] == str(serving.max_num_seqs)
    assert env["OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS"] == str(serving.max_num_batched_tokens)
    assert env["OPTION_GPU_MEMORY_UTILIZATION"] == str(serving.gpu_memory_utilization)
    assert env["OPTION_KV_CACHE_DTYPE"] == "auto"
    assert env["OPTION_ENABLE_PREFIX_CACHING"] == str(serving.enable_prefix_caching).lower()


def test_an_engine_lmi_does_not_run_is_refused_before_anything_is_created(sm: Any) -> None:
    arch = DeployTarget.from_id("sagemaker:g4dn.12xlarge:tp4:bf16:tgi:on-demand", "meta-llama/Llama-3.1-8B")
    with pytest.raises(InvalidInput) as info:
        SageMakerProvisioner(ROLE, client=sm).apply(arch, "run-sm", arch.id)
    assert [p.field for p in info.value.problems] == ["serving.engine"]
    assert names(sm) == {"endpoints": [], "configs": [], "models": []}
