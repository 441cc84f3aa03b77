"""What a provisioner deploys: the hardware, serving configuration and fleet of one architecture.

A `DeployTarget` is not the answer (`sizing.results.Architecture`, the one strict model of an architecture with its
predictions and cost): it is the part of it a provisioner needs, and it may come from less than an answer. It is
read from the typed answer (`from_answer`), from an architecture's JSON as stored or hand-written (`from_dict`:
what it does not name, such as `predicted` or `cost`, is not read), or from a bare id plus a model (`from_id`);
`resolve()` fills what is missing from the catalog, so a bare id (`eks:p5.48xlarge:tp4:fp8:vllm:on-demand`) plus a
model is enough to render manifests."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.serving_config import ServingConfig, check_for_hardware
from sizing.base.strict import Lenient
from sizing.base.vocabulary import CapacityType, Deployment, Quantization
from sizing.catalog import Catalog, load_catalog
from sizing.results import Architecture as Answer
from sizing.upgrade import upgrade_result


class TargetReplicas(Lenient):
    """The replicas to run: at peak, the fewest (off-peak) and the mean."""

    peak: int = Field(ge=1)
    #: May be 0 off-peak in a planner's schedule; a deployment still runs at least one replica.
    min: int = Field(ge=0)
    mean: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> TargetReplicas:
        if self.min > self.peak:
            raise ValueError("replicas.min exceeds replicas.peak")
        return self


class TargetInstances(Lenient):
    """The nodes the replicas need at peak and off-peak."""

    peak: int = Field(ge=0)
    min: int = Field(ge=0)


class TargetLoad(Lenient):
    """The load one replica carries (what its autoscaling targets)."""

    max_concurrency: float | None = Field(default=None, gt=0)
    #: requests in flight per replica at the operating point the answer was sized at (the HPA's target)
    in_flight: float | None = Field(default=None, ge=0)


class DeployTarget(Lenient):
    """One architecture as a provisioner deploys it. Optional fields are derived by `resolve()`."""

    id: str
    model: str
    deployment: Deployment = "eks"
    instance_type: str | None = None
    accelerator: str | None = None
    #: Chips per replica; fractional when replicas share a chip (TP1 on a 2-core Neuron chip).
    accelerators_per_replica: float | None = Field(default=None, gt=0)
    tensor_parallel: int = Field(default=1, ge=1)
    quantization: Quantization = "bf16"
    engine: str = "vllm"
    capacity_type: CapacityType = "on-demand"
    replicas: TargetReplicas = TargetReplicas(peak=1, min=1, mean=1)
    replicas_per_instance: int | None = Field(default=None, ge=1)
    instances: TargetInstances | None = None
    #: the replica as the engine runs it; a bare id gets the engine's defaults (`plan.serving.serving_for`)
    serving: ServingConfig | None = None
    weights_gb: float | None = Field(default=None, gt=0)
    per_replica: TargetLoad | None = None

    @classmethod
    def from_dict(cls, raw: Any, prefix: str = "architecture") -> DeployTarget:
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise InvalidInput("the architecture is not valid", problems_from_pydantic(exc, prefix)) from None

    @classmethod
    def from_answer(cls, answer: Answer) -> DeployTarget:
        """The deployable part of a typed answer, read from its fields; InvalidInput names a field a provisioner
        refuses (replicas at least one at peak, no more off-peak than at peak)."""
        try:
            return cls._of_answer(answer)
        except ValidationError as exc:
            raise InvalidInput(
                "the architecture is not valid", problems_from_pydantic(exc, "architecture")
            ) from None

    @classmethod
    def _of_answer(cls, answer: Answer) -> DeployTarget:
        return cls(
            id=answer.id,
            model=answer.model,
            deployment=answer.deployment,
            instance_type=answer.instance_type,
            accelerator=answer.accelerator,
            accelerators_per_replica=answer.accelerators_per_replica,
            tensor_parallel=answer.tensor_parallel or 1,
            quantization=answer.quantization or "bf16",
            engine=answer.engine,
            capacity_type=answer.capacity_type,
            replicas=TargetReplicas(
                peak=answer.replicas.peak, min=answer.replicas.min, mean=answer.replicas.mean
            )
            if answer.replicas is not None
            else TargetReplicas(peak=1, min=1, mean=1),
            replicas_per_instance=answer.replicas_per_instance,
            instances=TargetInstances(peak=answer.instances.peak, min=answer.instances.min)
            if answer.instances is not None and answer.instances.min is not None
            else None,
            serving=answer.serving,
            weights_gb=answer.weights_gb,
            per_replica=TargetLoad(
                max_concurrency=answer.per_replica.max_concurrency, in_flight=answer.per_replica.in_flight
            )
            if answer.per_replica is not None
            else None,
        )

    @classmethod
    def from_id(cls, arch_id: str, model: str, **extra: Any) -> DeployTarget:
        """Parse `{deployment}:{instance_type}:tp{N}:{quantization}:{engine}:{capacity_type}`."""
        fields = Answer.parse_id(arch_id)
        if fields is None:
            raise InvalidInput(
                f"cannot parse architecture id '{arch_id}': expected "
                "deployment:instance_type:tpN:quantization:engine:capacity_type, "
                "e.g. eks:p5.48xlarge:tp4:fp8:vllm:on-demand"
            )
        return cls.from_dict({"id": arch_id, "model": model, **fields, **extra})

    # --- derived facts --------------------------------------------------------------------------------
    def resolve(self, catalog: Catalog | None = None) -> DeployTarget:
        """A copy with every field a provisioner needs filled in from the catalog; checks TP fits."""
        if self.deployment == "bedrock":
            raise InvalidInput(f"{self.id}: Bedrock is serverless; there is nothing to provision")
        if not self.instance_type:
            raise InvalidInput("instance_type is required", details={"field": "instance_type"})
        cat = catalog or load_catalog()
        inst = cat.instance(self.instance_type)
        acc = cat.accelerator_of(inst)
        spec = cat.model(self.model)
        devices = cat.devices(inst)
        if self.tensor_parallel > devices:
            raise InvalidInput(
                f"{self.id}: tensor_parallel {self.tensor_parallel} exceeds the {devices} devices of "
                f"{inst.instance_type}"
            )
        per_instance = self.replicas_per_instance or devices // self.tensor_parallel
        if self.serving is None:
            from sizing.plan.serving import serving_for

            serving = serving_for(
                cat, self.model, inst.instance_type, self.tensor_parallel, self.quantization, self.engine
            )
        else:
            serving = self.serving
            self._check_serving(serving, cat)
        instances = self.instances or TargetInstances(
            peak=math.ceil(self.replicas.peak / per_instance), min=math.ceil(self.replicas.min / per_instance)
        )
        return self.model_copy(
            update={
                "instance_type": inst.instance_type,
                "accelerator": self.accelerator or acc.id,
                "accelerators_per_replica": self.accelerators_per_replica
                or self.tensor_parallel / acc.cores_per_chip,
                "replicas_per_instance": per_instance,
                "instances": instances,
                "serving": serving,
                "weights_gb": self.weights_gb or spec.weight_bytes(self.quantization) / 1e9,
                "model": spec.id,
            }
        )

    def _check_serving(self, s: ServingConfig, cat: Catalog) -> None:
        """A stated `ServingConfig` must describe this architecture's replica and run on its hardware."""
        # deferred: the hardware configuration costs ~15 ms (-X importtime) of the cold starts that read an
        # architecture and simulate nothing (the Fargate load task, the provisioning steps)
        from sizing.perf.config import check_tp

        inst = cat.instance(self.instance_type or "")
        acc = cat.accelerator_of(inst)
        for name, mine in (
            ("tensor_parallel", self.tensor_parallel),
            ("quantization", self.quantization),
            ("engine", self.engine),
        ):
            if getattr(s, name) != mine:
                raise InvalidInput(
                    f"{self.id}: serving.{name} is {getattr(s, name)} but the architecture's {name} is {mine}",
                    [Problem(f"serving.{name}", f"{getattr(s, name)} != architecture {name} {mine}")],
                )
        check_for_hardware(s, acc.kind, acc.supports("fp8"))
        spec = cat.model(s.model)
        try:
            at_lnc = acc.at_lnc(s.lnc) if acc.kind == "neuron" else acc
            devices = inst.accelerator_count * at_lnc.cores_per_chip
            check_tp(spec, s.tensor_parallel, devices, inst.instance_type, at_lnc)
        except InvalidInput as exc:
            raise InvalidInput(str(exc.message), [Problem("serving.tensor_parallel", exc.message)]) from None
        if s.max_model_len > spec.max_position_embeddings:
            raise InvalidInput(
                f"serving.max_model_len {s.max_model_len:,} exceeds {spec.id}'s context of"
                f" {spec.max_position_embeddings:,} tokens",
                [Problem("serving.max_model_len", f"> {spec.max_position_embeddings} (the model's context)")],
            )

    def accelerator_kind(self, catalog: Catalog | None = None) -> Literal["gpu", "neuron", "cpu"]:
        cat = catalog or load_catalog()
        return cat.accelerator_of(cat.instance(self.instance_type or "")).kind

    def node_count(self, headroom: int = 1) -> int:
        """Nodes for the peak replicas plus `headroom` spare nodes (what the NodePool limits allow)."""
        per_instance = self.replicas_per_instance or 1
        return math.ceil(self.replicas.peak / per_instance) + headroom


def pick_architecture(result: Any, arch_id: str | None = None, deployment: str | None = None) -> Answer:
    """One architecture of a whole estimate result (its JSON as `sizing estimate --json` or a run wrote it, read
    once by `sizing.upgrade`): by id, or the best-ranked one (of `deployment`, if given: `sizing manifests` wants
    the best EKS candidate even when Bedrock ranks first). A file that is not an estimate result is InvalidInput
    naming each field it lacks (`result.architectures.0.cost`)."""
    archs = upgrade_result(result, "result").architectures
    if not archs:
        raise InvalidInput("the estimate result has no architectures", details={"field": "architectures"})
    if arch_id:
        for a in archs:
            if a.id == arch_id:
                return a
        ids = ", ".join(a.id for a in archs[:5])
        raise InvalidInput(f"no architecture '{arch_id}' in the estimate result (first ids: {ids})")
    ranked = sorted(
        (a for a in archs if deployment is None or a.deployment == deployment),
        key=lambda a: a.rank or math.inf,
    )
    if not ranked:
        raise InvalidInput(f"the estimate result has no {deployment} architecture")
    return ranked[0]
