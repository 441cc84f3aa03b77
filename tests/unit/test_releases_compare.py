"""How a release is said to compare with a watch's current best: the one line a team reads first."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sizing.releases.compare import compare, short_name
from sizing.results import Architecture, EstimateResult

NEW = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
CURRENT = "meta-llama/Llama-3.1-70B"


def arch(rank: int, d: str, inst: str, usd: float, ok: bool, capacity: str = "on-demand") -> dict[str, Any]:
    """An architecture (deployment, instance, $/month, meets_slo) in the contract's shape."""
    return {
        "rank": rank,
        "id": f"{d}:{inst}:tp4:fp8:vllm:{capacity}",
        "model": CURRENT,
        "deployment": d,
        "instance_type": inst,
        "engine": "vllm",
        "capacity_type": capacity,
        "meets_slo": ok,
        "predicted": {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": {}},
        "cost": {"usd_per_hour_peak": usd / 730.5, "usd_per_month": usd, "usd_per_month_spot": usd * 0.6},
    }


def result(*archs: tuple[str, str, float, bool]) -> EstimateResult:
    """An estimate result with architectures (deployment, instance, $/month, meets_slo)."""
    return EstimateResult(
        workload={},
        architectures=[Architecture.model_validate(arch(i + 1, *a)) for i, a in enumerate(archs)],
    )


def test_a_cheaper_release_is_phrased_as_a_saving_at_the_same_slos() -> None:
    # given
    new = result(("eks", "g6e.12xlarge", 15_425.08, True), ("eks", "p5.48xlarge", 60_000, True))
    current = result(("eks", "g6e.12xlarge", 22_356.0, True))
    # when
    c = compare(NEW, new, CURRENT, current)
    # then
    assert c.verdict == "cheaper" and c.change_pct == -31.0
    assert c.headline.startswith(
        "Llama-4-Scout-17B-16E on g6e.12xlarge: 31% cheaper than your current best at the same SLOs"
    )
    assert "current best: Llama-3.1-70B on g6e.12xlarge, $22,356/month" in c.headline


def test_a_costlier_release_says_so() -> None:
    c = compare(
        NEW,
        result(("eks", "p5.48xlarge", 90_000, True)),
        CURRENT,
        result(("eks", "g6e.12xlarge", 60_000, True)),
    )
    assert c.verdict == "costlier"
    assert "p5.48xlarge: 50% more expensive than your current best at the same SLOs" in c.headline


def test_a_difference_below_half_a_percent_is_about_the_same() -> None:
    c = compare(
        NEW,
        result(("eks", "g6e.12xlarge", 10_020, True)),
        CURRENT,
        result(("eks", "g6e.12xlarge", 10_000, True)),
    )
    assert c.verdict == "same" and "about the same cost as your current best" in c.headline


def test_architectures_missing_the_slos_never_count_as_the_best() -> None:
    # given the cheapest new architecture misses the SLOs
    new = result(("eks", "g6.12xlarge", 5_000, False), ("eks", "g6e.12xlarge", 20_000, True))
    # when
    c = compare(NEW, new, CURRENT, result(("eks", "g6e.12xlarge", 40_000, True)))
    # then
    assert c.new_best is not None and c.new_best.where == "g6e.12xlarge"


def test_a_release_that_cannot_meet_the_slos_says_why() -> None:
    # given
    new = EstimateResult(
        workload={},
        architectures=[],
        infeasible={"message": "best TTFT p95 is 1900 ms on p5.48xlarge TP8 fp8"},
    )
    # when
    c = compare(NEW, new, CURRENT, result(("eks", "g6e.12xlarge", 40_000, True)))
    # then
    assert c.verdict == "infeasible"
    assert (
        c.headline
        == "Llama-4-Scout-17B-16E: no architecture meets your SLOs (best TTFT p95 is 1900 ms on p5.48xlarge TP8 fp8)"
    )


def test_when_the_current_model_meets_nothing_the_release_stands_alone() -> None:
    c = compare(NEW, result(("sagemaker", "g6e.12xlarge", 30_000, True)), CURRENT, None)
    assert c.verdict == "new_only"
    assert c.headline.startswith(
        "Llama-4-Scout-17B-16E on SageMaker ml.g6e.12xlarge: $30,000/month at your SLOs"
    )


def test_spot_capacity_is_compared_at_its_spot_price() -> None:
    new = EstimateResult(
        workload={},
        architectures=[Architecture.model_validate(arch(1, "eks", "g6e.12xlarge", 10_000, True, "spot"))],
    )
    c = compare(NEW, new, CURRENT, result(("eks", "g6e.12xlarge", 12_000, True)))
    assert c.new_best is not None and c.new_best.usd_per_month == 6_000 and c.change_pct == -50.0


def test_short_names_drop_variant_suffixes_only() -> None:
    assert short_name("meta-llama/Llama-4-Scout-17B-16E-Instruct") == "Llama-4-Scout-17B-16E"
    assert short_name("Qwen/Qwen3-235B-A22B") == "Qwen3-235B-A22B"
    assert short_name("google/gemma-2-27b-it") == "gemma-2-27b"
    assert short_name("openai/gpt-oss-120b") == "gpt-oss-120b"


@given(
    new=st.floats(min_value=1, max_value=1e6, allow_nan=False),
    current=st.floats(min_value=1, max_value=1e6, allow_nan=False),
)
def test_the_verdict_always_agrees_with_the_prices(new: float, current: float) -> None:
    # when
    c = compare(
        NEW,
        result(("eks", "g6e.12xlarge", new, True)),
        CURRENT,
        result(("eks", "g6e.12xlarge", current, True)),
    )
    # then cheaper means a lower monthly cost, costlier a higher one
    assert c.new_best is not None and c.current_best is not None
    if c.verdict == "cheaper":
        assert c.new_best.usd_per_month < c.current_best.usd_per_month
    elif c.verdict == "costlier":
        assert c.new_best.usd_per_month > c.current_best.usd_per_month
    else:
        assert c.verdict == "same"
