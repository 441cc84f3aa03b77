"""`slo.confidence`: the planner sizes so that every SLO target holds at that quantile of the estimator's own
cross-validated error, and the answer says which allowance for error it used."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from sizing.base.errors import InvalidInput
from sizing.perf.calibration import conservative_ratio
from sizing.plan import estimate
from sizing.plan.capacity import clear_caches, margin
from sizing.results import rank_cost
from sizing.workload.parse import parse_spec

# One family and one deployment keep each estimate under a second.
SMALL: dict[str, Any] = {
    "name": "chat-8b",
    "model": "llama-3.1-8b",
    "users": {"total": 4000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 1500}, "tpot_ms": {"p95": 80}},
    "constraints": {"instance_families": ["g6e"], "deployments": ["eks"]},
}


def _spec(confidence: float | None = None, users: int = 4000, ttft_ms: float = 1500) -> dict[str, Any]:
    spec = copy.deepcopy(SMALL)
    spec["users"]["total"] = users
    spec["slo"]["ttft_ms"]["p95"] = ttft_ms
    if confidence is not None:
        spec["slo"]["confidence"] = confidence
    return spec


def _replicas(result: dict[str, Any]) -> dict[str, int]:
    return {a["id"]: a["replicas"]["peak"] for a in result["architectures"]}


# each example is two estimates (~1 s each); no shrinking: a failing example is printed as generated
@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    low=st.sampled_from([0.5, 0.6, 0.7, 0.8]),
    step=st.sampled_from([0.05, 0.1, 0.19]),
    users=st.sampled_from([2000, 20000, 60000]),
    ttft_ms=st.sampled_from([400.0, 1500.0]),
)
# every probe fails at the stricter margin: the capacity below the first probe was once half one user's worth,
# which exceeded the first probe's rate the looser margin had passed (9 replicas at 0.7, 8 at 0.75)
@example(low=0.7, step=0.05, users=2000, ttft_ms=400.0)
def test_a_higher_confidence_never_needs_fewer_replicas(
    low: float, step: float, users: int, ttft_ms: float
) -> None:
    # given one workload asked at two confidences
    high = round(low + step, 2)
    clear_caches()
    # when both are estimated
    at_low = estimate(parse_spec(_spec(low, users, ttft_ms))).document()
    at_high = estimate(parse_spec(_spec(high, users, ttft_ms))).document()
    # then every architecture in both answers runs at least as many replicas at the higher confidence
    lo, hi = _replicas(at_low), _replicas(at_high)
    for arch_id in lo.keys() & hi.keys():
        assert hi[arch_id] >= lo[arch_id], (arch_id, low, high)
    # and the cheapest answer never gets cheaper
    if at_low["architectures"] and at_high["architectures"]:
        assert rank_cost(at_high["architectures"][0]) >= rank_cost(at_low["architectures"][0]) - 1e-6


def test_the_answer_says_it_sized_at_the_requested_confidence() -> None:
    # given a workload that asks for its SLOs to hold at the 80th percentile of the estimator's error
    spec = parse_spec(_spec(0.8))
    # when it is estimated
    result = estimate(spec).document()
    # then the assumptions and every architecture say so, with the factors used, instead of the fixed headroom
    assert result["assumptions"]["confidence"] == 0.8
    assert result["assumptions"]["headroom_reasoning"].startswith("confidence 0.8: every SLO target holds")
    assert result["architectures"]
    for arch in result["architectures"]:
        reasoning = arch["headroom"]["reasoning"]
        assert reasoning.startswith("confidence 0.8: SLO holds at the 80th percentile of the estimator's")
        assert "TTFT x" in reasoning and "TPOT x" in reasoning and "capacity x" in reasoning


def test_without_confidence_the_fixed_headroom_is_stated() -> None:
    # given a workload without slo.confidence
    result = estimate(parse_spec(_spec())).document()
    # then the answer states the fixed load headroom it kept free
    assert result["assumptions"]["headroom_reasoning"] == "fixed 20% load headroom"
    assert all(a["headroom"]["reasoning"] == "fixed 20% load headroom" for a in result["architectures"])
    # and every replica serves 80% of its SLO capacity at most
    for a in result["architectures"]:
        assert a["per_replica"]["rps"] == pytest.approx(0.8 * a["per_replica"]["rps_slo_limit"], rel=1e-3)


def test_the_margin_scales_latencies_by_the_cross_validated_error_at_the_quantile() -> None:
    # given the replica the planner ranks first at confidence 0.8
    from sizing.catalog import load_catalog
    from sizing.perf.config import HardwareConfig
    from sizing.perf.step import StepModel

    spec = parse_spec(_spec(0.8))
    cat = load_catalog()
    step = StepModel.for_config(
        HardwareConfig(model_id="llama-3.1-8b", instance_type="g6e.xlarge", tensor_parallel=1), catalog=cat
    )
    prof = step.profile
    # when its margin is taken
    m = margin(step, spec.slo, 0.2)
    # then TTFT is scaled by measured/predicted at the 20th percentile of predicted/measured (never below 1), the
    # capacity by the 80th percentile of the throughput ratio (never above 1), and e2e by the larger of the two
    ttft = conservative_ratio(prof.family, prof.engine, "ttft", 0.8)
    tpot = conservative_ratio(prof.family, prof.engine, "tpot", 0.8)
    thr = conservative_ratio(prof.family, prof.engine, "throughput", 0.8)
    assert ttft and tpot and thr
    assert m.factor("ttft_ms") == pytest.approx(max(1.0, 1 / ttft), rel=1e-3)
    assert m.factor("tpot_ms") == pytest.approx(max(1.0, 1 / tpot), rel=1e-3)
    assert m.factor("e2e_s") == pytest.approx(max(m.factor("ttft_ms"), m.factor("tpot_ms")))
    assert m.usable == pytest.approx(min(1.0, 1 / thr), rel=1e-3)


@pytest.mark.parametrize("value", [0.3, 1.0, 1.5])
def test_a_confidence_outside_its_range_is_refused_naming_the_field(value: float) -> None:
    # given a confidence below the median or at certainty
    # when the spec is read
    with pytest.raises(InvalidInput) as err:
        parse_spec(_spec(value))
    # then the problem names slo.confidence in plain words
    fields = {p.field: p.message for p in err.value.problems}
    assert "slo.confidence" in fields
    assert "must be at" in fields["slo.confidence"]
