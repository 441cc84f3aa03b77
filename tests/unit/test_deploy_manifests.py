"""What `sizing.deploy.manifests.render` promises about the objects that run an architecture on EKS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sizing.base.errors import InvalidInput
from sizing.base.serving_config import vllm_args
from sizing.catalog import load_catalog
from sizing.cli import main
from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget, pick_architecture
from sizing.deploy.labels import ORDER
from sizing.deploy.manifests import SHARED_KINDS, render, serving_from_manifests, to_yaml
from sizing.deploy.rendering import AMI_VERSIONS, RenderOptions
from sizing.plan.cost import nodes_for
from sizing.plan.serving import serving_for

RUN = "run-01HZX"


def full_serving(
    model: str, instance: str, tp: int, quant: str, engine: str = "vllm", **changes: Any
) -> dict:
    """A complete `serving` dict: the engine's defaults for the hardware, with `changes`."""
    base = serving_for(load_catalog(), model, instance, tp, quant, engine)
    return base.model_copy(update=changes).model_dump()


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(objs)["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_a_gpu_architecture_gets_a_nodepool_restricted_to_its_instance_and_capacity_type() -> None:
    # given a 70B model at TP4 on p5 spot, peaking at 3 replicas (2 per node)
    arch = DeployTarget.from_id(
        "eks:p5.48xlarge:tp4:fp8:vllm:spot", "meta-llama/Llama-3.1-70B", replicas={"peak": 3, "min": 1}
    )
    # when
    pool = by_kind(render(arch, RUN))["NodePool"]["spec"]
    # then the pool launches only that type, spot, tainted for GPUs, and at most 2 nodes + 1 spare
    reqs = {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ["p5.48xlarge"]
    assert reqs["karpenter.sh/capacity-type"] == ["spot"]
    assert pool["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    ]
    assert pool["limits"]["nodes"] == "3"
    assert pool["limits"]["nvidia.com/gpu"] == "24"
    assert pool["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert pool["disruption"]["budgets"]


def test_family_restriction_uses_the_family_and_enough_gpus() -> None:
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp2:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    pool = by_kind(render(arch, RUN, options=RenderOptions(restrict_to="instance-family")))["NodePool"]
    reqs = {r["key"]: r for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.k8s.aws/instance-family"]["values"] == ["g6e"]
    assert reqs["karpenter.k8s.aws/instance-gpu-count"] == {
        "key": "karpenter.k8s.aws/instance-gpu-count",
        "operator": "Gte",
        "values": ["2"],
    }


def test_vllm_arguments_come_from_the_architecture() -> None:
    # given an architecture with the planner's serving settings
    arch = DeployTarget.from_dict(
        {
            "id": "eks:p5.48xlarge:tp4:fp8:vllm:on-demand",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "instance_type": "p5.48xlarge",
            "tensor_parallel": 4,
            "quantization": "fp8",
            "replicas": {"peak": 2, "min": 2},
            "serving": full_serving(
                "meta-llama/Llama-3.1-70B-Instruct",
                "p5.48xlarge",
                4,
                "fp8",
                max_model_len=6144,
                gpu_memory_utilization=0.92,
                max_num_seqs=128,
            ),
            "predicted": {"ignored": True},
        }
    )
    # when
    c = container(render(arch, RUN))
    # then
    for arg in (
        "--model=meta-llama/Llama-3.1-70B-Instruct",
        "--tensor-parallel-size=4",
        "--max-model-len=6144",
        "--gpu-memory-utilization=0.92",
        "--max-num-seqs=128",
        "--quantization=fp8",
    ):
        assert arg in c["args"]
    assert c["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}


def test_several_replicas_share_a_node_when_tp_is_smaller_than_its_gpus() -> None:
    # given TP1 on a 4-GPU g5.12xlarge: 4 replicas fit on one node
    arch = DeployTarget.from_id(
        "eks:g5.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas={"peak": 8, "min": 4}
    )
    objs = by_kind(render(arch, RUN))
    # then each pod asks for one GPU and a quarter of the node, and the pool allows 2 nodes + 1
    req = container(list(objs.values()))["resources"]["requests"]
    assert req["nvidia.com/gpu"] == "1"
    assert int(req["cpu"].removesuffix("m")) <= 48 * 1000 // 4
    assert objs["NodePool"]["spec"]["limits"]["nodes"] == "3"
    assert objs["Deployment"]["spec"]["replicas"] == 4
    assert objs["HorizontalPodAutoscaler"]["spec"]["maxReplicas"] == 8


def test_neuron_instances_get_neuron_devices_taint_and_image() -> None:
    # given Llama-70B over all 24 NeuronCores of an inf2.48xlarge (its 12 chips of 2 cores; tp_degree 24, the 64
    # heads padded to 72)
    arch = DeployTarget.from_id("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    objs = by_kind(render(arch, RUN))
    c = container(list(objs.values()))
    # then the pod asks for 12 Neuron chips, tolerates the Neuron taint and runs vLLM-Neuron
    assert c["resources"]["requests"]["aws.amazon.com/neuron"] == "12"
    assert "nvidia.com/gpu" not in c["resources"]["requests"]
    assert "neuron" in c["image"]
    assert not any(a.startswith("--gpu-memory-utilization") for a in c["args"])
    tol = objs["Deployment"]["spec"]["template"]["spec"]["tolerations"]
    assert tol[0]["key"] == "aws.amazon.com/neuron"
    assert objs["NodePool"]["spec"]["template"]["spec"]["taints"][0]["key"] == "aws.amazon.com/neuron"


def test_every_object_carries_the_run_and_candidate_labels() -> None:
    arch = DeployTarget.from_id("eks:g6.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = render(arch, RUN, arch.id)
    for obj in objs:
        if obj["kind"] in SHARED_KINDS:
            # the Namespace and the adapter rule serve every deployment: no run owns (or tears down) them
            assert obj["metadata"]["labels"] == {L.MANAGED_BY: L.MANAGER}
            continue
        assert obj["metadata"]["labels"][L.RUN_ID] == RUN
        assert obj["metadata"]["labels"][L.CANDIDATE_ID] == "eks-g6.12xlarge-tp4-bf16-vllm-on-demand"
        assert obj["metadata"]["annotations"][L.CANDIDATE_ID_FULL] == arch.id
    kinds = by_kind(objs)
    assert kinds["NodePool"]["spec"]["template"]["metadata"]["labels"][L.RUN_ID] == RUN
    pod = kinds["Deployment"]["spec"]["template"]["metadata"]
    assert pod["labels"][L.RUN_ID] == RUN


def test_rendering_twice_gives_the_same_objects_so_reapply_changes_nothing() -> None:
    arch = DeployTarget.from_id("eks:g6.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    assert render(arch, RUN) == render(arch, RUN)
    assert render(arch, RUN) != render(arch, "another-run")


def test_the_root_volume_holds_the_weights_of_every_replica_on_the_node() -> None:
    small = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    big = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-70B")

    def size(a: DeployTarget) -> int:
        bdm = by_kind(render(a, RUN))["EC2NodeClass"]["spec"]["blockDeviceMappings"]
        root = next(b for b in bdm if b.get("rootVolume"))
        return int(root["ebs"]["volumeSize"].removesuffix("Gi"))

    assert size(big) - size(small) >= 2 * (70.55 - 8.03) * 0.93  # bf16 bytes, in GiB
    assert size(big) >= 141


def test_bedrock_and_int8_without_a_checkpoint_are_refused_with_a_reason() -> None:
    with pytest.raises(InvalidInput, match="only EKS architectures"):
        render({"id": "bedrock:x", "model": "meta-llama/Llama-3.1-8B", "deployment": "bedrock"}, RUN)
    int8 = DeployTarget.from_id("eks:g6e.12xlarge:tp1:int8:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    with pytest.raises(InvalidInput, match="pre-quantized"):
        render(int8, RUN)
    c = container(render(int8, RUN, options=RenderOptions(checkpoints={"int8": "org/llama-8b-w8a8"})))
    assert "--model=org/llama-8b-w8a8" in c["args"]


def test_a_malformed_id_says_what_the_format_is() -> None:
    with pytest.raises(InvalidInput, match="deployment:instance_type:tpN"):
        DeployTarget.from_id("p5.48xlarge-tp4", "meta-llama/Llama-3.1-8B")


def test_to_yaml_round_trips() -> None:
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = render(arch, RUN)
    text = to_yaml(objs)
    assert "&id" not in text
    assert list(yaml.safe_load_all(text)) == objs


def answer(rank: int, arch_id: str, **fields: Any) -> dict[str, Any]:
    """An architecture as an estimate result states it: what every answer must (its id, model, deployment,
    engine, SLO verdict and monthly cost), and `fields`."""
    deployment = arch_id.split(":")[0]
    return {
        "rank": rank,
        "id": arch_id,
        "model": "meta-llama/Llama-3.1-8B",
        "deployment": deployment,
        "engine": "bedrock" if deployment == "bedrock" else "vllm",
        "meets_slo": True,
        "cost": {"usd_per_month": 1000.0 * rank},
        **fields,
    }


def test_pick_architecture_prefers_the_best_ranked_eks_entry() -> None:
    # given a result ranking Bedrock first and two EKS architectures after it
    result = {
        "architectures": [
            answer(2, "eks:g6.12xlarge:tp4:bf16:vllm:on-demand"),
            answer(1, "bedrock:meta.llama3-1-8b"),
            answer(3, "eks:g6e.12xlarge:tp4:bf16:vllm:on-demand"),
        ]
    }
    # when one is picked: the best, the best on EKS, and one by id
    # then each is read from the result as typed
    assert pick_architecture(result).id == "bedrock:meta.llama3-1-8b"
    assert pick_architecture(result, deployment="eks").id == "eks:g6.12xlarge:tp4:bf16:vllm:on-demand"
    assert pick_architecture(result, "eks:g6e.12xlarge:tp4:bf16:vllm:on-demand").rank == 3


def test_a_file_that_is_not_an_estimate_result_is_refused_naming_the_fields(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a file listing architectures that state only an id and a deployment
    f = tmp_path / "estimate.json"
    f.write_text(
        json.dumps(
            {"architectures": [{"id": "eks:g6.12xlarge:tp4:bf16:vllm:on-demand", "deployment": "eks"}]}
        )
    )
    # when manifests are asked for it
    rc = main(["manifests", "--architecture", str(f), "--run-id", "r1"])
    # then the CLI refuses it with exit 2, naming each missing field, without a stack trace or a type name
    err = capsys.readouterr().err
    assert rc == 2
    for field in ("model", "engine", "meets_slo", "cost"):
        assert f"result.architectures.0.{field}" in err
    assert "Traceback" not in err
    assert "EstimateResult" not in err


def test_cli_writes_one_yaml_file_per_kind(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # given an estimate result file holding two architectures
    result = {
        "architectures": [
            answer(1, "bedrock:meta.llama3-1-8b"),
            answer(
                2,
                "eks:g6.12xlarge:tp4:bf16:vllm:on-demand",
                instance_type="g6.12xlarge",
                tensor_parallel=4,
                replicas={"peak": 2, "min": 1, "mean": 1.5},
            ),
        ]
    }
    f = tmp_path / "estimate.json"
    f.write_text(json.dumps(result))
    # when
    rc = main(
        [
            "manifests",
            "--architecture",
            str(f),
            "--run-id",
            "r1",
            "--validate",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    # then
    assert rc == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [
        "configmap.yaml",
        "deployment.yaml",
        "ec2nodeclass.yaml",
        "horizontalpodautoscaler.yaml",
        "namespace.yaml",
        "nodepool.yaml",
        "poddisruptionbudget.yaml",
        "service.yaml",
    ]
    pool = yaml.safe_load((tmp_path / "out" / "nodepool.yaml").read_text())
    assert pool["metadata"]["labels"][L.RUN_ID] == "r1"


def test_cli_needs_a_model_for_a_bare_id(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["manifests", "--architecture", "eks:g6.12xlarge:tp4:bf16:vllm:on-demand"])
    assert rc == 2
    assert "--model" in capsys.readouterr().err


def test_cli_prints_yaml_for_an_id_and_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["manifests", "--architecture", "eks:g6.12xlarge:tp4:bf16:vllm:spot", "--model", "llama-3.1-8b"]
    )
    assert rc == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs][:3] == ["Namespace", "EC2NodeClass", "NodePool"]


def test_trn2_runs_at_its_default_lnc2_and_a_stated_lnc_is_passed_on() -> None:
    # given TP64 on trn2.48xlarge: 64 logical cores at the runtime's default LNC=2 (4 per chip), and one at LNC=1
    trn2 = DeployTarget.from_id("eks:trn2.48xlarge:tp64:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    resolved = trn2.resolve()
    assert resolved.serving is not None
    lnc1 = DeployTarget.from_id("eks:trn2.48xlarge:tp32:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    lnc1 = lnc1.model_copy(update={"serving": lnc1.resolve().serving.model_copy(update={"lnc": 1})})  # type: ignore[union-attr]
    inf2 = DeployTarget.from_id("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    # when their manifests are rendered
    env_trn2 = {e["name"]: e.get("value") for e in container(render(trn2, RUN))["env"]}
    env_lnc1 = {e["name"]: e.get("value") for e in container(render(lnc1, RUN))["env"]}
    env_inf2 = {e["name"]: e.get("value") for e in container(render(inf2, RUN))["env"]}
    # then the default leaves the runtime at LNC=2, a stated LNC=1 is set, and inf2 has none
    assert "NEURON_LOGICAL_NC_CONFIG" not in env_trn2
    assert env_lnc1["NEURON_LOGICAL_NC_CONFIG"] == "1"
    assert "NEURON_LOGICAL_NC_CONFIG" not in env_inf2
    # and the pod asks for the chips that hold its cores: 64 logical cores at 4 a chip = 16 chips (one 16-chip
    # node); 32 physical cores at 8 a chip = 4 chips
    assert container(render(trn2, RUN))["resources"]["requests"]["aws.amazon.com/neuron"] == "16"
    assert container(render(lnc1, RUN))["resources"]["requests"]["aws.amazon.com/neuron"] == "4"
    assert serving_from_manifests(render(lnc1, RUN)).lnc == 1


def test_an_engine_without_manifests_is_refused_naming_serving_engine() -> None:
    # given a TensorRT-LLM architecture (estimated with TensorRT-LLM's defaults)
    arch = DeployTarget.from_id("eks:p5.48xlarge:tp8:fp8:trtllm:on-demand", "meta-llama/Llama-3.1-70B")
    # when it is rendered, then it is refused (not served by vLLM instead), saying which engines have manifests
    with pytest.raises(InvalidInput, match="only vllm and neuron") as info:
        render(arch, RUN)
    assert [p.field for p in info.value.problems] == ["serving.engine"]


@pytest.mark.parametrize(
    ("arch_id", "model"),
    [
        ("eks:p5.48xlarge:tp8:bf16:vllm:on-demand", "meta-llama/Llama-3.1-405B"),
        ("eks:g5.48xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B"),
        ("eks:inf2.48xlarge:tp8:bf16:neuron:on-demand", "meta-llama/Llama-3.1-8B"),
    ],
)
def test_the_pods_cache_requests_fit_the_nodes_allocatable_ephemeral_storage(
    arch_id: str, model: str
) -> None:
    # given the node volume and what every pod on a node requests for its model cache
    objs = by_kind(render(DeployTarget.from_id(arch_id, model), RUN))
    bdm = objs["EC2NodeClass"]["spec"]["blockDeviceMappings"]
    volume = int(next(b for b in bdm if b.get("rootVolume"))["ebs"]["volumeSize"].removesuffix("Gi"))
    per_pod = int(
        container(list(objs.values()))["resources"]["requests"]["ephemeral-storage"].removesuffix("Gi")
    )
    arch = DeployTarget.from_id(arch_id, model).resolve()
    # then, after the kubelet's 10% eviction reserve, the OS and the image, they still fit
    assert arch.replicas_per_instance is not None
    assert 0.9 * volume - 20 - 45 >= arch.replicas_per_instance * per_pod


def test_cli_prints_the_rbac_for_a_group(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["manifests", "--rbac", "sizing-team", "--validate"])
    assert rc == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    assert docs[1]["subjects"][0]["name"] == "sizing-team"


def test_cli_takes_the_model_from_a_workload_for_a_bare_id(capsys: pytest.CaptureFixture[str]) -> None:
    # given the chatbot example, whose model is Llama-3.1-70B-Instruct
    workload = Path(__file__).parents[2] / "examples" / "chatbot.yaml"
    # when
    rc = main(
        ["manifests", "--architecture", "eks:p5.48xlarge:tp4:fp8:vllm:on-demand", "--workload", str(workload)]
    )
    # then that model is served, under the name the workload uses
    assert rc == 0
    deployment = next(d for d in yaml.safe_load_all(capsys.readouterr().out) if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--model=meta-llama/Llama-3.1-70B-Instruct" in args


# --- the ServingConfig, exactly -----------------------------------------------------------------------------


def test_the_container_runs_the_serving_config_image_and_the_model_exactly_as_named() -> None:
    # given an -Instruct model named by the workload, served on its own hardware defaults
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp2:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B-Instruct"
    )
    serving = arch.resolve().serving
    assert serving is not None
    # when
    c = container(render(arch, RUN))
    # then the image is the ServingConfig's, every setting is on the command line, and the -Instruct
    # checkpoint (not the catalog's base model) is downloaded and served under that name
    assert c["image"] == serving.image
    assert "--model=meta-llama/Llama-3.1-8B-Instruct" in c["args"]
    assert "--served-model-name=meta-llama/Llama-3.1-8B-Instruct" in c["args"]
    assert set(vllm_args(serving)) <= set(c["args"])
    assert "--no-enable-prefix-caching" in c["args"]


@pytest.mark.parametrize(
    ("arch_id", "model"),
    [
        ("eks:g6e.12xlarge:tp2:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B-Instruct"),
        ("eks:p5.48xlarge:tp4:fp8:vllm:spot", "meta-llama/Llama-3.1-70B"),
        ("eks:g6e.48xlarge:tp2:int4:vllm:spot", "meta-llama/Llama-3.1-70B"),
        ("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B"),
        ("eks:trn2.48xlarge:tp64:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B"),
    ],
)
def test_the_serving_config_read_back_from_the_manifests_is_the_one_estimated_for_an_id(
    arch_id: str, model: str
) -> None:
    # given a bare id (the engine's defaults for that hardware)
    arch = DeployTarget.from_id(arch_id, model)
    # when its manifests are rendered and read back
    back = serving_from_manifests(render(arch, RUN))
    # then the Deployment runs exactly the ServingConfig the estimate used
    assert back == arch.resolve().serving


def test_a_stated_serving_config_round_trips_through_the_deployment() -> None:
    # given an architecture whose tuned serving config differs from every engine default
    serving = full_serving(
        "meta-llama/Llama-3.1-8B-Instruct",
        "p5.48xlarge",
        2,
        "fp8",
        kv_cache_dtype="fp8",
        max_model_len=12288,
        max_num_seqs=96,
        max_num_batched_tokens=1024,
        gpu_memory_utilization=0.88,
        enable_prefix_caching=True,
    )
    raw = {
        "id": "eks:p5.48xlarge:tp2:fp8:vllm:on-demand",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "instance_type": "p5.48xlarge",
        "tensor_parallel": 2,
        "quantization": "fp8",
        "replicas": {"peak": 4, "min": 2},
        "serving": serving,
    }
    arch = DeployTarget.from_dict(raw)
    # when
    objs = render(arch, RUN)
    # then reading the Deployment back gives that config, field for field
    assert serving_from_manifests(objs) == arch.resolve().serving
    assert serving_from_manifests(objs).model_dump() == serving
    assert "--kv-cache-dtype=fp8_e4m3" in container(objs)["args"]


def test_a_pre_quantized_checkpoint_is_downloaded_and_still_reads_back_as_its_quantization() -> None:
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp1:int8:vllm:on-demand", "meta-llama/Llama-3.1-8B-Instruct"
    )
    objs = render(arch, RUN, options=RenderOptions(checkpoints={"int8": "org/llama-8b-w8a8"}))
    c = container(objs)
    assert "--model=org/llama-8b-w8a8" in c["args"]
    assert "--served-model-name=meta-llama/Llama-3.1-8B-Instruct" in c["args"]
    assert serving_from_manifests(objs) == arch.resolve().serving


def test_a_neuron_setting_vllm_neuron_cannot_honour_is_refused_naming_the_field() -> None:
    # given a Neuron architecture stating prefix caching, which the Neuron image cannot do
    serving = full_serving(
        "meta-llama/Llama-3.1-8B", "inf2.48xlarge", 8, "bf16", "neuron", enable_prefix_caching=True
    )
    arch = DeployTarget.from_dict(
        {
            "id": "eks:inf2.48xlarge:tp8:bf16:neuron:on-demand",
            "model": "meta-llama/Llama-3.1-8B",
            "instance_type": "inf2.48xlarge",
            "tensor_parallel": 8,
            "engine": "neuron",
            "serving": serving,
        }
    )
    # when / then
    with pytest.raises(InvalidInput) as info:
        render(arch, RUN)
    assert [p.field for p in info.value.problems] == ["serving.enable_prefix_caching"]


@pytest.mark.parametrize(
    ("arch_id", "field"),
    [
        ("eks:g6e.12xlarge:tp3:bf16:vllm:on-demand", "serving.tensor_parallel"),  # 32 heads / 3
        ("eks:g6e.12xlarge:tp1:bf16:neuron:on-demand", "serving.engine"),  # Neuron engine on a GPU
        ("eks:inf2.48xlarge:tp8:bf16:vllm:on-demand", "serving.engine"),  # CUDA vLLM on Neuron
        ("eks:g5.12xlarge:tp1:fp8:vllm:on-demand", "serving.quantization"),  # A10G has no fp8
    ],
)
def test_what_predict_refuses_is_refused_naming_the_field(arch_id: str, field: str) -> None:
    arch = DeployTarget.from_id(arch_id, "meta-llama/Llama-3.1-8B")
    with pytest.raises(InvalidInput) as info:
        render(arch, RUN)
    assert field in [p.field for p in info.value.problems]


# --- placement ----------------------------------------------------------------------------------------------


def test_replicas_sharing_a_node_pack_onto_it_and_spread_over_two_zones() -> None:
    # given TP1 on a 4-GPU node, 2 replicas at least, 7 at peak
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas={"peak": 7, "min": 2}
    )
    # when
    objs = by_kind(render(arch, RUN))
    pod = objs["Deployment"]["spec"]["template"]["spec"]
    # then pods prefer the node their app already runs on, and spread over zones with skew 1
    term = pod["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == objs["Deployment"]["spec"]["selector"]
    [spread] = pod["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["maxSkew"], spread["whenUnsatisfiable"]) == (
        "topology.kubernetes.io/zone",
        1,
        "DoNotSchedule",
    )
    assert spread["minDomains"] == 2
    # and the pool holds the peak as the cost counts it (4+3 replicas in two zones: 1+1 nodes) plus one spare
    assert objs["NodePool"]["spec"]["limits"]["nodes"] == str(nodes_for(7, 4, 2) + 1) == "3"
    assert "spread over" in objs["Deployment"]["metadata"]["annotations"]["sizing.llm/placement"]


def test_a_single_replica_is_not_spread_and_a_whole_node_replica_does_not_pack() -> None:
    arch = DeployTarget.from_id("eks:p5.48xlarge:tp8:fp8:vllm:on-demand", "meta-llama/Llama-3.1-70B")
    pod = by_kind(render(arch, RUN))["Deployment"]["spec"]["template"]["spec"]
    assert "topologySpreadConstraints" not in pod
    assert "affinity" not in pod


def test_named_zones_restrict_the_pool_and_one_zone_cannot_hold_a_spread() -> None:
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas={"peak": 4, "min": 2}
    )
    pool = by_kind(render(arch, RUN, options=RenderOptions(zones=["us-east-1a", "us-east-1b"])))["NodePool"]
    reqs = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a", "us-east-1b"]
    with pytest.raises(InvalidInput) as info:
        render(arch, RUN, options=RenderOptions(zones=["us-east-1a"]))
    assert [p.field for p in info.value.problems] == ["zones"]


@pytest.mark.parametrize(
    ("replicas", "per_node", "zones", "nodes"),
    [(2, 2, 2, 2), (4, 2, 2, 2), (5, 4, 2, 2), (1, 4, 2, 1), (6, 8, 1, 1)],
)
def test_nodes_are_counted_per_zone(replicas: int, per_node: int, zones: int, nodes: int) -> None:
    assert nodes_for(replicas, per_node, zones) == nodes


# --- what a Karpenter engineer applies ----------------------------------------------------------------------


def test_serving_nodes_never_expire_and_are_not_disrupted_in_business_hours() -> None:
    # given the default purpose (serve)
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = by_kind(render(arch, RUN))
    tmpl = objs["NodePool"]["spec"]["template"]["spec"]
    # then nodes never expire (a forced expiry would reload every model), drain one pod replacement at a time
    assert tmpl["expireAfter"] == "Never"
    assert tmpl["terminationGracePeriod"] == f"{(4 * 30 + 10)}m"  # 4 pods x the 30 min GPU startup + 10
    budgets = objs["NodePool"]["spec"]["disruption"]["budgets"]
    blocked = [b for b in budgets if b["nodes"] == "0"]
    assert blocked == [
        {
            "nodes": "0",
            "reasons": ["Drifted", "Underutilized"],
            "schedule": "0 8 * * 1-5",
            "duration": "10h",
        }
    ]
    assert {"nodes": "1", "reasons": ["Drifted", "Underutilized"]} in budgets
    # and pods do not block drift forever (the budgets decide when)
    pod = objs["Deployment"]["spec"]["template"]["metadata"]
    assert "karpenter.sh/do-not-disrupt" not in pod["annotations"]


def test_a_sizing_runs_nodes_expire_after_the_runs_maximum_duration() -> None:
    # given what the provisioner renders (a run deadline)
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = render(arch, RUN, options=RenderOptions(expires_at=1_900_000_000, max_duration_s=3 * 3600))
    kinds = by_kind(objs)
    tmpl = kinds["NodePool"]["spec"]["template"]["spec"]
    # then a bounded expiry is the backstop and measurements are not disrupted until then
    assert (tmpl["expireAfter"], tmpl["terminationGracePeriod"]) == ("180m", "10m")
    pod = kinds["Deployment"]["spec"]["template"]["metadata"]
    assert pod["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert {"nodes": "0", "reasons": ["Drifted", "Underutilized"]} in kinds["NodePool"]["spec"]["disruption"][
        "budgets"
    ]
    # and the shared namespace and adapter rule are left to the provisioner / the cluster
    assert [o["kind"] for o in objs] == ORDER


def test_the_ami_is_pinned_and_latest_is_refused() -> None:
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    for family in ("al2023", "bottlerocket"):
        nc = by_kind(render(arch, RUN, options=RenderOptions(ami_family=family)))["EC2NodeClass"]
        assert nc["spec"]["amiSelectorTerms"] == [{"alias": f"{family}@{AMI_VERSIONS[family]}"}]
        assert AMI_VERSIONS[family].startswith("v") and AMI_VERSIONS[family] != "latest"
    with pytest.raises(InvalidInput) as info:
        render(arch, RUN, options=RenderOptions(ami_version="latest"))
    assert [p.field for p in info.value.problems] == ["ami_version"]


def test_the_autoscalers_metric_is_served_by_a_rendered_prometheus_adapter_rule() -> None:
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas={"peak": 6, "min": 2}
    )
    objs = by_kind(render(arch, RUN))
    metric = objs["HorizontalPodAutoscaler"]["spec"]["metrics"][0]["pods"]["metric"]["name"]
    config = yaml.safe_load(objs["ConfigMap"]["data"]["config.yaml"])
    [rule] = config["rules"]
    assert rule["name"]["as"] == metric == "vllm_num_requests_running"
    assert rule["seriesQuery"].startswith("vllm:num_requests_running{")
    # and the rule comes as a snippet of its own name, never the adapter's own ConfigMap (applying it replaced the
    # adapter's whole configuration), saying what to merge it into
    meta = objs["ConfigMap"]["metadata"]
    assert (meta["name"], meta["namespace"]) == ("llm-sizing-adapter-rules", "monitoring")
    assert meta["labels"] == {L.MANAGED_BY: L.MANAGER}
    assert "monitoring/prometheus-adapter config.yaml" in meta["annotations"]["llm-sizing/merge-into"]
    pod = objs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert (pod["prometheus.io/scrape"], pod["prometheus.io/port"]) == ("true", "8000")


def test_the_namespace_is_rendered_and_the_token_secret_is_documented_never_rendered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # when the CLI prints the manifests
    rc = main(
        [
            "manifests",
            "--architecture",
            "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--namespace",
            "chat",
        ]
    )
    out = capsys.readouterr().out
    # then the Namespace comes first, no Secret is rendered, and the header says how to create it
    assert rc == 0
    docs = list(yaml.safe_load_all(out))
    assert docs[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "chat", "labels": {L.MANAGED_BY: L.MANAGER}},
    }
    assert "Secret" not in [d["kind"] for d in docs]
    assert "# " in out.splitlines()[0]
    assert "kubectl -n chat create secret generic hf-token --from-literal=token=hf_..." in out


def test_every_referenced_namespace_is_rendered_or_named_in_the_header_and_the_rule_is_a_snippet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given the manifests of a served architecture, with the adapter in another namespace
    rc = main(
        [
            "manifests",
            "--architecture",
            "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--adapter-namespace",
            "observability",
        ]
    )
    out = capsys.readouterr().out
    docs = list(yaml.safe_load_all(out))
    header = "\n".join(ln for ln in out.splitlines() if ln.startswith("#"))
    # when the namespaces the objects name are collected
    used = {d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")}
    rendered = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    # then each is rendered, or the header says it must exist
    assert rc == 0 and used == {"llm-sizing", "observability"}
    for ns in used - rendered:
        assert f"Namespace {ns} is where prometheus-adapter runs: it must exist already" in header
    # and the header says the adapter rule is a snippet to merge into the adapter's own configuration
    assert "SNIPPET TO MERGE" in header
    assert (
        "merge rules into observability/prometheus-adapter config.yaml (Helm values rules.custom)" in header
    )


@pytest.mark.parametrize(
    ("arch_id", "model", "shm"),
    [
        ("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", "2Gi"),
        ("eks:p5.48xlarge:tp8:fp8:vllm:on-demand", "meta-llama/Llama-3.1-70B", "9Gi"),
        ("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B", "2Gi"),
    ],
)
def test_shared_memory_grows_with_the_engines_worker_processes(arch_id: str, model: str, shm: str) -> None:
    volumes = by_kind(render(DeployTarget.from_id(arch_id, model), RUN))["Deployment"]["spec"]["template"][
        "spec"
    ]["volumes"]
    dshm = next(v for v in volumes if v["name"] == "dshm")
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": shm}


def test_a_capacity_reservation_is_selected_and_reserved_capacity_allowed() -> None:
    # given p5 with a Capacity Block
    arch = DeployTarget.from_id("eks:p5.48xlarge:tp8:fp8:vllm:on-demand", "meta-llama/Llama-3.1-70B")
    objs = by_kind(render(arch, RUN, options=RenderOptions(capacity_reservation="cr-0123456789abcdef0")))
    # then the node class selects it and the pool launches reserved capacity first, on-demand after
    assert objs["EC2NodeClass"]["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}
    ]
    reqs = {r["key"]: r["values"] for r in objs["NodePool"]["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["reserved", "on-demand"]
    # and without one, neither appears
    plain = by_kind(render(arch, RUN))
    assert "capacityReservationSelectorTerms" not in plain["EC2NodeClass"]["spec"]
    with pytest.raises(InvalidInput) as info:
        render(arch, RUN, options=RenderOptions(capacity_reservation="reservation-1"))
    assert [p.field for p in info.value.problems] == ["capacity_reservation"]


# --- the command --------------------------------------------------------------------------------------------


def test_cli_validate_says_what_it_checked_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "manifests",
            "--architecture",
            "eks:p5.48xlarge:tp8:fp8:vllm:on-demand",
            "--model",
            "meta-llama/Llama-3.1-70B",
            "--capacity-reservation",
            "cr-0123456789abcdef0",
            "--validate",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0
    assert next(d["kind"] for d in yaml.safe_load_all(captured.out)) == "Namespace"
    err = captured.err
    assert "NodePool/" in err and "schemas/karpenter.sh_nodepools.yaml" in err and "CEL rules" in err
    assert "Deployment/" in err and "1.31, 1.32, 1.33, 1.34" in err
    assert "ConfigMap/llm-sizing-adapter-rules" in err
    assert "rule placement.spread" in err and "rule adapter.metric" in err


@pytest.mark.parametrize(
    ("arch_id", "field"),
    [
        ("eks:g6e.12xlarge:tp3:bf16:vllm:on-demand", "tensor_parallel"),
        ("eks:g6e.12xlarge:tp1:bf16:neuron:on-demand", "engine"),
        ("eks:p5.48xlarge:tp8:fp8:trtllm:on-demand", "serving.engine"),
    ],
)
def test_cli_refuses_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arch_id: str, field: str
) -> None:
    out = tmp_path / "out"
    rc = main(
        ["manifests", "--architecture", arch_id, "--model", "meta-llama/Llama-3.1-8B", "--out", str(out)]
    )
    assert rc == 2
    assert field in capsys.readouterr().err
    assert not out.exists()


def test_cli_max_model_len_sets_a_bare_ids_context(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "manifests",
            "--architecture",
            "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--max-model-len",
            "32768",
        ]
    )
    assert rc == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert serving_from_manifests(docs).max_model_len == 32768
    rc = main(
        [
            "manifests",
            "--architecture",
            "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--max-model-len",
            "1000000",
        ]
    )
    assert rc == 2
    assert "max_model_len" in capsys.readouterr().err


def test_business_hours_are_the_workloads_own_converted_to_utc_with_the_offset_change_stated():
    from datetime import date

    from sizing.deploy.nodes import business_hours_window

    # GIVEN a New York workload, in winter and in summer
    winter = business_hours_window("America/New_York", date(2026, 12, 7))
    summer = business_hours_window("America/New_York", date(2026, 7, 6))
    # THEN 08:00-18:00 local is 13:00-23:00 UTC in winter, 12:00-22:00 UTC in summer, Monday to Friday
    assert (winter.schedule, winter.duration) == ("0 13 * * 1-5", "10h")
    assert summer.schedule == "0 12 * * 1-5"
    # AND the date the offset changes is said, so the window is rendered again then
    assert winter.next_change == date(2027, 3, 14) and "render again" in winter.note
    # AND a zone whose 08:00 is the UTC day before moves the weekdays with it; a half-hour zone keeps its minutes
    assert business_hours_window("Asia/Tokyo", date(2026, 12, 7)).schedule == "0 23 * * 0-4"
    assert business_hours_window("Asia/Kolkata", date(2026, 12, 7)).schedule == "30 2 * * 1-5"


def test_the_cli_renders_the_nodepool_budget_in_the_time_zone_asked_and_refuses_an_unknown_one(capsys):
    from sizing.cli import main
    from sizing.deploy.nodes import business_hours_window

    argv = ["manifests", "--architecture", "eks:g6e.xlarge:tp1:fp8:vllm:on-demand", "--model", "llama-3.1-8b"]
    # WHEN the manifests are rendered for New York business hours
    assert main([*argv, "--timezone", "America/New_York"]) == 0
    out = capsys.readouterr()
    # THEN the NodePool's budget is New York's 08:00 in UTC today, and stderr says which hours those are
    assert f"schedule: {business_hours_window('America/New_York').schedule}" in out.out
    assert "08:00-18:00 America/New_York" in out.err
    # AND an unknown zone is refused naming the option
    assert main([*argv, "--timezone", "Mars/Olympus"]) == 2
    assert "--timezone: unknown time zone 'Mars/Olympus'" in capsys.readouterr().err
