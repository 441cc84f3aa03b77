"""Values ↔ DynamoDB attribute values: numbers come back as they went in; numbers DynamoDB cannot hold are bad
input, not a crash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sizing.base.errors import InvalidInput
from sizing.store.codec import from_item, to_item

#: Floats DynamoDB can hold (its number range is 1e-130 .. <1e126).
storable_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: x == 0 or 1e-130 <= abs(x) < 1e125
)
documents = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8) | st.integers(-(10**30), 10**30) | storable_floats,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(min_size=1, max_size=6), documents, max_size=5))
def test_a_document_round_trips_unchanged(doc: dict) -> None:
    back = from_item(to_item(doc))
    assert back == doc


@pytest.mark.parametrize("number", [5e-324, 1e200, -1e130, 12345678901234567890123456789012345678901])
def test_a_number_dynamodb_cannot_hold_is_invalid_input(number: float) -> None:
    with pytest.raises(InvalidInput):
        to_item({"x": number})


def test_not_a_number_is_stored_as_null() -> None:
    assert from_item(to_item({"x": float("nan"), "y": float("inf")})) == {"x": None, "y": None}
