"""The stated TTFT interval by regime: a TTFT that is mostly the prompt's own prefill states the error of such TTFTs,
one that is mostly waiting (queueing, per-request cost) the error of those; `slo.confidence` sizes against the same
bands."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.catalog import load_catalog
from sizing.perf.calibration import (
    MIN_REGIME_ROWS,
    REGIME_BANDS,
    TTFT_REGIMES,
    conservative_ratio,
    interval_for,
    stated_interval,
    ttft_regime,
)
from sizing.perf.config import HardwareConfig
from sizing.perf.predict import predict
from sizing.perf.step import StepModel
from sizing.plan.margin import margin
from sizing.plan.regime import ttft_factor_at
from sizing.workload.derived import resolve
from sizing.workload.parse import parse_spec

#: the plain roofline's prefill of every test row (ms) and the compute efficiency of the test profile: a row's share
#: of prefill is 50 / (0.5 x predicted), so a predicted TTFT of 100 ms is all prefill and one of 2,000 ms 5% of it
ROOF_MS = 50.0
EFF = 0.5


def _row(i: int, predicted_ms: float, ratio: float, roofline: float | None = ROOF_MS) -> dict[str, Any]:
    return {
        "row_id": f"R{i}",
        "family": "hopper",
        "engine": "vllm",
        "metric": "ttft",
        "measured": predicted_ms / ratio,
        "predicted": predicted_ms,
        "roofline": roofline,
        "moe": False,
    }


def _data(rows: list[dict[str, Any]]) -> dict[str, Any]:
    profile = {"compute_eff": EFF, "bandwidth_eff": 0.9, "step_overhead_s": 0.003}
    return {
        "version": "test",
        "profiles": {"hopper/vllm": profile},
        "cross_validation_by_harness": {"rows": rows},
    }


def _spread(n: int, low: float, high: float) -> list[float]:
    """`n` ratios evenly from `low` to `high` (log scale)."""
    return [low * (high / low) ** (i / (n - 1)) for i in range(n)]


def _regimes(prefill: int, mixed: int, wait: int) -> dict[str, Any]:
    """Held-out TTFTs: `prefill` all-prefill rows predicted within 10%, `mixed` half-waiting rows off by up to 2x either
    way, `wait` rows that are 95% waiting, off by up to 1.5x."""
    rows = [_row(i, 100.0, r) for i, r in enumerate(_spread(prefill, 0.9, 1.1))]
    rows += [_row(100 + i, 400.0, r) for i, r in enumerate(_spread(mixed, 0.5, 2.0))]
    rows += [_row(200 + i, 2000.0, r) for i, r in enumerate(_spread(wait, 0.67, 1.5))]
    return _data(rows)


def _width(interval: dict[str, Any]) -> float:
    return float(interval["high"] / interval["low"])


def test_a_ttft_mostly_waiting_states_a_wider_interval_than_one_mostly_its_own_prefill() -> None:
    # given held-out TTFTs whose prefill-bound rows were predicted within 10% and whose half-waiting rows within 2x
    bands = interval_for("hopper", "vllm", _regimes(20, 20, 20))
    # when an unloaded TTFT (90% its own prefill) and a loaded one (30%) are stated
    unloaded = stated_interval(100.0, "ttft", bands, prefill_share=0.9)
    loaded = stated_interval(300.0, "ttft", bands, prefill_share=0.3)
    # then each states its regime's band and says so, and the loaded one is the wider
    assert unloaded is not None and loaded is not None
    assert (unloaded["regime"], loaded["regime"]) == ("prefill-bound", "mixed")
    assert unloaded["basis"].endswith("prefill-bound TTFTs") and loaded["basis"].endswith("mixed TTFTs")
    assert unloaded["rows"] == loaded["rows"] == 20
    assert _width(loaded) > 3 * _width(unloaded)
    # and the unloaded one is narrower than the band of every regime, which the old interval stated
    assert _width(unloaded) < _width(stated_interval(100.0, "ttft", bands) or {})


def test_a_waiting_ttft_is_never_stated_less_likely_to_run_slower_than_predicted_than_any_ttft() -> None:
    # given held-out TTFTs whose prefill-bound rows were off by up to 2x either way and whose deeply queued rows were
    # predicted within 10%
    rows = [_row(i, 100.0, r) for i, r in enumerate(_spread(20, 0.5, 2.0))]
    rows += [_row(200 + i, 2000.0, r) for i, r in enumerate(_spread(20, 0.9, 1.1))]
    bands = interval_for("hopper", "vllm", _data(rows))
    # when a deeply queued TTFT is stated
    out = stated_interval(2000.0, "ttft", bands, prefill_share=0.02)
    # then its fast end is its own rows' (no measurement came in much faster), but its slow end reaches as far as
    # the band of every TTFT (fresh sources measured loaded TTFTs slower than predicted), and it says so
    assert out is not None and out["regime"] == "wait-bound"
    every = bands["ttft"]["ratio"]
    assert out["ratio_p10_p90"][0] == round(every[0], 3)
    assert out["ratio_p10_p90"][1] < 1.2 < every[1]
    assert "slow end as far as every TTFT's" in out["basis"]
    # and slo.confidence reads the same slow side
    assert conservative_ratio(
        "hopper", "vllm", "ttft", 0.9, _data(rows), regime="wait-bound"
    ) == pytest.approx(every[0])


def test_a_regime_with_too_few_rows_states_the_band_of_every_regime_and_says_why() -> None:
    # given held-out TTFTs with enough prefill-bound and mixed rows but too few that are mostly waiting
    few = MIN_REGIME_ROWS - 1
    bands = interval_for("hopper", "vllm", _regimes(20, 20, few))
    # when a deeply queued TTFT (2% prefill) is stated
    out = stated_interval(5000.0, "ttft", bands, prefill_share=0.02)
    # then it rests on every held-out TTFT, as the interval without regimes does, and names the shortfall
    assert out is not None
    assert out["regime"] == "wait-bound"
    assert out["rows"] == 40 + few
    assert out["ratio_p10_p90"] == [round(x, 3) for x in bands["ttft"]["ratio"]]
    assert f"only {few} wait-bound rows" in out["basis"]


def test_held_out_rows_without_a_roofline_state_todays_band_for_every_ttft() -> None:
    # given a profile written before its held-out rows stored the roofline
    data = _regimes(20, 20, 20)
    for row in data["cross_validation_by_harness"]["rows"]:
        row["roofline"] = None
    bands = interval_for("hopper", "vllm", data)
    # when a prefill-bound TTFT is stated
    out = stated_interval(100.0, "ttft", bands, prefill_share=0.9)
    # then it states the band of every held-out TTFT, none of which had a regime
    assert out is not None
    assert out["rows"] == 60
    assert out["ratio_p10_p90"] == [round(x, 3) for x in bands["ttft"]["ratio"]]
    assert "only 0 prefill-bound rows" in out["basis"]


@settings(max_examples=200, deadline=None)
@given(
    pred=st.floats(min_value=1e-2, max_value=1e6),
    share=st.one_of(st.none(), st.floats(min_value=1e-4, max_value=2.0)),
)
def test_a_ttft_interval_by_regime_always_contains_the_point_prediction(
    pred: float, share: float | None
) -> None:
    # given bands by regime that are all optimistic or all pessimistic (neither contains a ratio of 1)
    bands = interval_for("hopper", "vllm", _regimes(20, 20, 20))
    bands[REGIME_BANDS]["prefill-bound"]["ratio"] = [1.5, 3.0]
    bands[REGIME_BANDS]["wait-bound"]["ratio"] = [0.2, 0.5]
    # when a TTFT of any size and share of prefill is stated
    out = stated_interval(pred, "ttft", bands, prefill_share=share)
    # then the interval contains the prediction
    assert out is not None
    assert out["low"] <= round(pred, 4 if pred < 10 else 1) <= out["high"]


def test_slo_confidence_reads_the_same_rows_as_the_stated_interval_of_the_regime() -> None:
    # given held-out TTFTs by regime
    data = _regimes(20, 20, 20)
    bands = interval_for("hopper", "vllm", data)
    # when the ratio at 90% confidence is read for a mixed TTFT
    ratio = conservative_ratio("hopper", "vllm", "ttft", 0.9, data, regime="mixed")
    # then it is the mixed band's low end (its 10th percentile, widened alike)
    assert ratio == pytest.approx(bands[REGIME_BANDS]["mixed"]["ratio"][0])


@settings(max_examples=300, deadline=None)
@given(
    limits=st.lists(st.floats(min_value=1.0, max_value=1e5), min_size=2, max_size=2),
    prefill=st.floats(min_value=0.5, max_value=2000.0),
    eff=st.floats(min_value=0.1, max_value=1.0),
    factors=st.lists(st.floats(min_value=1.0, max_value=5.0), min_size=3, max_size=3),
)
def test_a_looser_ttft_limit_never_leaves_less_room_after_the_regimes_factor(
    limits: list[float], prefill: float, eff: float, factors: list[float]
) -> None:
    # given two TTFT limits, a prompt's roofline prefill and any factors by regime
    strict, loose = sorted(limits)
    # when each limit's factor is read by the regime of a TTFT at that limit
    f_strict, _ = ttft_factor_at(strict, prefill, eff, factors)
    f_loose, regime = ttft_factor_at(loose, prefill, eff, factors)
    # then the looser limit, scaled, is never stricter (so a looser SLO never needs more replicas), no factor exceeds
    # its regime's, and none goes below the lightest regime that applied
    assert loose / f_loose >= strict / f_strict * (1 - 1e-9)
    assert f_loose <= factors[[n for n, _ in TTFT_REGIMES].index(regime)] + 1e-9
    assert f_loose >= 1.0


def test_the_regime_of_a_ttft_at_its_limit_picks_its_factor() -> None:
    # given a 50 ms roofline prefill at 50% efficiency (100 ms of prefill) and factors 1.1, 2.0 and 1.5 by regime
    factors = [1.1, 2.0, 1.5]
    # when limits of 150 ms (2/3 prefill), 5 s (2%) and 250 ms (just past the prefill-bound threshold, 200 ms) are read
    at_150, r150 = ttft_factor_at(150.0, 50.0, 0.5, factors)
    at_5s, r5s = ttft_factor_at(5000.0, 50.0, 0.5, factors)
    at_250, r250 = ttft_factor_at(250.0, 50.0, 0.5, factors)
    # then a prefill-bound limit takes its factor; one mostly waiting takes its own; and just past the prefill-bound
    # threshold (200 ms) the mixed factor is reached gradually: 250 ms is allowed no less than 200 ms was
    assert (r150, at_150) == ("prefill-bound", 1.1)
    assert (r5s, at_5s) == ("wait-bound", 1.5)
    assert r250 == "mixed"
    assert 250.0 / at_250 == pytest.approx(200.0 / 1.1)
    assert ttft_regime(0.02) == "wait-bound"


def test_sizing_predict_states_the_ttft_regime_and_a_queued_ttft_is_not_prefill_bound() -> None:
    # given one GPU replica of an 8B model with 2,000-token prompts
    def ttft_interval(concurrency: int) -> dict[str, Any]:
        out = predict("meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", input_tokens=2000, output_tokens=200,
                      concurrency=concurrency)  # fmt: skip
        interval: dict[str, Any] = out["intervals"]["ttft_ms"]
        return interval

    # when one user and 512 users are predicted with the shipped profile
    alone, queued = ttft_interval(1), ttft_interval(512)
    # then one user's TTFT is mostly its own prefill, and 512 users' is mostly waiting; each interval says which
    # regime and share of prefill it read, and rests on that regime's held-out rows
    assert alone["regime"] == "prefill-bound" and alone["prefill_share"] >= 0.5
    assert queued["regime"] == "wait-bound" and queued["prefill_share"] < 0.1
    assert "prefill-bound TTFTs" in alone["basis"]
    assert alone["low"] <= alone["high"]
    assert {"of", "low", "high", "ratio_p10_p90", "rows", "basis"} <= alone.keys()


#: An 8B chat workload whose TTFT limit (20 s) only a deep queue reaches, sized at the 80th percentile of the error.
GENEROUS_TTFT: dict[str, Any] = {
    "name": "chat-8b",
    "model": "llama-3.1-8b",
    "users": {"total": 4000, "peak_active_fraction": 0.1, "requests_per_active_hour": 30},
    "tokens": {"input": {"mean": 1000, "p95": 2500}, "output": {"mean": 200, "p95": 500}},
    "slo": {"ttft_ms": {"p95": 20000}, "tpot_ms": {"p95": 80}, "confidence": 0.8},
}


def test_slo_confidence_scales_a_generous_ttft_limit_by_the_error_of_ttfts_mostly_waiting() -> None:
    # given an 8B chat replica on one L40S and a TTFT limit of 20 s, which only a deep queue reaches
    wm = resolve(parse_spec(GENEROUS_TTFT))
    cat = load_catalog()
    step = StepModel.for_config(
        HardwareConfig(model_id="llama-3.1-8b", instance_type="g6e.xlarge", tensor_parallel=1), catalog=cat
    )
    prof = step.profile
    # when its margin is taken with the workload, and without it
    with_regime = margin(step, wm.slo, 0.2, wm)
    pooled = margin(step, wm.slo, 0.2)
    # then TTFT is scaled by the wait-bound TTFTs' error per unit of amplification at the quantile, the reasoning
    # says so, and without the workload by every TTFT's error
    wait = conservative_ratio(prof.family, prof.engine, "ttft", 0.8, regime="wait-bound", per_unit=True)
    every = conservative_ratio(prof.family, prof.engine, "ttft", 0.8, per_unit=True)
    assert wait and every
    assert with_regime.factor("ttft_ms") == pytest.approx(max(1.0, 1 / wait), rel=1e-3)
    assert pooled.factor("ttft_ms") == pytest.approx(max(1.0, 1 / every), rel=1e-3)
    assert "from wait-bound TTFTs' error" in with_regime.reasoning
    assert with_regime.factor("e2e_s") == pytest.approx(
        max(with_regime.factor("ttft_ms"), with_regime.factor("tpot_ms"))
    )


def test_a_replica_of_a_catalog_other_than_the_shipped_one_reads_its_ttft_regime_from_that_catalog() -> None:
    # given a catalog with a model the shipped one lacks (an 8B model under another name), and a replica of it
    from sizing.catalog.models import Catalog

    real = load_catalog()
    own = Catalog(
        list(real.accelerators.values()),
        list(real.instances.values()),
        [*real.models.values(), real.model("llama-3.1-8b").model_copy(update={"id": "team/chat-8b"})],
        real.managed,
    )
    step = StepModel.for_config(
        HardwareConfig(model_id="team/chat-8b", instance_type="g6e.xlarge", tensor_parallel=1), catalog=own
    )
    wm = resolve(parse_spec(GENEROUS_TTFT))
    # when its margin is taken with the workload
    m = margin(step, wm.slo, 0.2, wm)
    # then TTFT's factor is read by its regime, the roofline prefill read from the replica's own catalog
    assert "from wait-bound TTFTs' error" in m.reasoning
