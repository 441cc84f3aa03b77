"""Catalogs of accelerators, AWS instance types, models and managed offerings (Bedrock, SageMaker).

Data lives in YAML files under `data/`, every entry with a source and an as-of date; values we could not source
are flagged `assumed`. `load_catalog()` validates them into typed models once per process."""

from sizing.catalog.models import (
    Accelerator,
    BedrockOffer,
    Catalog,
    InstanceType,
    ModelSpec,
    Price,
    SageMakerPrice,
    load_catalog,
)

__all__ = [
    "Accelerator",
    "BedrockOffer",
    "Catalog",
    "InstanceType",
    "ModelSpec",
    "Price",
    "SageMakerPrice",
    "load_catalog",
]
