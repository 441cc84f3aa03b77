"""The estimator's replica of an architecture in a result (a dict as `sizing estimate --json` writes it)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sizing.base.serving_config import ServingConfig
from sizing.perf.config import HardwareConfig

if TYPE_CHECKING:
    from sizing.catalog import Catalog


def replica_of(arch: dict[str, Any], cat: Catalog) -> HardwareConfig:
    """Its ServingConfig (`HardwareConfig.from_serving`), or for a result that predates it, the hardware with the
    engine's defaults."""
    perf_model = cat.model(arch.get("catalog_model") or arch["model"]).id
    try:
        serving = ServingConfig.model_validate(arch.get("serving"))
    except ValidationError:
        return HardwareConfig.create(
            perf_model,
            arch["instance_type"],
            arch["tensor_parallel"],
            arch["quantization"],
            arch["engine"],
            cat,
        )
    return dataclasses.replace(
        HardwareConfig.from_serving(serving, arch["instance_type"]), model_id=perf_model
    )
