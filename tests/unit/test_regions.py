"""Regions as a buyer sees them: prices and availability change with constraints.region, an unknown Region is
refused with suggestions, and a Region without the allowed hardware names the nearest one that has it."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.plan import estimate
from sizing.workload.parse import parse_spec

SPEC: dict[str, Any] = {
    "name": "chat-8b",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"mean": 800, "p95": 2000}, "output": {"mean": 150, "p95": 400}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 20}},
    "constraints": {"instance_families": ["g6"], "deployments": ["eks"], "quantizations": ["bf16"]},
}


def run(region: str, **constraints: Any) -> dict[str, Any]:
    raw = copy.deepcopy(SPEC)
    raw["constraints"] = {**raw["constraints"], "region": region, **constraints}
    return estimate(parse_spec(raw), tune=False).document()


def test_region_changes_the_instance_price_and_the_note_says_where_it_is_from():
    # given the same workload in two Regions
    # when
    east, frankfurt = run("us-east-1"), run("eu-central-1")
    # then: Frankfurt's g6 price is its own, 1.25x Virginia's, and each note names its Region
    a, b = east["architectures"][0], frankfurt["architectures"][0]
    assert a["instance_type"] == b["instance_type"]
    ratio = b["cost"]["breakdown"]["instance_usd_per_hour"] / a["cost"]["breakdown"]["instance_usd_per_hour"]
    assert ratio == pytest.approx(1.2505, abs=0.001)
    assert any("from eu-central-1" in n for n in b["notes"])
    assert b["region"] == "eu-central-1" and b["cost"]["price"]["assumed"] is False


def test_a_catalog_with_other_prices_is_priced_by_its_own_not_the_last_one_read():
    # given an estimate priced from the shipped catalog (which keeps each instance's pricing once worked out)
    from sizing.catalog.loading import build_catalog

    shipped = run("us-east-1")["architectures"][0]
    # when a catalog whose instance of that answer costs twice as much is read next
    dear = build_catalog()
    inst = dear.instances[shipped["instance_type"]]
    doubled = {r: p.model_copy(update={"usd_per_hour": 2 * p.usd_per_hour}) for r, p in inst.prices.items()}
    dear.instances[inst.instance_type] = inst.model_copy(update={"prices": doubled})
    raw = copy.deepcopy(SPEC)
    raw["constraints"]["instance_types"] = [shipped["instance_type"]]
    again = estimate(parse_spec(raw), tune=False, catalog=dear).document()["architectures"][0]
    # then that estimate bills the dearer price, and the shipped catalog's stays as it was
    assert again["cost"]["breakdown"]["instance_usd_per_hour"] == pytest.approx(
        2 * shipped["cost"]["breakdown"]["instance_usd_per_hour"]
    )
    assert run("us-east-1")["architectures"][0]["cost"] == shipped["cost"]


def test_g6_in_eu_central_1_is_no_longer_priced_as_us_east_1():
    # given the catalog
    g6 = load_catalog().instance("g6.xlarge")
    # when / then
    assert g6.price("eu-central-1").usd_per_hour == pytest.approx(1.0064, abs=0.0001)
    assert g6.price("us-east-1").usd_per_hour == 0.8048


def test_a_region_without_the_allowed_family_names_the_nearest_region_that_has_it():
    # given g6, which the snapshot lists in no eu-west-1 zone
    # when
    r = run("eu-west-1")
    # then
    assert r["architectures"] == []
    assert r["infeasible"]["region"] == "eu-west-1"
    assert r["infeasible"]["nearest_region"] == "eu-central-1"
    assert "nearest Region that has them is eu-central-1" in r["infeasible"]["message"]


def test_spot_discount_is_per_region_from_the_snapshot():
    # given
    g6e = load_catalog().instance("g6e.xlarge")
    # when / then: a measured figure per Region, not the assumed family default
    assert g6e.spot_in("us-east-1").assumed is False
    assert g6e.spot_in("us-east-1").fraction != g6e.spot_in("us-west-2").fraction


@pytest.mark.parametrize("region", ["mars-1", "eu-centrl-1"])
def test_an_unknown_region_is_refused_naming_the_field(region: str):
    # given
    raw = copy.deepcopy(SPEC)
    raw["constraints"]["region"] = region
    # when
    with pytest.raises(InvalidInput) as err:
        parse_spec(raw)
    # then
    (problem,) = err.value.problems
    assert problem.field == "constraints.region" and "unknown AWS Region" in problem.message
    if region == "eu-centrl-1":
        assert "eu-central-1" in problem.message


def test_a_data_residency_value_that_is_not_allowed_is_refused():
    # given
    raw = copy.deepcopy(SPEC)
    raw["constraints"]["data_residency"] = "nowhere"
    # when
    with pytest.raises(InvalidInput) as err:
        parse_spec(raw)
    # then
    assert [p.field for p in err.value.problems] == ["constraints.data_residency"]


def test_refresh_prices_without_credentials_is_one_line_and_exit_2(tmp_path):
    # given an environment with no AWS credentials anywhere
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    # when
    out = subprocess.run(
        [
            str(Path(sys.executable).with_name("sizing")),
            "catalog",
            "refresh-prices",
            "--region",
            "eu-central-1",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    # then
    assert out.returncode == 2
    assert "no AWS credentials" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
