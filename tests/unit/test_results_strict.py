"""The typed answer refuses what it does not name: a misspelled field of an architecture, of its blocks or of the
estimate result fails validation instead of riding along unread (the planner builds them with named fields)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sizing.results import Architecture, EstimateResult

ARCH: dict[str, Any] = {
    "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand",
    "model": "Qwen/Qwen2.5-32B-Instruct",
    "deployment": "eks",
    "instance_type": "g6e.xlarge",
    "engine": "vllm",
    "predicted": {"ttft_ms": {"p95": 400.0}, "tpot_ms": {"p95": 60.0}, "e2e_s": {"p95": 20.0}},
    "meets_slo": True,
    "cost": {"usd_per_hour_peak": 13.16, "usd_per_month": 9611.55},
}


def test_a_well_spelled_architecture_is_read_with_its_fields() -> None:
    # given an architecture's JSON with only named fields
    # when it is validated
    arch = Architecture.model_validate(ARCH)
    # then its fields read as typed values
    assert arch.instance_type == "g6e.xlarge"
    assert arch.cost.usd_per_month == 9611.55


@pytest.mark.parametrize(
    ("where", "raw"),
    [
        ("isntance_type", {**ARCH, "isntance_type": "g6e.xlarge"}),
        ("cost.usd_per_mnoth", {**ARCH, "cost": {**ARCH["cost"], "usd_per_mnoth": 1.0}}),
        ("predicted.e2e_s.p959", {**ARCH, "predicted": {**ARCH["predicted"], "e2e_s": {"p959": 1.0}}}),
    ],
)
def test_a_misspelled_architecture_field_is_refused(where: str, raw: dict[str, Any]) -> None:
    # given an architecture's JSON with one misspelled key
    # when it is validated
    with pytest.raises(ValidationError) as err:
        Architecture.model_validate(raw)
    # then validation fails and names the misspelled key
    assert where.rsplit(".", 1)[-1] in str(err.value)


def test_a_misspelled_keyword_is_refused_when_an_architecture_is_built() -> None:
    # given the keywords the planner builds an architecture with, one of them misspelled
    kwargs = {**ARCH, "capacity_tpye": "spot"}
    # when the architecture is built
    # then it is refused rather than built with the on-demand default
    with pytest.raises(ValidationError, match="capacity_tpye"):
        Architecture(**kwargs)


def test_an_estimate_result_with_an_unknown_key_is_refused() -> None:
    # given an estimate result's JSON with a key the contract does not name
    raw = {"workload": {}, "architectures": [ARCH], "architecturs": []}
    # when it is validated
    # then it is refused, naming the key
    with pytest.raises(ValidationError, match="architecturs"):
        EstimateResult.model_validate(raw)
