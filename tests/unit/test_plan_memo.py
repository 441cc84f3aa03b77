"""Memoised capacity searches and predictions: a repeated request gets the identical answer without simulating
again, and anything that changes the answer (SLO, token shape, seed, hardware, calibration) is a different key."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from sizing.perf.config import HardwareConfig
from sizing.perf.simulator import bounds
from sizing.perf.step import Profile, StepModel
from sizing.plan import estimate
from sizing.plan.capacity import cache_info, clear_caches, max_rate_under_slo, predict_at
from sizing.plan.memo import LRU, fingerprint
from sizing.workload.derived import WorkloadModel, resolve
from sizing.workload.parse import parse_spec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROFILE = Profile(0.5, 0.6, 0.003, version="test-a")
SPEC: dict[str, Any] = {
    "model": MODEL,
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 700}},
    "slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 60}},
}


def workload(**changes: Any) -> WorkloadModel:
    raw = copy.deepcopy(SPEC)
    raw.update(changes)
    return resolve(parse_spec(raw))


def step_model(profile: Profile = PROFILE, instance: str = "g5.xlarge") -> StepModel:
    return StepModel.for_config(HardwareConfig.create(MODEL, instance, 1), profile)


def saturated_rps(step: StepModel, wm: WorkloadModel) -> float:
    return bounds(step, wm.input_tokens.mean, wm.output_tokens.mean).max_requests_per_s


@pytest.fixture(autouse=True)
def empty_caches() -> None:
    clear_caches()


def test_a_repeated_search_is_answered_from_the_cache_with_the_identical_capacity():
    # given a capacity search done once
    step, wm = step_model(), workload()
    first = max_rate_under_slo(step, wm, saturated_rps(step, wm))
    # when the same search is asked again, with a step model built afresh for the same hardware
    again_step = step_model()
    second = max_rate_under_slo(again_step, wm, saturated_rps(again_step, wm))
    # then the answer is identical and came from the cache
    assert second == first
    assert cache_info()["capacity"]["hits"] == 1
    assert cache_info()["capacity"]["misses"] == 1


def test_the_caller_owns_its_copy_of_a_cached_capacity():
    # given a cached capacity that one caller lowers in place (as a failed verification does)
    step, wm = step_model(), workload()
    first = max_rate_under_slo(step, wm, saturated_rps(step, wm))
    original = first.rate_rps
    first.rate_rps *= 0.85
    # when it is asked for again
    second = max_rate_under_slo(step, wm, saturated_rps(step, wm))
    # then the cached value is untouched
    assert second.rate_rps == original


@pytest.mark.parametrize(
    "changes",
    [
        {"slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 30}}},
        {"slo": {"ttft_ms": {"p95": 3000}, "e2e_s": {"p99": 60}}},
        {"tokens": {"input": {"mean": 900, "p95": 3000}, "output": {"mean": 250, "p95": 700}}},
        {"tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 900}}},
    ],
    ids=["stricter-e2e", "other-percentile", "shorter-prompts", "longer-tail-of-answers"],
)
def test_another_slo_or_token_shape_is_searched_afresh(changes: dict[str, Any]):
    # given a search done for one workload
    step, base = step_model(), workload()
    max_rate_under_slo(step, base, saturated_rps(step, base))
    # when a workload differing in its SLO or token shape is searched
    other = workload(**changes)
    fresh = max_rate_under_slo(step, other, saturated_rps(step, other))
    # then it is a cache miss, and its answer is the one an empty cache gives
    assert cache_info()["capacity"]["hits"] == 0
    clear_caches()
    assert fresh == max_rate_under_slo(step, other, saturated_rps(step, other))


def test_the_user_count_does_not_change_the_key():
    # given a search for a workload at 2 requests/s
    step = step_model()
    small, big = workload(), workload(rate={"peak_rps": 40})
    first = max_rate_under_slo(step, small, saturated_rps(step, small))
    # when the same workload at 40 requests/s is searched
    second = max_rate_under_slo(step, big, saturated_rps(step, big))
    # then the per-replica capacity is reused: it does not depend on the load offered
    assert second == first
    assert cache_info()["capacity"]["hits"] == 1


def test_another_seed_hardware_or_calibration_is_a_different_key():
    step, wm = step_model(), workload()
    max_rate_under_slo(step, wm, saturated_rps(step, wm))
    recalibrated = step_model(dataclasses.replace(PROFILE, bandwidth_eff=0.5, version="test-b"))
    new_version_only = step_model(dataclasses.replace(PROFILE, version="test-b"))
    other_gpu = step_model(instance="g6e.xlarge")
    max_rate_under_slo(step, wm, saturated_rps(step, wm), seed=1)
    for other in (recalibrated, new_version_only, other_gpu):
        max_rate_under_slo(other, wm, saturated_rps(other, wm))
    assert cache_info()["capacity"] == {"hits": 0, "misses": 5, "size": 5, "maxsize": 1024}


def test_fingerprints_tell_calibrations_and_hardware_apart_and_match_rebuilt_models():
    base = fingerprint(step_model())
    assert fingerprint(step_model()) == base
    assert fingerprint(step_model(dataclasses.replace(PROFILE, version="test-b"))) != base
    assert fingerprint(step_model(dataclasses.replace(PROFILE, step_overhead_s=0.004))) != base
    assert fingerprint(step_model(instance="g6e.xlarge")) != base


def test_a_prediction_at_an_operating_point_is_reused_only_at_that_rate():
    step, wm = step_model(), workload()
    a = predict_at(step, wm, 0.3)
    assert predict_at(step, wm, 0.3) is a
    assert predict_at(step, wm, 0.31).e2e_s != a.e2e_s
    assert cache_info()["prediction"]["hits"] == 1


def test_an_estimate_from_warm_caches_is_the_estimate_from_cold_ones():
    # given a small catalog search, estimated with empty caches
    raw = {
        **SPEC,
        "users": {"total": 4000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
        "constraints": {"instance_families": ["g6e", "g5"], "deployments": ["eks"]},
    }
    del raw["rate"]
    spec = parse_spec(raw)
    cold = estimate(spec).document()
    # when the same workload is estimated again (the caches now warm)
    warm = estimate(spec).document()
    # then everything but the timestamps is identical
    for result in (cold, warm):
        result.pop("generated_at")
        result["search"].pop("seconds")
    assert warm == cold
    assert cache_info()["capacity"]["hits"] >= cold["search"]["capacity_searches"]


def test_the_lru_keeps_the_most_recently_used_entries():
    lru: LRU[int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert lru.get("b") is None
    assert lru.get("a") == 1 and lru.get("c") == 3
    assert len(lru) == 2
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        LRU(0)
