"""Managed offers as they are sold beyond on-demand tokens: Bedrock service tiers, Provisioned Throughput and the
Reserved tier (ranked only with a quote, and only when cheaper), SageMaker asynchronous inference for batch
workloads, SageMaker inference components, and spot terms a buyer can plan with."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.catalog import load_catalog
from sizing.plan import estimate
from sizing.plan.cost import (
    COMMITTED_TPM_HEADROOM,
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    async_job,
    expected_spot_interruptions,
    provisioned_units,
    reserved_tier_bill,
    token_bill,
)
from sizing.plan.serving import BATCH_SEQS_FACTOR, default_serving, tuning_variants
from sizing.workload.parse import parse_spec

GPT_OSS: dict[str, Any] = {
    "name": "chat-oss",
    "model": "openai/gpt-oss-120b",
    "rate": {"peak_rps": 5},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 400}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 30}},
    "constraints": {"deployments": ["bedrock"], "region": "us-east-1"},
}
# a nightly batch job on hardware the planner searches quickly
BATCH_HOSTED: dict[str, Any] = {
    "name": "nightly-8b",
    "model": "llama-3.1-8b",
    "preset": "batch",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 2000, "p95": 5000}, "output": {"mean": 300, "p95": 700}},
    # a nightly job: its deadline is the day (a stated per-request e2e would bind its requests too)
    "slo": {"deadline_s": 86400},
    "constraints": {
        "instance_types": ["g6e.xlarge", "g6e.12xlarge"],
        "deployments": ["eks", "sagemaker"],
        "quantizations": ["bf16"],
        "min_replicas": 1,
    },
}
SPOT_ONLY: dict[str, Any] = {
    "name": "spot-chat",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 40},
    "traffic": {"profile": "business-hours"},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 1500}, "e2e_s": {"p95": 20}},
    "constraints": {
        "instance_types": ["g6e.xlarge"],
        "deployments": ["eks"],
        "quantizations": ["bf16"],
        "capacity": ["spot"],
        "min_replicas": 2,
    },
}


def run(raw: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return estimate(parse_spec(raw), tune=kw.pop("tune", False), **kw).document()


def by_id(archs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    (a,) = [a for a in archs if a["id"] == rid]
    return a


def quote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: dict[str, Any]) -> None:
    """A modes.yaml overlay holding an AWS quote (what a buyer copies from the Bedrock console)."""
    (tmp_path / "modes.yaml").write_text(yaml.safe_dump(block))
    monkeypatch.setenv("SIZING_CATALOG_DIR", str(tmp_path))


# --- service tiers -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def oss() -> dict[str, Any]:
    return run(GPT_OSS)


def test_priority_costs_175_percent_and_flex_half_of_the_standard_token_bill(oss):
    # given gpt-oss-120b on Bedrock in us-east-1 ($0.15 in / $0.62 out per 1M tokens, Standard)
    std = by_id(oss["managed_options"], "bedrock:openai.gpt-oss-120b-1:0")
    pri = by_id(oss["managed_options"], "bedrock:openai.gpt-oss-120b-1:0:priority")
    flex = by_id(oss["managed_options"], "bedrock:openai.gpt-oss-120b-1:0:flex")
    requests = 5 * 86400 * DAYS_PER_MONTH
    # then each tier bills the same tokens at its own price
    assert std["cost"]["usd_per_month"] == pytest.approx(
        token_bill(requests, 1000, 200, 0.15, 0.62), rel=1e-4
    )
    assert pri["cost"]["usd_per_month"] == pytest.approx(
        token_bill(requests, 1000, 200, 0.2625, 1.085), rel=1e-4
    )
    assert flex["cost"]["usd_per_month"] == pytest.approx(
        token_bill(requests, 1000, 200, 0.075, 0.31), rel=1e-4
    )
    assert pri["service_tier"] == "priority" and pri["cost"]["price"]["tier_multiple"] == 1.75


def test_priority_is_faster_and_flex_is_not_ranked_for_an_interactive_workload(oss):
    # given the interactive workload
    ranked = {a["id"] for a in oss["architectures"]}
    std = by_id(oss["managed_options"], "bedrock:openai.gpt-oss-120b-1:0")
    pri = by_id(oss["managed_options"], "bedrock:openai.gpt-oss-120b-1:0:priority")
    # then Priority's output is faster (AWS: up to 25%), Flex is listed with its price but not ranked
    assert pri["predicted"]["tpot_ms"]["p50"] == pytest.approx(
        std["predicted"]["tpot_ms"]["p50"] / 1.25, rel=0.02
    )
    assert "bedrock:openai.gpt-oss-120b-1:0:flex" not in ranked
    (why,) = [r for r in oss["rejected"] if r["id"].endswith(":flex")]
    assert "ranked only for batch workloads" in why["reason"]


def test_flex_is_ranked_for_a_batch_workload_below_the_standard_tier():
    # given a batch workload of the same model
    raw = copy.deepcopy(GPT_OSS)
    raw.update(preset="batch", slo={"e2e_s": {"p99": 7200}})
    # when
    r = run(raw)
    ranked = {a["id"]: a for a in r["architectures"]}
    # then
    flex, std = ranked["bedrock:openai.gpt-oss-120b-1:0:flex"], ranked["bedrock:openai.gpt-oss-120b-1:0"]
    assert flex["rank"] < std["rank"]


def test_a_model_without_published_tier_prices_gets_no_tier_rows():
    # given Llama 3.1 70B (no Priority or Flex price on AWS's pricing page)
    raw = copy.deepcopy(GPT_OSS)
    raw["model"] = "meta-llama/Llama-3.1-70B-Instruct"
    raw["constraints"]["data_residency"] = "geography"
    # when
    r = run(raw)
    # then only the Standard tier is priced; Provisioned Throughput is stated as unpriced
    tiers = {a.get("service_tier") for a in r["managed_options"]}
    assert tiers == {"standard"}
    assert any("Provisioned Throughput not priced" in n for n in r["managed_options"][0]["notes"])


# --- Provisioned Throughput and Reserved ----------------------------------------------------------------------


def test_model_units_cover_the_peak_tokens_per_minute_with_headroom():
    # given 300,000 input / 60,000 output tokens per minute at peak, a unit doing 100,000 / 25,000
    # when / then: input needs ceil(3.6) = 4 units, output ceil(2.88) = 3: four units
    assert provisioned_units(300_000, 60_000, 100_000, 25_000) == 4
    # and a tiny workload still buys one unit
    assert provisioned_units(10, 1, 100_000, 25_000) == 1


def test_reserved_tier_bills_per_1k_tokens_per_minute_with_its_minimums():
    # given 50,000 input / 5,000 output TPM at peak (under the 100K / 10K minimums) at $2 per 1K TPM a month
    monthly, r_in, r_out = reserved_tier_bill(50_000, 5_000, 2.0, 100_000, 10_000)
    # then the minimums are reserved and billed
    assert (r_in, r_out) == (100_000, 10_000)
    assert monthly == pytest.approx((100_000 + 10_000) / 1000 * 2.0)


def _pt_block(price: float) -> dict[str, Any]:
    return {
        "bedrock_provisioned": {
            "source": "test quote",
            "as_of": "2026-09-01",
            "terms": ["1-month", "6-month"],
            "offers": {
                "openai.gpt-oss-120b-1:0": {
                    "term": "1-month",
                    "usd_per_hour_per_model_unit": price,
                    "input_tpm_per_unit": 200_000,
                    "output_tpm_per_unit": 40_000,
                    "source": "Bedrock console quote (test)",
                    "as_of": "2026-09-01",
                }
            },
        }
    }


def test_provisioned_throughput_is_ranked_when_cheaper_than_on_demand(tmp_path, monkeypatch):
    # given a quote of $1/h per model unit for a workload whose tokens cost far more on demand
    quote(tmp_path, monkeypatch, _pt_block(1.0))
    raw = copy.deepcopy(GPT_OSS)
    raw["rate"] = {"peak_rps": 20}
    # when
    r = run(raw)
    pt = by_id(r["architectures"], "bedrock:openai.gpt-oss-120b-1:0:provisioned")
    # then units come from the peak tokens per minute and the bill is units x price x hours
    in_tpm, out_tpm = 20 * 60 * 1000, 20 * 60 * 200
    units = max(
        math.ceil(in_tpm * COMMITTED_TPM_HEADROOM / 200_000),
        math.ceil(out_tpm * COMMITTED_TPM_HEADROOM / 40_000),
    )
    assert pt["bedrock"]["model_units"] == units
    assert pt["cost"]["usd_per_month"] == pytest.approx(units * 1.0 * HOURS_PER_MONTH, abs=0.01)
    std = by_id(r["architectures"], "bedrock:openai.gpt-oss-120b-1:0")
    assert pt["rank"] < std["rank"]
    assert pt["quota"]["needs_increase"] and "model units" in pt["quota"]["message"]


def test_provisioned_throughput_dearer_than_on_demand_is_listed_not_ranked(tmp_path, monkeypatch):
    # given an expensive quote
    quote(tmp_path, monkeypatch, _pt_block(500.0))
    # when
    r = run(GPT_OSS)
    # then
    assert not [a for a in r["architectures"] if a["id"].endswith(":provisioned")]
    (why,) = [x for x in r["rejected"] if x["id"].endswith(":provisioned")]
    assert "not cheaper than on-demand" in why["reason"]


# --- SageMaker asynchronous inference and batch workloads ----------------------------------------------------


def test_an_async_job_runs_the_fewest_instances_that_meet_the_deadline():
    # given 172,800 requests a day, 2 req/s per instance at $2/h, a 24 h deadline and 10 minutes to start
    job = async_job(172_800, 2000, 300, 2.0, 2.0, 24.0, 600)
    # then one instance drains it in 24 h of work: too long after the start, so two instances, 12 h each
    assert job["instances"] == 2
    run_s = 172_800 / (2 * 2.0)
    assert job["wall_time_h"] == pytest.approx((600 + run_s) / 3600, abs=0.01)
    assert job["instance_hours"] == pytest.approx(2 * (600 + run_s + 360) / 3600, abs=0.001)
    assert job["usd_per_job"] == pytest.approx(job["instance_hours"] * 2.0, abs=0.01)
    assert job["usd_per_million_tokens"] == pytest.approx(
        job["usd_per_job"] / (172_800 * 2300 / 1e6), rel=1e-3
    )


@pytest.fixture(scope="module")
def batch_hosted() -> dict[str, Any]:
    return run(BATCH_HOSTED)


def test_a_batch_workload_gets_a_sagemaker_async_job_costed_per_job(batch_hosted):
    # given the nightly batch on EKS and SageMaker
    jobs = [a for a in batch_hosted["architectures"] if a["id"].endswith(":async")]
    # then each async answer states its job: instances, wall time within the day, dollars per job and per month
    assert jobs
    for a in jobs:
        b = a["batch"]
        assert b["requests"] == 2 * 86400
        assert b["wall_time_h"] <= 24
        assert a["cost"]["usd_per_month"] == pytest.approx(b["usd_per_job"] * DAYS_PER_MONTH, abs=0.05)
        assert a["instances"]["min"] == 0
    # and the answers say how requests reach them: the jobs are asynchronous, every other hosted answer real-time
    hosted = [a for a in batch_hosted["architectures"] if a["deployment"] != "bedrock"]
    assert {a["id"] for a in hosted if a["invocation"] == "async"} == {a["id"] for a in jobs}
    assert {a["invocation"] for a in hosted} == {"async", "real-time"}


def test_an_async_job_drains_at_the_capacity_the_real_time_answer_is_sized_to_not_past_it(batch_hosted):
    # given the nightly batch's asynchronous jobs and the real-time SageMaker endpoints on the same hardware
    archs = {a["id"]: a for a in batch_hosted["architectures"]}
    jobs = [a for a in archs.values() if a["id"].endswith(":async")]
    assert jobs
    for job in jobs:
        endpoint = archs[job["id"].removesuffix(":async")]
        usable = endpoint["per_replica"]["rps"]  # the SLO capacity less the sizing allowance
        # then the job's replicas run at that rate, not at the SLO capacity itself
        assert job["per_replica"]["rps_at_peak"] == pytest.approx(usable, abs=1e-3)
        assert job["per_replica"]["rps_at_peak"] < job["per_replica"]["rps_slo_limit"]
        # and its headroom is the allowance kept (the default 20%), its figures simulated at that rate
        assert job["headroom"]["load_pct"] == pytest.approx(
            100 * (1 - usable / job["per_replica"]["rps_slo_limit"]), abs=0.2
        )
        assert job["headroom"]["tightest_pct"] >= 0
        # and the day's requests fit its instances at that rate within the day
        per_instance = job["replicas_per_instance"] or 1
        capacity = job["batch"]["instances"] * per_instance * usable * job["batch"]["wall_time_h"] * 3600
        assert capacity >= 0.99 * job["batch"]["requests"]


def test_every_hosted_answer_of_a_batch_workload_states_its_daily_job(batch_hosted):
    # then real-time answers carry the day's job too, at their monthly cost over the month's days
    for a in batch_hosted["architectures"]:
        if a["deployment"] == "bedrock" or a["id"].endswith(":async"):
            continue
        rank_cost = (
            a["cost"]["usd_per_month_spot"] if a["capacity_type"] == "spot" else a["cost"]["usd_per_month"]
        )
        assert a["batch"]["usd_per_job"] == pytest.approx(rank_cost / DAYS_PER_MONTH, abs=0.01)


def test_sagemaker_copies_share_the_instance_as_inference_components(batch_hosted):
    # given SageMaker real-time endpoints on g6e.xlarge (1 L40S) and g6e.12xlarge (4 L40S)
    cat = load_catalog()
    endpoints = [
        a
        for a in batch_hosted["architectures"]
        if a["deployment"] == "sagemaker" and not a["id"].endswith(":async")
    ]
    assert any(a["inference_components"]["copies_per_instance"] > 1 for a in endpoints)
    for a in endpoints:
        ic = a["inference_components"]
        devices = cat.devices(cat.instance(a["instance_type"]))
        # then each copy holds its own accelerators, the copies fill the instance, and the bill is the instances
        assert ic["copies_per_instance"] == devices // a["tensor_parallel"]
        assert ic["accelerators_per_copy"] == a["tensor_parallel"]
        b = a["cost"]["breakdown"]
        assert b["compute_usd_per_month"] == pytest.approx(
            b["node_hours_per_day"] * b["instance_usd_per_hour"] * DAYS_PER_MONTH, rel=1e-3
        )
        assert ic["instances_peak"] == a["instances"]["peak"]


@settings(max_examples=4, deadline=None)
@given(rps=st.floats(0.5, 6))
def test_allowing_batch_modes_never_raises_the_cheapest_cost_of_a_batch_workload(rps: float):
    # given the hosted batch workload with and without batch modes
    raw = copy.deepcopy(BATCH_HOSTED)
    raw["rate"] = {"peak_rps": rps}
    without = copy.deepcopy(raw)
    without["constraints"]["batch_inference"] = False

    def cheapest(r: dict[str, Any]) -> float:
        return min(
            (a["cost"]["usd_per_month_spot"] if a["capacity_type"] == "spot" else a["cost"]["usd_per_month"])
            for a in r["architectures"]
        )

    # when / then
    assert cheapest(run(raw)) <= cheapest(run(without))


def test_a_batch_workload_searches_twice_the_batch_cap_and_tuning_never_makes_it_dearer():
    # given a replica's engine defaults
    cat = load_catalog()
    acc = cat.accelerator_of(cat.instance("g6e.xlarge"))
    base = default_serving("llama-3.1-8b", "vllm", 1, "bf16", acc, 8192)
    # when
    interactive = tuning_variants(base, acc)
    batch = tuning_variants(base, acc, batch=True)
    # then only the batch workload tries the larger cap
    bigger = int(base.max_num_seqs * BATCH_SEQS_FACTOR)
    assert all(v.max_num_seqs != bigger for v in interactive)
    assert any(v.max_num_seqs == bigger for v in batch)
    # and the tuned answer of a batch workload is never dearer than the engine defaults
    tuned = run(BATCH_HOSTED, tune=True)
    defaults = run(BATCH_HOSTED, tune=False)
    for a in tuned["architectures"]:
        if a.get("tuning") and a["tuning"].get("default_usd_per_month") is not None:
            assert a["cost"]["usd_per_month"] <= a["tuning"]["default_usd_per_month"] + 0.01
    assert (
        tuned["architectures"][0]["cost"]["usd_per_month"]
        <= defaults["architectures"][0]["cost"]["usd_per_month"]
    )


# --- spot -------------------------------------------------------------------------------------------------------


def test_expected_interruptions_count_the_spot_instances_run_in_a_month():
    # given 2 on-demand base nodes, spot nodes rising from 0 to 3 once a day, a 10% monthly interruption rate
    nodes = [2] * 8 + [5] * 10 + [2] * 6
    # then three spot launches a day x the month's days x 10%
    assert expected_spot_interruptions(nodes, 2, 0.10) == pytest.approx(0.10 * 3 * DAYS_PER_MONTH)
    # and spot nodes running all month count once each
    assert expected_spot_interruptions([4] * 24, 2, 0.10) == pytest.approx(0.2)


def test_a_spot_only_answer_states_interruptions_and_its_on_demand_base():
    # given a workload allowed only spot capacity, two replicas minimum
    # when
    r = run(SPOT_ONLY)
    a = r["architectures"][0]
    # then
    s = a["spot"]
    assert a["capacity_type"] == "spot"
    assert s["on_demand_base_nodes"] == 2
    assert s["interruption_band"] in {"<5%", "5-10%", "10-15%", "15-20%", ">20%"}
    assert s["interruption_band_assumed"] is True  # no Spot Instance Advisor snapshot is held
    assert s["expected_interruptions_per_month"] > 0
    price = a["cost"]["breakdown"]["instance_usd_per_hour"]
    assert s["on_demand_base_usd_per_month"] == pytest.approx(2 * 24 * price * DAYS_PER_MONTH, abs=0.01)
    assert s["usd_per_hour"] == pytest.approx(price * (1 - a["cost"]["price"]["spot_discount"]), rel=1e-3)
    assert any("interruptions a month" in n and "on-demand node" in n for n in a["notes"])
