"""Structured fuzzing of POST /estimates: workload specs that are *almost* right (every field present in some
form, values from tiny to absurd, constraints that leave nothing) reach the planner itself, which schemathesis's
random bodies rarely do. Each answer is an estimate or a 422 naming the field; never a 5xx or a hang."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.integration

#: Specs per run: the default run keeps to a few seconds (each estimate plans a whole catalog slice).
QUICK_SPECS = 8
DEEP_SPECS = 300

POSITIVE = st.one_of(
    st.floats(min_value=1e-12, max_value=1e12, allow_nan=False),
    st.sampled_from([1e-300, 1e-9, 0.5, 1.0, 7.0, 1e6, 1e9, 1e300]),
)
#: Mostly valid numbers (so the planner is reached), sometimes zero or negative (so the bounds are).
ANY_NUMBER = st.one_of(POSITIVE, POSITIVE, POSITIVE, st.sampled_from([0, -1]))
LATENCY = st.one_of(st.floats(min_value=1e-3, max_value=1e5), st.sampled_from([1e-9, 1e9]))
PERCENTILES = st.dictionaries(st.sampled_from(["p50", "p90", "p95", "p99"]), LATENCY, min_size=1, max_size=3)
TOKENS = st.one_of(st.integers(min_value=1, max_value=32_000), st.sampled_from([1, 10**6, 10**7, 0]))
TOKEN_SPEC = st.one_of(
    st.fixed_dictionaries({"fixed": TOKENS}),
    st.fixed_dictionaries({"mean": TOKENS, "p95": TOKENS}),
    st.fixed_dictionaries(
        {"dist": st.just("lognormal"), "mean": TOKENS, "sigma": st.floats(min_value=0.01, max_value=3)}
    ),
)
CONSTRAINTS = st.fixed_dictionaries(
    {},
    optional={
        "deployments": st.lists(st.sampled_from(["eks", "sagemaker", "bedrock"]), min_size=1, max_size=3),
        "instance_families": st.lists(
            st.sampled_from(["g5", "g6e", "p5", "inf2", "trn1"]), min_size=1, max_size=3
        ),
        "capacity": st.lists(st.sampled_from(["on-demand", "spot"]), min_size=1, max_size=2),
        "quantizations": st.lists(st.sampled_from(["bf16", "fp8", "int8", "int4"]), min_size=1, max_size=2),
        "min_replicas": st.integers(min_value=1, max_value=1000),
        "max_monthly_usd": POSITIVE,
        "max_context_tokens": st.integers(min_value=1, max_value=10**7),
        "region": st.sampled_from(["us-east-1", "eu-west-1", "ap-southeast-2"]),
    },
)
SPEC = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "meta-llama/Llama-3.1-8B"]),
        "tokens": st.fixed_dictionaries({"input": TOKEN_SPEC, "output": TOKEN_SPEC}),
        "slo": st.dictionaries(st.sampled_from(["ttft_ms", "tpot_ms", "e2e_s"]), PERCENTILES, min_size=1, max_size=3),
    },
    optional={
        "rate": st.fixed_dictionaries({"peak_rps": ANY_NUMBER}),
        "traffic": st.one_of(
            st.fixed_dictionaries({"profile": st.sampled_from(["flat", "business-hours"])}),
            st.fixed_dictionaries({"profile": st.lists(st.floats(min_value=0, max_value=1e6), min_size=24, max_size=24)}),
        ),
        "constraints": CONSTRAINTS,
    },
).map(lambda spec: spec if "rate" in spec else {**spec, "rate": {"peak_rps": 2}})  # fmt: skip


def _estimate(api: Any, spec: dict[str, Any], figures: Any) -> None:
    # when the spec is posted
    answer = api.post_json("/estimates", spec)
    figures.add("bad_input.structured_specs", specs=1, server_errors=int(answer.status >= 500))
    event(f"HTTP {answer.status}")
    # then an estimate, or a 422 that names the field; never a 5xx
    assert answer.status in (200, 422), (spec, answer.status, answer.body[:500])
    body = answer.json()
    if answer.status == 422:
        assert body["details"]["problems"] or body["message"]
    else:
        assert "architectures" in body and "workload" in body
        for arch in body["architectures"]:
            assert arch["cost"]["usd_per_month"] >= 0


@settings(max_examples=QUICK_SPECS, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(spec=SPEC)
def test_almost_right_specs_get_an_estimate_or_a_named_problem(api, figures, spec):
    _estimate(api, spec, figures)


@pytest.mark.slow
@settings(max_examples=DEEP_SPECS, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(spec=SPEC)
def test_almost_right_specs_get_an_estimate_or_a_named_problem_deeply(api, figures, spec):
    _estimate(api, spec, figures)
