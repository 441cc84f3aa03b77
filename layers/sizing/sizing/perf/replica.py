"""The estimator's replica of an architecture in a result (the typed `Architecture`, or a dict as `sizing estimate
--json` writes it)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sizing.base.serving_config import ServingConfig
from sizing.perf.config import HardwareConfig

if TYPE_CHECKING:
    from sizing.catalog import Catalog
    from sizing.results import Architecture


def replica_of(arch: Architecture | dict[str, Any], cat: Catalog) -> HardwareConfig:
    """Its ServingConfig (`HardwareConfig.from_serving`), or for a result that predates it, the hardware with the
    engine's defaults."""
    if not isinstance(arch, dict):  # the typed architecture: its serving configuration is one, or unknown
        perf_model = cat.model(arch.catalog_model or arch.model).id
        if arch.serving is None:
            return HardwareConfig.create(
                perf_model,
                str(arch.instance_type),
                int(arch.tensor_parallel or 1),
                str(arch.quantization),
                arch.engine,
                cat,
            )
        return dataclasses.replace(
            HardwareConfig.from_serving(arch.serving, str(arch.instance_type)), model_id=perf_model
        )
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
