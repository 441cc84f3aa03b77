"""Plain Python values ↔ DynamoDB attribute values. DynamoDB numbers are decimals: floats go in through their
shortest repr (so 0.1 stays 0.1) and come back as int when integral, else float."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_SER = TypeSerializer()
_DE = TypeDeserializer()


def _to_decimals(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # DynamoDB has no NaN/inf; a missing figure reads as null
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {str(k): _to_decimals(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_decimals(v) for v in value]
    return value


def _from_decimals(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and "." not in str(value) else float(value)
    if isinstance(value, dict):
        return {k: _from_decimals(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_decimals(v) for v in value]
    return value


def to_item(data: dict[str, Any]) -> dict[str, Any]:
    """A plain mapping → a DynamoDB item (attribute-value form)."""
    return {k: _SER.serialize(_to_decimals(v)) for k, v in data.items()}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item → a plain mapping."""
    return {k: _from_decimals(_DE.deserialize(v)) for k, v in item.items()}


def to_value(value: Any) -> dict[str, Any]:
    """One attribute value (for expression values)."""
    return dict(_SER.serialize(_to_decimals(value)))
