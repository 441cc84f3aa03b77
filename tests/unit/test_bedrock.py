"""Bedrock as it is sold: per-token arithmetic per mode, quotas as caveats, Regions and data residency, batch
inference for batch workloads."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizing.catalog import load_catalog
from sizing.plan import estimate
from sizing.plan.cost import DAYS_PER_MONTH, HOURS_PER_MONTH, provisioned_throughput_bill, token_bill
from sizing.workload.parse import parse_spec

CHAT: dict[str, Any] = {
    "name": "chat-70b",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "rate": {"peak_rps": 5},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 400}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 30}},
    "constraints": {"deployments": ["bedrock"], "region": "us-east-1", "data_residency": "geography"},
}
BATCH: dict[str, Any] = {
    "name": "nightly",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "preset": "batch",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 3000, "p95": 8000}, "output": {"mean": 400, "p95": 900}},
    # a nightly job: its deadline is the day (a stated per-request e2e would bind its requests too)
    "slo": {"deadline_s": 86400},
    "constraints": {"deployments": ["bedrock"], "region": "us-east-1", "data_residency": "geography"},
}


def run(raw: dict[str, Any]) -> dict[str, Any]:
    return estimate(parse_spec(raw), tune=False).document()


def cheapest(r: dict[str, Any]) -> float:
    return min((a["cost"]["usd_per_month"] for a in r["architectures"]), default=float("inf"))


def test_on_demand_bill_is_requests_times_tokens_times_price():
    # given a flat 5 req/s workload on Llama 3.1 70B ($0.72 in and out per 1M tokens)
    # when
    r = run(CHAT)
    a = next(a for a in r["architectures"] if a["bedrock"]["mode"] == "on-demand")
    # then
    requests = 5 * 86400 * DAYS_PER_MONTH
    assert a["cost"]["usd_per_month"] == pytest.approx(token_bill(requests, 1000, 200, 0.72, 0.72), rel=1e-4)
    assert a["cost"]["price"]["region"] == "us-east-1"


def test_provisioned_throughput_is_model_units_times_hours():
    # given / when / then
    assert provisioned_throughput_bill(20.5, 2) == pytest.approx(2 * 20.5 * HOURS_PER_MONTH)


def test_us_east_1_offers_llama_3_1_70b_only_through_the_us_profile_so_in_region_refuses_it():
    # given
    raw = copy.deepcopy(CHAT)
    raw["constraints"]["data_residency"] = "in-region"
    # when
    r = run(raw)
    # then
    assert not [a for a in r["architectures"] if a["deployment"] == "bedrock"]
    assert any("cross-Region profile us.meta.llama3-1-70b" in x["reason"] for x in r["rejected"])
    # and with geography allowed, the us. profile is the answer, priced from the source Region
    (geo,) = {a["bedrock"]["model_id"] for a in run(CHAT)["architectures"] if "3-1" in a["id"]}
    assert geo.startswith("us.")


def test_us_west_2_serves_llama_3_1_70b_in_region():
    # given
    raw = copy.deepcopy(CHAT)
    raw["constraints"].update(region="us-west-2", data_residency="in-region")
    # when
    r = run(raw)
    # then
    ids = {a["bedrock"]["model_id"] for a in r["architectures"]}
    assert "meta.llama3-1-70b-instruct-v1:0" in ids


def test_gpt_oss_is_offered_in_region_in_frankfurt():
    # given
    choices, _why = load_catalog().bedrock_choices("openai/gpt-oss-120b", "eu-central-1", "in-region")
    # then
    (c,) = choices
    assert c.invoke_id == "openai.gpt-oss-120b-1:0" and c.scope == "in-region"
    assert c.prices.assumed  # no Frankfurt price found: the US price, marked assumed


def test_batch_workload_gets_a_batch_job_at_half_the_token_price():
    # given a nightly batch workload
    # when
    r = run(BATCH)
    (job,) = [a for a in r["architectures"] if a["bedrock"]["mode"] == "batch" and "3-1" in a["id"]]
    (od,) = [a for a in r["managed_options"] if a["bedrock"]["mode"] == "on-demand" and "3-1" in a["id"]]
    # then: $0.36/1M tokens, half on-demand; per-job figures add up
    assert job["cost"]["usd_per_month"] == pytest.approx(od["cost"]["usd_per_month"] / 2, rel=1e-3)
    b = job["batch"]
    day = 2 * 86400
    assert b["requests"] == day
    assert b["usd_per_job"] == pytest.approx(token_bill(day, 3000, 400, 0.36, 0.36), rel=1e-4)
    assert b["usd_per_million_tokens"] == pytest.approx(0.36, rel=1e-3)
    assert b["wall_time_h"] == 24


def test_an_over_quota_offer_is_ranked_not_rejected():
    # given ten times the traffic: above the 600,000 tokens/min default
    raw = copy.deepcopy(CHAT)
    raw["rate"]["peak_rps"] = 50
    # when
    r = run(raw)
    # then
    (a,) = [a for a in r["architectures"] if "3-1" in a["id"]]
    assert a["rank"] is not None and a["quota"]["needs_increase"]
    need = 50 * 60 * (1000 + a["bedrock"]["max_tokens"])
    assert a["quota"]["tokens_per_minute_needed"] >= need
    assert "(default 600,000)" in a["quota"]["message"]


RESIDENCY = ["in-region", "geography", "any"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    region=st.sampled_from(["us-east-1", "us-west-2", "eu-central-1", "ap-northeast-1"]),
    model=st.sampled_from(["llama-3.1-8b", "meta-llama/Llama-3.1-70B-Instruct", "openai/gpt-oss-120b"]),
    rps=st.floats(0.5, 20),
)
def test_a_stricter_data_residency_never_lowers_the_cheapest_cost(region: str, model: str, rps: float):
    # given one workload under each residency, strictest first
    costs = []
    for residency in RESIDENCY:
        raw = copy.deepcopy(CHAT)
        raw.update(model=model, rate={"peak_rps": rps})
        raw["constraints"].update(region=region, data_residency=residency)
        costs.append(cheapest(run(raw)))
    # then
    assert costs[0] >= costs[1] >= costs[2]


@settings(max_examples=10, deadline=None)
@given(rps=st.floats(0.2, 20), out=st.integers(50, 1500))
def test_allowing_batch_never_raises_the_cheapest_cost_of_a_batch_workload(rps: float, out: int):
    # given a batch workload with and without batch inference
    raw = copy.deepcopy(BATCH)
    raw.update(
        rate={"peak_rps": rps},
        tokens={"input": {"mean": 3000, "p95": 8000}, "output": {"mean": out, "p95": out * 2}},
    )
    without = copy.deepcopy(raw)
    without["constraints"]["batch_inference"] = False
    # when / then
    assert cheapest(run(raw)) <= cheapest(run(without))
