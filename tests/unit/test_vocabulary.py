"""One vocabulary (engine, quantization, deployment, capacity type), declared once in `sizing.base.vocabulary`: every field
and subset is drawn from it, and a value it names works everywhere a user can give it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from support.scripts import package_graph

from sizing.base.serving_config import ServingConfig
from sizing.base.vocabulary import CAPACITY_TYPES, ENGINES, QUANTIZATIONS
from sizing.base.vocabulary import DEPLOYMENTS as DEPLOYMENT_VALUES
from sizing.catalog import load_catalog
from sizing.catalog.records import BYTES_PER_PARAM
from sizing.cli import build_parser, main
from sizing.commands.twin import serving_from_args
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.janitor import SweptDeployment
from sizing.deploy.manifests import render
from sizing.deploy.pods import GPU_QUANT_ARGS
from sizing.deploy.rendering import RENDERED_ENGINES
from sizing.perf.calrows import CalRow, MeasuredQuantization
from sizing.perf.config import EXPERT_ONLY_FORMATS
from sizing.perf.engines import GPU_ENGINES, NEURON_ENGINES
from sizing.plan.serving import FP8_KV_ENGINES, PREFIX_CACHING_ENGINES
from sizing.results import Architecture as ResultArchitecture
from sizing.slack.grammar import CAPACITY, DEPLOYMENTS, QUANTS, parse_command
from sizing.workload.spec import Constraints


def _accepted(schema: dict[str, Any], field: str) -> list[str]:
    """The values a JSON-Schema property accepts (inline `enum`, or its list items' `enum`)."""
    prop = schema["properties"][field]
    return list(prop.get("items", prop)["enum"])


def test_the_vocabulary_sits_at_the_bottom_of_the_package() -> None:
    # given the package's import graph, in-function imports included
    graph = package_graph()
    # when the vocabulary's own imports of the package are taken
    edges = graph.edges(with_inner=True).get("sizing.base.vocabulary", set())
    # then it imports nothing from sizing
    assert edges == set()


def test_every_field_accepts_exactly_the_vocabulary() -> None:
    # given the models a user's or the planner's values are validated by
    constraints = Constraints.model_json_schema()
    serving = ServingConfig.model_json_schema()
    deployed = DeployTarget.model_json_schema()
    answered = ResultArchitecture.model_json_schema()
    # then each vocabulary field lists the vocabulary's values, in its order
    assert _accepted(constraints, "engines") == list(ENGINES)
    assert _accepted(constraints, "quantizations") == list(QUANTIZATIONS)
    assert _accepted(constraints, "deployments") == list(DEPLOYMENT_VALUES)
    assert _accepted(constraints, "capacity") == list(CAPACITY_TYPES)
    assert _accepted(serving, "engine") == list(ENGINES)
    assert _accepted(serving, "quantization") == list(QUANTIZATIONS)
    assert _accepted(deployed, "deployment") == list(DEPLOYMENT_VALUES)
    assert _accepted(deployed, "quantization") == list(QUANTIZATIONS)
    assert _accepted(deployed, "capacity_type") == list(CAPACITY_TYPES)
    assert _accepted(answered, "deployment") == list(DEPLOYMENT_VALUES)
    assert _accepted(answered, "capacity_type") == list(CAPACITY_TYPES)


@pytest.mark.parametrize(
    ("name", "subset", "vocabulary"),
    [
        ("GPU engines", GPU_ENGINES, ENGINES),
        ("Neuron engines", NEURON_ENGINES, ENGINES),
        ("engines rendered as manifests", RENDERED_ENGINES, ENGINES),
        ("engines with a prefix cache", PREFIX_CACHING_ENGINES, ENGINES),
        ("engines with an fp8 KV cache", FP8_KV_ENGINES, ENGINES),
        ("expert-only formats", EXPERT_ONLY_FORMATS, QUANTIZATIONS),
        ("formats of the reference rows", get_args(MeasuredQuantization), QUANTIZATIONS),
        ("formats with vLLM flags", tuple(GPU_QUANT_ARGS), QUANTIZATIONS),
        ("deployments the janitor sweeps", get_args(SweptDeployment), DEPLOYMENT_VALUES),
        ("Slack's deployment words", tuple(DEPLOYMENTS.values()), DEPLOYMENT_VALUES),
        ("Slack's capacity words", tuple(CAPACITY.values()), CAPACITY_TYPES),
        ("Slack's quantization words", tuple(QUANTS.values()), QUANTIZATIONS),
    ],
)
def test_each_subset_is_within_its_vocabulary(name: str, subset: Any, vocabulary: tuple[str, ...]) -> None:
    # then every value of the subset is a value of the vocabulary
    assert set(subset) <= set(vocabulary), name


def test_the_engines_split_into_gpu_and_neuron_and_every_format_has_a_size() -> None:
    # then each engine runs on GPUs or on Neuron (not both), and each format has bytes per weight
    assert sorted((*GPU_ENGINES, *NEURON_ENGINES)) == sorted(ENGINES)
    assert set(BYTES_PER_PARAM) == set(QUANTIZATIONS)
    # and the reference rows' schema accepts only their subset
    assert _accepted(CalRow.model_json_schema(), "quantization") == list(get_args(MeasuredQuantization))


def test_an_mxfp4_gpt_oss_architecture_renders_manifests_that_serve_the_mxfp4_checkpoint() -> None:
    # given gpt-oss-120b in its native MXFP4 format on one H100 (an id the planner answers)
    arch = DeployTarget.from_id("eks:p5.48xlarge:tp1:mxfp4:vllm:on-demand", "openai/gpt-oss-120b")
    # when its manifests are rendered
    objs = render(arch, "run-mxfp4")
    # then the server is told the checkpoint's format
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--quantization=mxfp4" in args
    assert "--model=openai/gpt-oss-120b" in args


def test_sizing_manifests_writes_an_mxfp4_architecture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given an MXFP4 gpt-oss architecture id
    arch_id = "eks:p5.48xlarge:tp1:mxfp4:vllm:on-demand"
    # when `sizing manifests` writes it
    rc = main(
        ["manifests", "--architecture", arch_id, "--model", "openai/gpt-oss-120b", "--out", str(tmp_path)]
    )
    # then it succeeds and the Deployment serves MXFP4
    assert rc == 0, capsys.readouterr().err
    assert "--quantization=mxfp4" in "".join(p.read_text() for p in tmp_path.glob("*.yaml"))


def test_sizing_twin_accepts_every_format_of_the_vocabulary() -> None:
    # given `sizing twin` for gpt-oss-20b in MXFP4 on one L40S
    args = build_parser(["twin"]).parse_args(
        ["twin", "--model", "openai/gpt-oss-20b", "--instance", "g6e.xlarge", "--quant", "mxfp4"]
    )
    # when its serving configuration is built
    serving = serving_from_args(args, load_catalog())
    # then the twin serves the format asked for
    assert serving.quantization == "mxfp4"


def test_a_slack_message_naming_mxfp4_constrains_the_format_rather_than_naming_a_second_model() -> None:
    # given a message asking for gpt-oss in its native MXFP4 format, and one saying fp16
    mxfp4 = parse_command("300 users gpt-oss-120b mxfp4 eks ttft<2s")
    fp16 = parse_command("300 users llama-3.1-8b fp16 spot ttft<2s")
    # then mxfp4 becomes the quantization asked for, and fp16 is read as bf16
    assert mxfp4.problems == []
    assert mxfp4.raw_spec["constraints"]["quantizations"] == ["mxfp4"]
    assert fp16.raw_spec["constraints"]["quantizations"] == ["bf16"]
