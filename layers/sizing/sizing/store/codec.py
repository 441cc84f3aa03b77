"""Plain Python values ↔ DynamoDB attribute values. DynamoDB numbers are decimals: floats go in through their
shortest repr (so 0.1 stays 0.1) and come back as int when integral, else float. A number DynamoDB cannot hold
is InvalidInput (a 422, never a 500)."""

from __future__ import annotations

import functools
import math
from decimal import Context, Decimal
from typing import Any

from sizing.base.errors import InvalidInput, Problem


@functools.cache
def _codecs() -> tuple[Any, Any]:
    """boto3's (de)serializers, imported on first use: importing boto3 costs a cold start ~0.4 s, which
    POST /estimates (no DynamoDB) should not pay."""
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


#: DynamoDB numbers: magnitudes from 1e-130 to below 1e126, at most 38 significant digits (DynamoDB docs,
#: "Naming rules and data types").
DYNAMODB_MIN_MAGNITUDE = Decimal("1e-130")
DYNAMODB_MAX_MAGNITUDE = Decimal("1e126")
DYNAMODB_MAX_DIGITS = 38


def _number(value: int | float) -> Decimal:
    d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    magnitude = d.copy_abs()  # abs() would round to the default 28-digit context
    all_digits = "".join(map(str, magnitude.as_tuple().digits))
    digits = len(all_digits.rstrip("0")) or 1
    if magnitude and (
        magnitude < DYNAMODB_MIN_MAGNITUDE
        or magnitude >= DYNAMODB_MAX_MAGNITUDE
        or digits > DYNAMODB_MAX_DIGITS
    ):
        raise InvalidInput(
            f"the number {value!r} cannot be stored: use magnitudes between 1e-130 and 1e125",
            [Problem("", f"{value!r} is out of range")],
        )
    # a big integer's trailing zeros are not significant digits: 10**40 is stored as 1E+40
    return d if len(all_digits) <= DYNAMODB_MAX_DIGITS else d.normalize(Context(prec=DYNAMODB_MAX_DIGITS))


def _to_decimals(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # DynamoDB has no NaN/inf; a missing figure reads as null
    if isinstance(value, int | float):
        return _number(value)
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
    ser, _ = _codecs()
    return {k: ser.serialize(_to_decimals(v)) for k, v in data.items()}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item → a plain mapping."""
    _, de = _codecs()
    return {k: _from_decimals(de.deserialize(v)) for k, v in item.items()}


def to_value(value: Any) -> dict[str, Any]:
    """One attribute value (for expression values)."""
    ser, _ = _codecs()
    return dict(ser.serialize(_to_decimals(value)))
