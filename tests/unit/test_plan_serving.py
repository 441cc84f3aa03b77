"""The serving configuration the planner proposes is the one a team can deploy: the model as named, a context that
holds the workload's long requests, runtime parameters that never make the answer dearer than the engine's
defaults, and nodes billed as the replicas really land on them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import EXAMPLES, ROOT, example_estimate, example_path

from sizing.base.errors import InvalidInput
from sizing.plan import estimate
from sizing.plan.cost import DAYS_PER_MONTH, HOURS_PER_MONTH, LOAD_BALANCER_USD_PER_HOUR, nodes_for
from sizing.plan.serving import context_for
from sizing.results import EstimateResult
from sizing.workload.derived import build_model
from sizing.workload.parse import load_spec, parse_spec

#: One GPU family and EKS only: each estimate takes a fraction of a second.
SMALL: dict[str, Any] = {
    "name": "chat-8b",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "users": {"total": 3000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "traffic": {"profile": "business-hours"},
    "tokens": {"input": {"mean": 1500, "p95": 4000}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 1500}, "tpot_ms": {"p95": 50}},
    "constraints": {"instance_families": ["g6e"], "deployments": ["eks"], "quantizations": ["fp8"]},
}


@pytest.fixture(scope="module")
def example_results() -> dict[str, dict[str, Any]]:
    return {p.stem: example_estimate(p.stem) for p in EXAMPLES}


def test_the_served_model_is_the_one_the_workload_names(example_results):
    # given the example workloads, which name -Instruct models
    for name, result in example_results.items():
        named = load_spec(example_path(name)).model
        # when the planner answers
        for a in result["architectures"]:
            if a["deployment"] == "bedrock":
                continue
            # then every architecture serves that exact model id, not its catalog base model
            assert a["model"] == named
            assert a["serving"]["model"] == named


def test_max_model_len_holds_the_workloads_long_requests(example_results):
    # given the example workloads
    for name, result in example_results.items():
        w = result["workload"]
        longest_p99 = w["input_tokens"]["p99"] + w["output_tokens"]["p99"]
        for a in result["architectures"]:
            if a["deployment"] == "bedrock":
                continue
            # then the context deployed covers the p99 of input + output, and what it refuses is stated
            assert a["serving"]["max_model_len"] >= min(longest_p99, a["context"]["model_context"]), name
            assert a["context"]["max_model_len"] == a["serving"]["max_model_len"]
            assert 0 <= a["context"]["refused_share"] < 0.01


def test_every_estimate_is_a_valid_typed_result(example_results):
    # given the planner's JSON for every example
    for result in example_results.values():
        # when it is read back as the typed contract
        typed = EstimateResult.model_validate(result)
        # then nothing is lost and each architecture is ranked by the one rule
        assert typed.as_json()["architectures"] == result["architectures"]
        costs = [a.ranked_usd_per_month for a in typed.architectures]
        assert costs == sorted(costs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mean_in=st.floats(50, 20_000),
    ratio_in=st.floats(1.05, 3.5),
    mean_out=st.floats(10, 2_000),
    ratio_out=st.floats(1.05, 3.5),
)
def test_max_model_len_is_never_below_the_p99_of_input_plus_output(mean_in, ratio_in, mean_out, ratio_out):
    # given any workload whose token lengths are lognormal (mean, p95)
    spec = parse_spec(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "rate": {"peak_rps": 1},
            "tokens": {
                "input": {"mean": mean_in, "p95": mean_in * ratio_in},
                "output": {"mean": mean_out, "p95": mean_out * ratio_out},
            },
            "slo": {"e2e_s": {"p95": 60}},
        }
    )
    wm = build_model(spec)
    context = 131_072
    # when the planner chooses the context a deployment serves
    ctx = context_for(wm, context)
    # then it is at least the p99 of input + output (or the whole context), and the refused share is a share
    p99 = wm.input_tokens.percentile("p99") + wm.output_tokens.percentile("p99")
    assert ctx.max_model_len >= min(p99, context)
    assert ctx.max_model_len <= context
    assert 0.0 <= ctx.refused_share <= 1.0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    users=st.integers(500, 20_000),
    mean_in=st.sampled_from([400, 1500, 4000]),
    tpot=st.sampled_from([25, 40, 60]),
)
def test_tuning_never_makes_the_cheapest_answer_dearer_than_the_defaults(users, mean_in, tpot):
    # given a chat workload on one GPU family
    raw = {
        **SMALL,
        "users": {**SMALL["users"], "total": users},
        "tokens": {"input": {"mean": mean_in, "p95": mean_in * 2.5}, "output": {"mean": 200, "p95": 500}},
        "slo": {"ttft_ms": {"p95": 2000}, "tpot_ms": {"p95": tpot}},
    }
    spec = parse_spec(raw)
    # when it is estimated with the engine's defaults and with the runtime-parameter search
    default = estimate(spec, tune=False).document()
    tuned = estimate(spec).document()
    # then the tuned answer costs no more (and answers whenever the defaults do)
    if default["architectures"]:
        assert tuned["architectures"]
        assert (
            tuned["architectures"][0]["cost"]["usd_per_month"]
            <= default["architectures"][0]["cost"]["usd_per_month"] + 0.01
        )


def test_each_architecture_says_what_tuning_gained(example_results):
    # given the rag example, whose long prompts stall decodes under the default token budget
    rag = example_results["rag"]["architectures"][0]
    # then its tuning block names the settings changed, the figures before and after and the capacity gained
    t = rag["tuning"]
    assert t["changed"], t
    assert "instead of" in t["summary"] and "→" in t["summary"] and "capacity +" in t["summary"]
    assert t["default_usd_per_month"] > rag["cost"]["usd_per_month"]
    for field, (default, tuned) in t["changed"].items():
        assert rag["serving"][field] == tuned != default


@settings(max_examples=200, deadline=None)
@given(replicas=st.integers(1, 64), per=st.integers(1, 8), zones=st.sampled_from([1, 2]))
def test_nodes_hold_the_replicas_of_each_zone(replicas, per, zones):
    # given replicas spread evenly over zones and packed onto nodes of their zone
    nodes = nodes_for(replicas, per, zones)
    # then there are enough nodes for every replica, never more than one spare per zone
    assert nodes * per >= replicas
    assert nodes <= math.ceil(replicas / per) + zones - 1
    assert nodes >= min(replicas, zones)


def test_nodes_times_price_times_hours_is_the_stated_cost(example_results):
    # given every EKS architecture of every example
    for result in example_results.values():
        for a in result["architectures"]:
            if a["deployment"] != "eks":
                continue
            c = a["cost"]
            sched = c["schedule"]
            per = a["replicas_per_instance"]
            zones = a["placement"]["zones"]
            # then the nodes each hour hold that hour's replicas as the manifests place them
            assert sched["nodes_by_hour"] == [nodes_for(r, per, zones) for r in sched["replicas_by_hour"]]
            # and node-hours x price + the fixed parts is the monthly cost
            b = c["breakdown"]
            compute = b["node_hours_per_day"] * b["instance_usd_per_hour"] * DAYS_PER_MONTH
            fixed = (0.10 + LOAD_BALANCER_USD_PER_HOUR) * HOURS_PER_MONTH
            # (node_hours_per_day is stated to two decimals: that rounding is the only slack)
            slack = 0.005 * b["instance_usd_per_hour"] * DAYS_PER_MONTH + 0.01
            assert c["usd_per_month"] == pytest.approx(compute + fixed, abs=slack)
            assert a["instances"]["peak"] == max(sched["nodes_by_hour"])


def test_two_replicas_of_a_shared_node_type_are_billed_as_two_zones(example_results):
    # given an architecture that packs several replicas per node with min_replicas 2 (the default)
    packed = [
        a
        for r in example_results.values()
        for a in r["architectures"]
        if a["deployment"] == "eks"
        and a["replicas_per_instance"] > 1
        and a["replicas"]["min"] == 2
        and a["placement"]["spread"] == "zone"
    ]
    assert packed
    for a in packed:
        # then the two base replicas sit in two zones: two nodes, and the note says so
        assert a["instances"]["min"] == 2
        assert any("spread over 2 availability zones" in n for n in a["notes"])


def test_same_performance_dearer_sizes_fold_into_one_row(example_results):
    # given the rag example, where several g6e sizes hold one L40S each
    archs = example_results["rag"]["architectures"]
    rows = [
        (
            a["deployment"],
            a["capacity_type"],
            a.get("accelerator"),
            str(a.get("serving")),
            a["replicas_per_instance"],
        )
        for a in archs
    ]
    # then each replica configuration is one row, and the dearer sizes are listed beside it
    assert len(rows) == len(set(rows))
    folded = [a for a in archs if a["also_fits_on"]]
    assert folded
    for a in folded:
        assert all(o["usd_per_month"] >= a["cost"]["usd_per_month"] for o in a["also_fits_on"])


def test_a_workload_longer_than_the_models_context_is_refused_naming_the_field():
    # given prompts far past gemma-2-9b's 8,192-token context at p99
    spec = parse_spec(
        {
            "model": "google/gemma-2-9b-it",
            "rate": {"peak_rps": 1},
            "tokens": {"input": {"mean": 20_000, "p95": 60_000}, "output": {"mean": 100, "p95": 200}},
            "slo": {"e2e_s": {"p95": 30}},
        }
    )
    # when it is estimated
    with pytest.raises(InvalidInput) as err:
        estimate(spec).document()
    # then the refusal names tokens.input and the model's limit
    assert err.value.problems[0].field == "tokens.input"
    assert "8,192" in err.value.problems[0].message


def test_a_model_shipped_in_mxfp4_is_sized_in_its_own_format():
    # given gpt-oss-120b, whose checkpoint ships MXFP4 experts, and a workload that does not choose quantizations
    spec = parse_spec(
        {
            "model": "openai/gpt-oss-120b",
            "users": {"total": 2000},
            "preset": "chat",
            "constraints": {"deployments": ["eks"], "instance_types": ["p5.48xlarge", "g6e.12xlarge"]},
        }
    )
    # when it is estimated
    archs = estimate(spec).document()["architectures"]
    # then the native format is among the answers, with its ~65 GB of weights instead of bf16's ~234 GB
    native = [a for a in archs if a["quantization"] == "mxfp4"]
    assert native
    assert all(60 < a["weights_gb"] < 70 for a in native)
    assert all(a["serving"]["quantization"] == "mxfp4" for a in native)


def test_vllm_refuses_a_token_budget_below_its_batch_and_so_does_the_serving_config():
    # given vLLM settings whose token budget is below the batch cap
    from pydantic import ValidationError

    from sizing.base.serving_config import ServingConfig
    from sizing.catalog import load_catalog
    from sizing.plan.serving import serving_for

    base = serving_for(load_catalog(), "meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, "bf16", "vllm")
    # when they are stated
    with pytest.raises(ValidationError) as err:
        ServingConfig.model_validate(
            {**base.model_dump(), "max_num_seqs": 512, "max_num_batched_tokens": 256}
        )
    # then the configuration is refused, as vLLM refuses it at start
    assert "below max_num_seqs" in str(err.value)


def test_the_tuned_figures_are_the_architectures_own_predictions(example_results):
    # given the example workloads' tuned real-time architectures (an asynchronous job reports its queue's figures)
    import re

    tuned = [
        a
        for result in example_results.values()
        for a in result["architectures"]
        if a.get("tuning") and a["tuning"].get("changed") and not a["id"].endswith(":async")
    ]
    assert tuned
    for a in tuned:
        # when the tuning summary states each SLO figure before -> after
        for name, pct, after in re.findall(
            r"(TTFT|TPOT|e2e) (p\d+) [\d.]+ → ([\d.]+)", a["tuning"]["summary"]
        ):
            metric = {"TTFT": "ttft_ms", "TPOT": "tpot_ms", "e2e": "e2e_s"}[name]
            predicted = a["predicted"][metric][pct]
            # then the figure after is the one the architecture reports, at its own operating point (the same
            # simulation, not one at the rate rounded for display)
            digits = 2 if metric == "e2e_s" else 0  # as the summary prints it
            assert float(after) == pytest.approx(predicted, abs=1.01 * 10**-digits), (a["id"], name)


def test_an_async_jobs_tuning_block_compares_jobs_not_the_real_time_endpoint():
    # given a nightly job's SageMaker asynchronous jobs (a day's queue drained from zero instances; the batch
    # example states e2e p99 300 s, which no job of hours meets, so its jobs are not ranked)
    import re

    result = estimate(load_spec(ROOT / "tests" / "fixtures" / "answers" / "async.yaml")).document()
    jobs = [a for a in result["architectures"] if a["id"].endswith(":async")]
    tuned = [a for a in jobs if a["tuning"]["changed"]]
    assert tuned and len(tuned) < len(jobs)
    for a in jobs:
        t, own = a["tuning"], a["cost"]["usd_per_month"]
        if not t["changed"]:
            # then an untuned job's defaults are the job itself, not the real-time endpoint's monthly bill
            assert t["default_usd_per_month"] == pytest.approx(own, abs=0.01), a["id"]
            continue
        # and a tuned job states the instances and instance-hours a job takes at the defaults and tuned
        m = re.search(r"a job runs (\d+) → (\d+) instances, ([\d.]+) → ([\d.]+) instance-hours", t["summary"])
        assert m, t["summary"]
        assert int(m[2]) == a["batch"]["instances"]
        assert float(m[4]) == pytest.approx(a["batch"]["instance_hours"], abs=0.051)
        assert int(m[1]) >= int(m[2]) and float(m[3]) >= float(m[4])
        # (no per-request latency of the real-time endpoint: a job's e2e is its queue's wall time)
        assert "e2e p" not in t["summary"]
        assert t["default_usd_per_month"] >= own
