"""The catalog (`Catalog`): its records by id and the lookups the estimator makes (an instance's
accelerator, a model by id or alias with a did-you-mean, prices by Region, Bedrock's offers). Its records are in
`sizing.catalog.records` and `sizing.catalog.offerings`; `sizing.catalog.loading` builds it from the data files."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sizing.base.errors import InvalidInput, NotFound
from sizing.catalog.offerings import BedrockChoice, BedrockOffer, BedrockProvisioned, _ManagedFile
from sizing.catalog.records import Accelerator, InstanceType, ModelSpec, Price
from sizing.catalog.regions import DATA_RESIDENCY, nearest

#: A value derived from a catalog (`Catalog.derive`).
T = TypeVar("T")


class Catalog:
    """All catalog entries, indexed. Build with `load_catalog()`."""

    def __init__(
        self,
        accelerators: list[Accelerator],
        instances: list[InstanceType],
        models: list[ModelSpec],
        managed: _ManagedFile,
    ) -> None:
        self.accelerators = {a.id: a for a in accelerators}
        self.instances = {i.instance_type: i for i in instances}
        self.models = {m.id: m for m in models}
        self.managed = managed
        #: values worked out from this catalog (`derive`): a catalog does not change once built (a release builds a
        #: new one)
        self.derived: dict[tuple[Any, ...], Any] = {}
        self._alias: dict[str, str] = {}
        for m in models:
            for name in (m.id, *m.aliases):
                self._alias[name.lower()] = m.id
        for i in instances:
            if i.accelerator not in self.accelerators:
                raise InvalidInput(f"instance {i.instance_type} names unknown accelerator {i.accelerator}")

    # --- look-ups -------------------------------------------------------------------------------------
    def model(self, name: str, field_name: str = "model") -> ModelSpec:
        key = name.strip().lower()
        if key in self._alias:
            return self.models[self._alias[key]]
        short = key.split("/")[-1]
        matches = [mid for alias, mid in self._alias.items() if alias.split("/")[-1] == short]
        if len(set(matches)) == 1:
            return self.models[matches[0]]
        suggestions = self.suggest_models(name)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise NotFound(
            f"unknown model '{name}'.{hint} To add it: `sizing catalog add-model config.json --id org/name` "
            "with the model's Hugging Face config.json.",
            field_name=field_name,
            suggestions=suggestions,
        )

    def suggest_models(self, name: str, n: int = 3) -> list[str]:
        names = list(self._alias)
        close = difflib.get_close_matches(name.lower(), names, n=n * 3, cutoff=0.4)
        close += difflib.get_close_matches(
            name.lower().split("/")[-1], [x.split("/")[-1] for x in names], n=n
        )
        out: list[str] = []
        for c in close:
            mid = self._alias.get(c) or next((v for k, v in self._alias.items() if k.endswith("/" + c)), None)
            if mid and mid not in out:
                out.append(mid)
        return out[:n]

    def instance(self, name: str, field_name: str = "instance_type") -> InstanceType:
        key = name.strip().lower().removeprefix("ml.")
        if key in self.instances:
            return self.instances[key]
        suggestions = difflib.get_close_matches(key, list(self.instances), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        raise NotFound(
            f"unknown instance type '{name}'.{hint}", field_name=field_name, suggestions=suggestions
        )

    def accelerator_of(self, instance: InstanceType) -> Accelerator:
        return self.accelerators[instance.accelerator]

    def devices(self, instance: InstanceType) -> int:
        """Tensor-parallel units on the instance: GPUs, or NeuronCores on inf2/trn."""
        return instance.accelerator_count * self.accelerator_of(instance).cores_per_chip

    def derive(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """The value `make()` works out from this catalog, kept under `key` (`sagemaker_price`, the planner's
        pricing: asked for every hardware option at every phase of an estimate)."""
        if key not in self.derived:
            self.derived[key] = make()
        return cast(T, self.derived[key])

    def sagemaker_price(self, instance: InstanceType, region: str = "us-east-1") -> Price:
        return self.derive(
            ("sagemaker_price", instance.instance_type, region),
            lambda: self._sagemaker_price(instance, region),
        )

    def _sagemaker_price(self, instance: InstanceType, region: str) -> Price:
        for p in self.managed.sagemaker:
            if p.instance_type == f"ml.{instance.instance_type}" and p.region == region:
                return Price(usd_per_hour=p.usd_per_hour, source=p.source, as_of=p.as_of)
        ec2 = instance.price(region)
        assert ec2.usd_per_hour is not None
        premium = (
            self.managed.sagemaker_premium_small
            if instance.accelerator_count == 1
            else self.managed.sagemaker_premium_large
        )
        return Price(
            usd_per_hour=round(ec2.usd_per_hour * (1 + premium), 4),
            source=f"derived: EC2 price x {1 + premium:.2f} (SageMaker premium in third-party tables)",
            as_of=ec2.as_of,
            assumed=True,
        )

    def bedrock_offers(self, model_id: str) -> list[BedrockOffer]:
        out = []
        for o in self.managed.bedrock_on_demand:
            if o.model and self._alias.get(o.model.lower()) == model_id:
                out.append(o)
        return out

    def bedrock_choices(
        self, model_id: str, region: str, data_residency: str = "in-region"
    ) -> tuple[list[BedrockChoice], list[str]]:
        """The offers of a model callable from `region` under `data_residency`, and, when there is none, why
        (the Regions and profiles that would serve it)."""
        allowed = (
            {"in-region"}
            | ({"geography"} if DATA_RESIDENCY.index(data_residency) >= 1 else set())
            | ({"global"} if data_residency == "any" else set())
        )
        out: list[BedrockChoice] = []
        why: list[str] = []
        for o in self.bedrock_offers(model_id):
            in_region = o.in_region or ([] if o.profiles else ["us-east-1"])
            picked: BedrockChoice | None = None
            if region in in_region:
                picked = BedrockChoice(o, o.bedrock_model_id, "in-region", region, o.price_in(region))
            else:
                for scope in ("geography", "global"):
                    prof = next(
                        (p for p in o.profiles if p.scope == scope and region in p.source_regions), None
                    )
                    if prof is None:
                        continue
                    if scope not in allowed:
                        why.append(
                            f"{o.name} is served from {region} only through the {scope} cross-Region profile"
                            f" {prof.id} (constraints.data_residency is {data_residency}; "
                            f"{'geography' if scope == 'geography' else 'any'} allows it)"
                        )
                        break
                    picked = BedrockChoice(o, prof.id, scope, region, o.price_in(region))
                    break
            if picked is not None:
                out.append(picked)
            elif not any(o.name in w for w in why):
                where = sorted(set(in_region) | {r for p in o.profiles for r in p.source_regions})
                close = nearest(region, where)[:3]
                why.append(
                    f"{o.name} is not offered in {region}"
                    + (f" (nearest Regions that offer it: {', '.join(close)})" if close else "")
                )
        return out, why

    def bedrock_provisioned(self, model_id: str) -> list[BedrockProvisioned]:
        return [
            p
            for p in self.managed.bedrock_provisioned
            if p.model and self._alias.get(p.model.lower()) == model_id
        ]
