"""How managed offers are sold beyond on-demand tokens (data/modes.yaml): Bedrock service tiers (Priority, Flex,
Reserved) and Provisioned Throughput, SageMaker asynchronous inference and inference components, and EC2 Spot
interruption classes.

`$SIZING_CATALOG_DIR/modes.yaml` replaces any top-level block of the shipped file: a Provisioned Throughput or
Reserved tier quote from AWS (neither is published) goes there."""

from __future__ import annotations

import functools
import os
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.base.strict import StrictFrozen

DATA = Path(__file__).parent / "data" / "modes.yaml"
OVERLAY_ENV = "SIZING_CATALOG_DIR"


class Reserved(StrictFrozen):
    usd_per_1k_tpm_month: float | None = Field(default=None, gt=0)
    terms_months: list[int]
    min_input_tpm: int
    min_output_tpm: int
    target_availability: float
    source: str
    as_of: date


class ServiceTiers(StrictFrozen):
    source: str
    as_of: date
    priority_multiple: float = Field(gt=1)
    flex_multiple: float = Field(gt=0, lt=1)
    priority_output_speedup: float = Field(ge=1)
    priority_latency_source: str
    flex_latency_source: str
    models: list[str]
    reserved: Reserved

    def offers_tiers(self, bedrock_model_id: str) -> bool:
        return bedrock_model_id in self.models


class ProvisionedOffer(StrictFrozen):
    term: str
    usd_per_hour_per_model_unit: float = Field(gt=0)
    input_tpm_per_unit: int = Field(gt=0)
    output_tpm_per_unit: int = Field(gt=0)
    source: str
    as_of: date
    assumed: bool = False


class Provisioned(StrictFrozen):
    source: str
    as_of: date
    terms: list[str]
    offers: dict[str, ProvisionedOffer] = Field(default_factory=dict)


class SageMakerAsync(StrictFrozen):
    source: str
    as_of: date
    max_processing_s: float


class InferenceComponents(StrictFrozen):
    source: str
    as_of: date


class SpotBand(StrictFrozen):
    label: str
    max: float = Field(gt=0, le=1)


class SpotInterruption(StrictFrozen):
    source: str
    bands: list[SpotBand]
    default_band: str
    default_assumed_reason: str
    #: family -> Region -> band label, from a Spot Instance Advisor snapshot
    families: dict[str, dict[str, str]] = Field(default_factory=dict)

    def band(self, family: str, region: str) -> tuple[SpotBand, bool]:
        """The interruption band of a family in a Region, and whether it is assumed (no Advisor figure held)."""
        by_label = {b.label: b for b in self.bands}
        label = self.families.get(family, {}).get(region)
        if label in by_label:
            return by_label[label], False
        return by_label[self.default_band], True


class Modes(StrictFrozen):
    bedrock_service_tiers: ServiceTiers
    bedrock_provisioned: Provisioned
    sagemaker_async: SageMakerAsync
    sagemaker_inference_components: InferenceComponents
    spot_interruption: SpotInterruption


def _read(path: Path) -> dict[str, Any]:
    with path.open() as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping at the top level")
    return data


def build_modes(overlay_dir: Path | None = None) -> Modes:
    raw = _read(DATA)
    if overlay_dir and (overlay_dir / "modes.yaml").exists():
        raw.update(_read(overlay_dir / "modes.yaml"))
    try:
        return Modes.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput(
            "the catalog's modes.yaml does not validate", problems_from_pydantic(exc)
        ) from None


@functools.cache
def _cached(overlay: str | None) -> Modes:
    return build_modes(Path(overlay) if overlay else None)


def load_modes() -> Modes:
    """The shipped modes, with `$SIZING_CATALOG_DIR/modes.yaml` blocks in their place when set; parsed once per
    overlay directory."""
    return _cached(os.environ.get(OVERLAY_ENV) or None)
