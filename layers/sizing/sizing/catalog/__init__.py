"""Catalogs of accelerators, AWS instance types, models and managed offerings (Bedrock, SageMaker).

Data lives in YAML files under `data/`, every entry with a source and an as-of date; values we could not source
are flagged `assumed`. `load_catalog()` validates them into typed models once per process."""

from sizing.catalog.loading import load_catalog
from sizing.catalog.models import Catalog
from sizing.catalog.offerings import BedrockOffer, SageMakerPrice
from sizing.catalog.records import Accelerator, InstanceType, ModelSpec, Price

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
