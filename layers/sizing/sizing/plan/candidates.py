"""Enumerate every architecture the workload's constraints allow.

Self-managed (EKS) and SageMaker candidates share hardware: one `HardwareOption` (instance x TP x quantization x
engine) is estimated once and priced per deployment and capacity type. Bedrock options come from the catalog's
managed offerings for the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sizing.base.errors import InvalidInput, Problem
from sizing.catalog import Accelerator, Catalog, InstanceType, ModelSpec
from sizing.catalog.offerings import BedrockChoice
from sizing.catalog.regions import nearest
from sizing.perf.config import valid_tps
from sizing.workload.derived import WorkloadModel

#: Engines that run on Neuron devices; a constraint naming "vllm" includes vLLM's Neuron backend there.
NEURON_ENGINE = "neuron"


@dataclass(frozen=True)
class HardwareOption:
    """One replica's hardware: `tensor_parallel` devices of `instance_type`, `replicas_per_instance` of them
    packed on one instance (TP smaller than the instance's device count)."""

    instance_type: str
    tensor_parallel: int
    quantization: str
    engine: str
    devices_per_instance: int

    @property
    def replicas_per_instance(self) -> int:
        return self.devices_per_instance // self.tensor_parallel

    @property
    def key(self) -> str:
        return f"{self.instance_type}:tp{self.tensor_parallel}:{self.quantization}:{self.engine}"


@dataclass
class Enumeration:
    hardware: list[HardwareOption] = field(default_factory=list)
    #: when no allowed instance type is sold in the workload's Region: the sentence saying so and where they are
    region_gap: str | None = None
    nearest_region: str | None = None
    bedrock: list[BedrockChoice] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)


def _allowed_instances(cat: Catalog, wm: WorkloadModel) -> list[InstanceType]:
    c = wm.spec.constraints
    problems: list[Problem] = []
    if c.instance_types:
        for t in c.instance_types:
            if t.lower().removeprefix("ml.") not in cat.instances:
                problems.append(Problem("constraints.instance_types", f"unknown instance type '{t}'"))
    if c.instance_families:
        families = {i.family for i in cat.instances.values()}
        for f in c.instance_families:
            if f not in families:
                problems.append(
                    Problem(
                        "constraints.instance_families",
                        f"unknown family '{f}' (known: {', '.join(sorted(families))})",
                    )
                )
    if problems:
        raise InvalidInput("the constraints name hardware the catalog does not have", problems)
    out = []
    for inst in cat.instances.values():
        if c.instance_types and inst.instance_type not in {
            t.lower().removeprefix("ml.") for t in c.instance_types
        }:
            continue
        if c.instance_families and inst.family not in c.instance_families:
            continue
        out.append(inst)
    return out


def _tp_options(model: ModelSpec, devices: int, accelerator: Accelerator) -> list[int]:
    """TP sizes that divide the instance's devices (so replicas pack evenly) and the engine runs on the
    accelerator: dividing the heads on a GPU, a compiled `tp_degree` on Neuron (heads padded)."""

    return [t for t in valid_tps(model, devices, accelerator) if devices % t == 0]


def _sold_in_region(
    out: Enumeration, allowed: list[InstanceType], region: str, known_only: bool = False
) -> list[InstanceType]:
    """The allowed instance types sold in `region`, or not known not to be (availability unknown: the price
    snapshot does not cover the family there; left out too with `known_only`); the others are rejected, and when
    none is sold the enumeration says so and names the nearest Region that has them."""
    sold = [
        i
        for i in allowed
        if i.available_in(region) is True or (i.available_in(region) is None and not known_only)
    ]
    for inst in allowed:
        if inst.available_in(region) is False:
            out.rejected.append(
                {
                    "id": f"{inst.instance_type}@{region}",
                    "kind": "unsupported",
                    "reason": f"{inst.instance_type} is not sold in {region} (price snapshot)",
                }
            )
        elif inst.available_in(region) is None and known_only:
            out.rejected.append(
                {
                    "id": f"{inst.instance_type}@{region}",
                    "kind": "unsupported",
                    "reason": f"availability of {inst.instance_type} in {region} unknown (the dated price snapshot"
                    " does not cover its family there); constraints.require_known_availability leaves it out",
                }
            )
    if allowed and not sold:
        elsewhere = {r for i in allowed for r in (i.regions_available or [])}
        close = nearest(region, elsewhere)
        out.nearest_region = close[0] if close else None
        types = ", ".join(sorted({i.family for i in allowed}))
        sold_word = "known to be sold" if known_only else "sold"
        out.region_gap = f"no allowed instance type ({types}) is {sold_word} in {region}" + (
            f"; the nearest Region that has them is {close[0]}" if close else ""
        )
    return sold


def _quantizations(wm: WorkloadModel, model: ModelSpec) -> list[str]:
    c = wm.spec.constraints
    quants: list[str] = list(c.quantizations)
    if model.native_quantization and "quantizations" not in c.model_fields_set:
        # the model's own checkpoint format (gpt-oss's MXFP4 experts) is served as shipped: a candidate unless
        # the workload chose its quantizations itself
        quants.append(model.native_quantization)
    return quants


def _engines_on(acc: Accelerator, allowed: Sequence[str]) -> list[str]:
    """The allowed engines that run on the accelerator."""
    if acc.kind == "neuron":
        return [NEURON_ENGINE] if {"vllm", "neuron"} & set(allowed) else []
    return [e for e in allowed if e != NEURON_ENGINE]


def _unsupported_quantization(acc: Accelerator, quant: str) -> str | None:
    """Why the accelerator cannot serve `quant`, or None when it can."""
    if not acc.supports(quant):
        return f"{acc.name} has no {quant} support"
    if acc.kind == "neuron" and quant == "int4":
        return "int4 weight-only kernels are not available on Neuron"
    return None


def _hardware(out: Enumeration, wm: WorkloadModel, cat: Catalog, model: ModelSpec) -> None:
    """Every instance type x quantization x engine x TP the constraints allow, in the Region."""
    c = wm.spec.constraints
    sold = _sold_in_region(out, _allowed_instances(cat, wm), c.region, c.require_known_availability)
    quants = _quantizations(wm, model)
    for inst in sold:
        acc = cat.accelerator_of(inst)
        devices = cat.devices(inst)
        engines = _engines_on(acc, c.engines)
        # a CPU without bf16 arithmetic serves the bf16 checkpoint in fp32 (`Accelerator.served_format`)
        for quant in dict.fromkeys(acc.served_format(q) for q in quants):
            why = _unsupported_quantization(acc, quant)
            if why is not None:
                out.rejected.append(
                    {"id": f"{inst.instance_type}:{quant}", "kind": "unsupported", "reason": why}
                )
                continue
            for engine in engines:
                for tp in _tp_options(model, devices, acc):
                    out.hardware.append(HardwareOption(inst.instance_type, tp, quant, engine, devices))


def _bedrock(out: Enumeration, wm: WorkloadModel, cat: Catalog, model: ModelSpec) -> None:
    """The Bedrock offers of the model the Region and data residency allow."""
    c = wm.spec.constraints
    if not cat.bedrock_offers(model.id):
        out.rejected.append(
            {
                "id": f"bedrock:{model.id}",
                "kind": "unsupported",
                "reason": f"Bedrock does not offer {model.id}",
            }
        )
    choices, why = cat.bedrock_choices(model.id, c.region, c.data_residency)
    for reason in why:
        out.rejected.append({"id": f"bedrock:{model.id}", "kind": "unsupported", "reason": reason})
    out.bedrock.extend(choices)


def enumerate_candidates(wm: WorkloadModel, cat: Catalog) -> Enumeration:
    """Every hardware option for EKS/SageMaker and every Bedrock offer the constraints allow."""
    c = wm.spec.constraints
    model = cat.model(wm.model_id)
    out = Enumeration()
    if "eks" in c.deployments or "sagemaker" in c.deployments:
        _hardware(out, wm, cat, model)
    if "bedrock" in c.deployments:
        _bedrock(out, wm, cat, model)
    return out
