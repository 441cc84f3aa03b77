"""The product's vocabulary, declared once: serving engines, weight formats (quantization), deployment targets,
EC2 capacity types and how requests reach an architecture. Every module that names one of these imports it from here; a subset (the GPU engines, the
engines rendered as manifests, the formats measured in the reference rows, ...) is declared beside its meaning,
typed with the vocabulary's alias so mypy refuses a value outside it (and `tests/unit/test_vocabulary.py` checks
each subset at run time).

This module is the bottom of the package: it imports nothing from `sizing`.

Each vocabulary is one `Literal[...]` alias, and its runtime tuple (order as listed: the order error messages, the
OpenAPI document and `--help` show) is derived from it with `typing.get_args`, so the two cannot drift. They are
Literals rather than `enum.StrEnum` classes because a StrEnum as a pydantic field type changes what users see:
- the JSON Schema (and so `GET /openapi.json` and docs/workload-spec.md) would name each vocabulary as a `$defs`
  entry behind a `$ref` instead of listing its values inline under the field;
- a refused value fails with pydantic's `enum` error instead of `literal_error`, which `sizing.base.errors` turns into
  "must be one of ...; did you mean ...?";
- an enum member (a field's default, or any value kept as a member) is not a plain `str`: PyYAML's `safe_dump`
  refuses it in a `model_dump()`, and its `repr` (`<Engine.VLLM: 'vllm'>`) leaks into messages and fingerprints.
Keeping every output identical with StrEnum would take a schema override per field, an error-mapping change and
`use_enum_values` on every model; a Literal alias gives the one declaration without any of that.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Serving engines estimated. `neuron` is vLLM on AWS Inferentia/Trainium (NxD Inference).
Engine = Literal["vllm", "trtllm", "sglang", "tgi", "neuron"]
ENGINES: tuple[Engine, ...] = get_args(Engine)

#: Weight formats a model may be served in (bytes per weight: `sizing.catalog.records.BYTES_PER_PARAM`). fp32 is a
#: CPU's: a bf16 checkpoint cast up at load, where the processor has no bf16 arithmetic (`Accelerator.bf16_arithmetic`).
Quantization = Literal["bf16", "fp8", "int8", "int4", "mxfp4", "nvfp4", "fp32"]
QUANTIZATIONS: tuple[Quantization, ...] = get_args(Quantization)

#: Where an architecture runs: EKS (Karpenter GPU or Neuron nodes), SageMaker real-time endpoints, Bedrock.
Deployment = Literal["eks", "sagemaker", "bedrock"]
DEPLOYMENTS: tuple[Deployment, ...] = get_args(Deployment)

#: EC2 purchase options of an architecture's instances.
CapacityType = Literal["on-demand", "spot"]
CAPACITY_TYPES: tuple[CapacityType, ...] = get_args(CapacityType)

#: How requests reach an architecture: served as they arrive (`real-time`: EKS, a SageMaker real-time endpoint,
#: Bedrock on-demand, its tiers and Provisioned Throughput), queued to a SageMaker asynchronous endpoint that scales
#: from zero (`async`), or submitted as one job a day (`batch`: Bedrock batch inference).
Invocation = Literal["real-time", "async", "batch"]
INVOCATIONS: tuple[Invocation, ...] = get_args(Invocation)

#: What served a run's figures (`measured.origin`): a local twin serves at our own model's pace, so its figures are a
#: simulation, never a measurement; a real server's (`endpoint`) are measured.
Origin = Literal["twin", "endpoint"]
ORIGINS: tuple[Origin, ...] = get_args(Origin)
TWIN: Origin = "twin"
ENDPOINT: Origin = "endpoint"

#: The `phase` of a stored load level that belongs to a run's capacity search (`sizing.loadtest.capacity`; the
#: closed-loop levels carry none): the merge reads the edge from them, the learning loop leaves them out.
CAPACITY_PHASE = "capacity"
