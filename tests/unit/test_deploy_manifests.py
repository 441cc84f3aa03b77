"""What `sizing.deploy.manifests.render` promises about the objects that run an architecture on EKS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sizing.cli import main
from sizing.deploy import labels as L
from sizing.deploy.architecture import Architecture, pick_architecture
from sizing.deploy.manifests import RenderOptions, render, to_yaml
from sizing.errors import InvalidInput

RUN = "run-01HZX"


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(objs)["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_a_gpu_architecture_gets_a_nodepool_restricted_to_its_instance_and_capacity_type() -> None:
    # given a 70B model at TP4 on p5 spot, peaking at 3 replicas (2 per node)
    arch = Architecture.from_id(
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
    arch = Architecture.from_id("eks:g6e.12xlarge:tp2:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
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
    arch = Architecture.from_dict(
        {
            "id": "eks:p5.48xlarge:tp4:fp8:vllm:on-demand",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "instance_type": "p5.48xlarge",
            "tensor_parallel": 4,
            "quantization": "fp8",
            "replicas": {"peak": 2, "min": 2},
            "serving": {"max_model_len": 6144, "gpu_memory_utilization": 0.92, "max_num_seqs": 128},
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
    arch = Architecture.from_id(
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
    # given Llama-70B over 24 NeuronCores of an inf2.48xlarge (12 chips of 2 cores)
    arch = Architecture.from_id("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B")
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
    arch = Architecture.from_id("eks:g6.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = render(arch, RUN, arch.id)
    for obj in objs:
        assert obj["metadata"]["labels"][L.RUN_ID] == RUN
        assert obj["metadata"]["labels"][L.CANDIDATE_ID] == "eks-g6.12xlarge-tp4-bf16-vllm-on-demand"
        assert obj["metadata"]["annotations"][L.CANDIDATE_ID_FULL] == arch.id
    kinds = by_kind(objs)
    assert kinds["NodePool"]["spec"]["template"]["metadata"]["labels"][L.RUN_ID] == RUN
    pod = kinds["Deployment"]["spec"]["template"]["metadata"]
    assert pod["labels"][L.RUN_ID] == RUN
    assert pod["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


def test_rendering_twice_gives_the_same_objects_so_reapply_changes_nothing() -> None:
    arch = Architecture.from_id("eks:g6.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    assert render(arch, RUN) == render(arch, RUN)
    assert render(arch, RUN) != render(arch, "another-run")


def test_the_root_volume_holds_the_weights_of_every_replica_on_the_node() -> None:
    small = Architecture.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    big = Architecture.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-70B")

    def size(a: Architecture) -> int:
        bdm = by_kind(render(a, RUN))["EC2NodeClass"]["spec"]["blockDeviceMappings"]
        root = next(b for b in bdm if b.get("rootVolume"))
        return int(root["ebs"]["volumeSize"].removesuffix("Gi"))

    assert size(big) - size(small) >= 2 * (70.55 - 8.03) * 0.93  # bf16 bytes, in GiB
    assert size(big) >= 141


def test_bedrock_and_int8_without_a_checkpoint_are_refused_with_a_reason() -> None:
    with pytest.raises(InvalidInput, match="only EKS architectures"):
        render({"id": "bedrock:x", "model": "meta-llama/Llama-3.1-8B", "deployment": "bedrock"}, RUN)
    int8 = Architecture.from_id("eks:g6e.12xlarge:tp1:int8:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    with pytest.raises(InvalidInput, match="pre-quantized"):
        render(int8, RUN)
    c = container(render(int8, RUN, options=RenderOptions(checkpoints={"int8": "org/llama-8b-w8a8"})))
    assert "--model=org/llama-8b-w8a8" in c["args"]


def test_a_malformed_id_says_what_the_format_is() -> None:
    with pytest.raises(InvalidInput, match="deployment:instance_type:tpN"):
        Architecture.from_id("p5.48xlarge-tp4", "meta-llama/Llama-3.1-8B")


def test_to_yaml_round_trips() -> None:
    arch = Architecture.from_id("eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    objs = render(arch, RUN)
    text = to_yaml(objs)
    assert "&id" not in text
    assert list(yaml.safe_load_all(text)) == objs


def test_pick_architecture_prefers_the_best_ranked_eks_entry() -> None:
    result = {
        "architectures": [
            {"rank": 2, "id": "eks:b", "deployment": "eks"},
            {"rank": 1, "id": "bedrock:a", "deployment": "bedrock"},
            {"rank": 3, "id": "eks:c", "deployment": "eks"},
        ]
    }
    assert pick_architecture(result)["id"] == "bedrock:a"
    assert pick_architecture(result, deployment="eks")["id"] == "eks:b"
    assert pick_architecture(result, "eks:c")["id"] == "eks:c"


def test_cli_writes_one_yaml_file_per_kind(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # given an estimate result file holding two architectures
    result = {
        "architectures": [
            {
                "rank": 1,
                "id": "bedrock:meta.llama3-1-8b",
                "deployment": "bedrock",
                "model": "meta-llama/Llama-3.1-8B",
            },
            {
                "rank": 2,
                "id": "eks:g6.12xlarge:tp4:bf16:vllm:on-demand",
                "model": "meta-llama/Llama-3.1-8B",
                "deployment": "eks",
                "instance_type": "g6.12xlarge",
                "tensor_parallel": 4,
                "replicas": {"peak": 2, "min": 1},
            },
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
        "deployment.yaml",
        "ec2nodeclass.yaml",
        "horizontalpodautoscaler.yaml",
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
    assert [d["kind"] for d in docs][:2] == ["EC2NodeClass", "NodePool"]


def test_trn2_pins_one_logical_core_per_physical_core_so_tp_means_what_the_planner_sized() -> None:
    trn2 = Architecture.from_id("eks:trn2.48xlarge:tp64:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    inf2 = Architecture.from_id("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B")
    env_trn2 = {e["name"]: e.get("value") for e in container(render(trn2, RUN))["env"]}
    env_inf2 = {e["name"]: e.get("value") for e in container(render(inf2, RUN))["env"]}
    assert env_trn2["NEURON_LOGICAL_NC_CONFIG"] == "1"
    assert "NEURON_LOGICAL_NC_CONFIG" not in env_inf2
    # 64 of trn2's 8-core chips' cores = 8 chips per pod, two pods per 16-chip node
    assert container(render(trn2, RUN))["resources"]["requests"]["aws.amazon.com/neuron"] == "8"


def test_an_engine_we_do_not_render_is_served_by_vllm_and_says_so() -> None:
    arch = Architecture.from_id("eks:p5.48xlarge:tp8:fp8:trtllm:on-demand", "meta-llama/Llama-3.1-70B")
    pod = by_kind(render(arch, RUN))["Deployment"]["spec"]["template"]["metadata"]
    assert "served by vLLM" in pod["annotations"]["sizing.llm/engine-note"]
    plain = Architecture.from_id("eks:p5.48xlarge:tp8:fp8:vllm:on-demand", "meta-llama/Llama-3.1-70B")
    assert (
        "sizing.llm/engine-note"
        not in by_kind(render(plain, RUN))["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    )


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
    objs = by_kind(render(Architecture.from_id(arch_id, model), RUN))
    bdm = objs["EC2NodeClass"]["spec"]["blockDeviceMappings"]
    volume = int(next(b for b in bdm if b.get("rootVolume"))["ebs"]["volumeSize"].removesuffix("Gi"))
    per_pod = int(
        container(list(objs.values()))["resources"]["requests"]["ephemeral-storage"].removesuffix("Gi")
    )
    arch = Architecture.from_id(arch_id, model).resolve()
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
