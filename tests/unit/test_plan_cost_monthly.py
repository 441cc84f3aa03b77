"""The search's cost bound reads `monthly_usd`: the same monthly costs, to the cent, as the full projection."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.plan.cost import Pricing, monthly_usd, project
from sizing.workload import parse_spec, resolve

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
