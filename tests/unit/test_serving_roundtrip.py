"""What is estimated is what is deployed: for every EKS architecture of every example workload, the serving
configuration read back from the rendered container is the one the estimator simulated."""

from __future__ import annotations

import pytest
from support.examples import EXAMPLES, example_estimate

from sizing.base.serving_config import ServingConfig
from sizing.deploy.manifests import render, serving_from_manifests
from sizing.deploy.rendering import RENDERED_ENGINES
from sizing.perf.config import HardwareConfig
from sizing.perf.step import StepModel


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_container_arguments_parse_back_to_the_estimated_serving_config(path):
    # given every architecture the planner ranks for an example workload
    result = example_estimate(path.stem)
    eks = [a for a in result["architectures"] if a["deployment"] == "eks" and a["engine"] in RENDERED_ENGINES]
    assert eks
    for arch in eks:
        estimated = ServingConfig.model_validate(arch["serving"])
        # when its manifests are rendered and the Deployment's container is read back
        deployed = serving_from_manifests(render(arch, "run-1", arch["id"]))
        # then the deployment is exactly the configuration that was estimated
        assert deployed == estimated, arch["id"]


def test_the_estimator_simulates_the_serving_config_it_states():
    # given the chatbot's best EKS architecture
    result = example_estimate("chatbot")
    arch = next(a for a in result["architectures"] if a["deployment"] == "eks")
    serving = ServingConfig.model_validate(arch["serving"])
    # when the step model of that configuration is built
    sm = StepModel.for_config(HardwareConfig.from_serving(serving, arch["instance_type"]))
    # then its scheduler limits and KV cache are the ones the architecture states
    assert sm.max_model_len == serving.max_model_len
    assert sm.max_num_seqs == serving.max_num_seqs
    assert sm.max_num_batched_tokens == serving.max_num_batched_tokens
    assert sm.prefix_caching == serving.enable_prefix_caching
    assert sm.kv_capacity_tokens == arch["per_replica"]["kv_cache_tokens"]
