"""The search's cost bound reads `monthly_usd`: the same monthly costs, to the cent, as the full projection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.plan.cost import (
    DAYS_PER_MONTH,
    Pricing,
    bedrock_bill,
    monthly_usd,
    nodes_for,
    project,
    spread_zones,
)
from sizing.workload.derived import resolve
from sizing.workload.parse import parse_spec

SPEC = {
    "name": "costs",
    "model": "llama-3.1-8b",
    "users": {"total": 4000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "traffic": {"profile": "business-hours"},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 500}},
    "slo": {"e2e_s": {"p95": 20}},
}


def _pricing(usd_per_hour: float, spot: float | None, lead_time_s: float, control: float) -> Pricing:
    return Pricing(usd_per_hour, False, "test", "2026-01-01", spot, True, control, lead_time_s)


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.floats(min_value=0.01, max_value=500.0),
    replicas_per_instance=st.integers(1, 8),
    min_replicas=st.integers(1, 5),
    usd_per_hour=st.floats(min_value=0.1, max_value=120.0),
    spot=st.none() | st.floats(min_value=0.0, max_value=0.9),
    lead_times=st.lists(st.sampled_from([600.0, 900.0]), min_size=1, max_size=3),
)
def test_monthly_usd_is_the_projections_monthly_cost(
    capacity: float,
    replicas_per_instance: int,
    min_replicas: int,
    usd_per_hour: float,
    spot: float | None,
    lead_times: list[float],
):
    # given a workload and the pricings of one instance type's deployments (with and without spot)
    wm = resolve(parse_spec({**SPEC, "constraints": {"min_replicas": min_replicas}}))
    pricings = [
        _pricing(usd_per_hour, spot if k == 0 else None, lead, 0.1 * k) for k, lead in enumerate(lead_times)
    ]
    # when the monthly costs are computed alone and as part of the full projection
    alone = monthly_usd(wm, capacity, replicas_per_instance, pricings)
    full = [project(wm, capacity, replicas_per_instance, p, None) for p in pricings]
    # then they are the same figures
    assert alone == [(f["usd_per_month"], f["usd_per_month_spot"]) for f in full]


def test_business_hours_bill_tokens_for_weekdays_only_and_weekends_hold_the_minimum_fleet() -> None:
    # given the same workload with business-hours traffic and with the same weekday every day of the week
    weekdays = resolve(parse_spec(SPEC))
    daily = resolve(parse_spec({**SPEC, "traffic": {"profile": [w for w in weekdays.hourly_rps]}}))
    # when Bedrock's per-token bill and a fleet's cost are projected for each
    tokens = [bedrock_bill(wm, 0.22, 0.22, None)["usd_per_month"] for wm in (weekdays, daily)]
    fleet = [project(wm, 0.5, 1, _pricing(1.0, None, 600.0, 0.0), None) for wm in (weekdays, daily)]
    # then business hours count about 21.7 traffic days a month, not 30.44: tokens cost 5/7 as much
    assert weekdays.traffic_days_per_month == DAYS_PER_MONTH * 5 / 7
    assert tokens[0] / tokens[1] == pytest.approx(5 / 7, rel=1e-3)
    assert weekdays.derived()["requests_per_month"] == round(
        weekdays.avg_rps * 86400 * DAYS_PER_MONTH * 5 / 7
    )
    # and the fleet bills its busy-hour nodes on weekdays only, the min_replicas nodes through the weekend
    busy, flat = (f["breakdown"]["node_hours_per_day"] for f in fleet)
    base = nodes_for(weekdays.spec.constraints.min_replicas, 1, spread_zones(weekdays))
    assert busy == pytest.approx(flat * 5 / 7 + base * 24 * 2 / 7, abs=0.01)
