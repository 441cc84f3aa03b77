"""A latency's interval widens as its queue amplifies a step-time error: held-out errors are read per unit of the
amplification their predictions had, and a new prediction's band is that raised to its own
(docs/estimator.md, "Intervals that widen with the queue")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.perf.amplification import (
    MAX_AMPLIFICATION,
    MIN_EXPONENT_ROWS,
    STEP_SCALE,
    amplification,
    error_exponent,
    slower_steps,
)
from sizing.perf.calibration import (
    amplification_exponents,
    cv_ratios,
    interval_for,
    profile_for,
    stated_interval,
)
from sizing.perf.config import HardwareConfig
from sizing.perf.predict import predict
from sizing.perf.step import StepModel


def _row(
    i: int, ratio: float, amp: float | None, metric: str = "tpot", family: str = "hopper"
) -> dict[str, Any]:
    row = {
        "row_id": f"R{i}",
        "family": family,
        "engine": "vllm",
        "metric": metric,
        "measured": 50.0 / ratio,
        "predicted": 50.0,
        "roofline": None,
        "moe": False,
    }
    if amp is not None:
        row["amplification"] = amp
    return row


def _data(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "test",
        "profiles": {"hopper/vllm": {"compute_eff": 0.5, "bandwidth_eff": 0.9, "step_overhead_s": 0.003}},
        "cross_validation_by_harness": {"rows": rows},
    }


def _spread(n: int, low: float, high: float) -> list[float]:
    return [low * (high / low) ** (i / (n - 1)) for i in range(n)]


def _held_out() -> dict[str, Any]:
    """Held-out TPOTs: 20 at low load within 10% (amplification 1), 20 near saturation off by up to 1.1^4 either way
    (amplification 4): one step error of 10%, multiplied four times by the loaded rows' queue."""
    rows = [_row(i, r, 1.0) for i, r in enumerate(_spread(20, 1 / 1.1, 1.1))]
    rows += [_row(100 + i, r, 4.0) for i, r in enumerate(_spread(20, 1.1**-4, 1.1**4))]
    return _data(rows)


def _width(interval: dict[str, Any] | None) -> float:
    assert interval is not None
    return float(interval["high"] / interval["low"])


def test_held_out_errors_are_read_per_unit_of_their_amplification() -> None:
    # given a held-out TPOT predicted at half its measured value by a prediction that amplified its step error 4x
    data = _data([_row(0, 0.5, 4.0), _row(1, 0.5, None)])
    # when the intervals read its ratio per unit of amplification
    per_unit = [r[3] for r in cv_ratios(data, per_unit=True)]
    # then it counts as a step 0.5^(1/4) as fast, and a row stored without an amplification as it was
    assert per_unit == pytest.approx([0.5**0.25, 0.5])
    assert [r[3] for r in cv_ratios(data)] == pytest.approx([0.5, 0.5])


def test_a_queued_tpot_states_a_wider_interval_than_an_unloaded_one_from_the_same_rows() -> None:
    # given held-out TPOTs whose unloaded predictions erred 10% and whose queued ones that 10% amplified 4x
    bands = interval_for("hopper", "vllm", _held_out())
    # when an unloaded TPOT and one amplified 4x are stated, and one with no amplification known
    unloaded = stated_interval(20.0, "tpot", bands, amplification=1.0)
    queued = stated_interval(20.0, "tpot", bands, amplification=4.0)
    every = stated_interval(20.0, "tpot", bands)
    # then the unloaded one is about the 10% its like erred by, narrower than the band of every row (which the
    # queued rows widen), the queued one about that error to the fourth power, wider than every row's; each says
    # the amplification it read
    assert unloaded is not None and queued is not None and every is not None
    assert _width(unloaded) < 1.35 < _width(every) < _width(queued)
    assert queued["ratio_p10_p90"] == pytest.approx([x**4 for x in unloaded["ratio_p10_p90"]], rel=0.01)
    assert (unloaded["amplification"], queued["amplification"]) == (1.0, 4.0)
    assert queued["amplification_exponent"] == 1.0
    assert "amplification" not in every


@settings(max_examples=60, deadline=None)
@given(
    st.floats(min_value=0.01, max_value=1e5),
    st.floats(min_value=1.0, max_value=MAX_AMPLIFICATION),
    st.sampled_from(["ttft", "tpot"]),
)
def test_an_amplified_interval_always_contains_the_prediction(value: float, amp: float, metric: str) -> None:
    # given bands from held-out rows that were all predicted too fast (a band below 1)
    rows = [_row(i, r, 3.0, metric) for i, r in enumerate(_spread(20, 0.5, 0.9))]
    bands = interval_for("hopper", "vllm", _data(rows))
    # when any latency is stated at any amplification
    out = stated_interval(value, metric, bands, amplification=amp)
    # then its interval holds the prediction itself, as it is stated (to 4 places below 10, else to 1)
    assert out is not None
    shown = round(value, 4 if value < 10 else 1)
    assert out["low"] <= shown <= out["high"]


def test_amplification_is_the_latencys_elasticity_to_the_step_bounded_below_by_one_and_above_by_the_cap() -> (
    None
):
    # given latencies predicted with every step 10% slower
    # then one that slowed 10% passes the error through (1), one that slowed 21% doubles it, one that barely moved
    # or sped up counts as 1, and one that ran away stops at the cap
    assert amplification(100.0, 100.0 * STEP_SCALE) == pytest.approx(1.0)
    assert amplification(100.0, 100.0 * STEP_SCALE**2) == pytest.approx(2.0)
    assert amplification(100.0, 101.0) == 1.0
    assert amplification(100.0, 90.0) == 1.0
    assert amplification(100.0, 1e6) == MAX_AMPLIFICATION
    assert amplification(0.0, 5.0) == 1.0


def test_slower_steps_makes_every_step_of_every_shape_that_much_slower() -> None:
    # given an 8B model's step model on one L40S with the shipped profile
    cfg = HardwareConfig.create("llama-3.1-8b", "g6e.xlarge", 1, "bf16", "vllm", max_model_len=4096)
    base = StepModel.for_config(cfg, profile_for("l40s", "vllm"))
    slow = StepModel.for_config(cfg, slower_steps(base.profile))
    # when steps of every kind are timed: one prefill, a decode batch, a mixed step
    for prefill, decodes, context in ((2000, 0, 0), (0, 64, 64 * 1500), (512, 32, 32 * 800), (0, 1, 100)):
        # then each takes STEP_SCALE times as long
        ratio = slow.iteration_time(prefill, decodes, context) / base.iteration_time(
            prefill, decodes, context
        )
        assert ratio == pytest.approx(STEP_SCALE, rel=1e-9)


def test_sizing_predict_widens_the_tpot_interval_of_a_loaded_replica() -> None:
    # given one L40S serving an 8B model under Poisson arrivals
    def tpot_interval(rate: float) -> dict[str, Any]:
        out = predict("llama-3.1-8b", "g6e.xlarge", input_tokens=1000, output_tokens=200, rate=rate)
        interval: dict[str, Any] = out["intervals"]["tpot_ms"]
        return interval

    # when it is predicted at a light rate and at about half the rate it saturates at (7-8 requests a second)
    light, loaded = tpot_interval(0.5), tpot_interval(4.0)
    # then the light one passes a step error through, the loaded one multiplies it, and its interval is the wider
    assert light["amplification"] < 1.3 < loaded["amplification"]
    assert _width(loaded) > _width(light)


def test_an_error_that_does_not_grow_with_the_queue_is_not_multiplied_by_it() -> None:
    # given held-out TTFTs whose queued rows (amplification 4) erred no more than the unloaded ones: a fixed cost's
    # error, not the step's
    rows = [_row(i, r, 1.0, "ttft") for i, r in enumerate(_spread(20, 0.8, 1.25))]
    rows += [_row(100 + i, r, 4.0, "ttft") for i, r in enumerate(_spread(20, 0.8, 1.25))]
    bands = interval_for("hopper", "vllm", _data(rows))
    # when a TTFT amplified 4x is stated
    queued = stated_interval(500.0, "ttft", bands, amplification=4.0)
    # then its error is read as not growing with the queue (exponent 0), and its interval is the rows' own band
    assert queued is not None and queued["amplification_exponent"] == 0.0
    assert queued["ratio_p10_p90"] == pytest.approx(bands["ttft"]["ratio"], rel=0.01)


def test_the_exponent_is_how_the_median_error_grows_with_the_amplification() -> None:
    # given unloaded rows off by 10% and rows amplified 4x off by 10% x 4, x 2, x 1
    lo = [(1.0, r) for r in _spread(MIN_EXPONENT_ROWS, 1 / 1.1, 1.1)]

    def hi(times: float) -> list[tuple[float, float]]:
        return [(4.0, r) for r in _spread(MIN_EXPONENT_ROWS, 1.1**-times, 1.1**times)]

    # then the error grows as amplification^1, ^0.5 and ^0; with too few amplified rows nothing is said
    assert error_exponent(lo + hi(4)) == pytest.approx(1.0)
    assert error_exponent(lo + hi(2)) == pytest.approx(0.5)
    assert error_exponent(lo + hi(1)) == pytest.approx(0.0)
    assert error_exponent(lo + hi(4)[: MIN_EXPONENT_ROWS - 1]) is None


def test_a_kind_without_amplified_rows_reads_how_the_other_kinds_errors_grow() -> None:
    # given CPU TPOTs whose error grows with amplification (as ^1) and GPU TPOTs all unloaded
    rows = [_row(i, r, 1.0, family="xeon-spr") for i, r in enumerate(_spread(10, 1 / 1.1, 1.1))]
    rows += [_row(100 + i, r, 4.0, family="xeon-spr") for i, r in enumerate(_spread(10, 1.1**-4, 1.1**4))]
    rows += [_row(200 + i, r, 1.0) for i, r in enumerate(_spread(20, 0.9, 1.1))]
    # when each kind's exponent is read
    exponents = amplification_exponents(_data(rows))
    # then the GPU's TPOT, never seen amplified, takes the CPU's (its error as the step's, multiplied)
    assert exponents[("cpu", "tpot")] == pytest.approx(1.0)
    assert exponents[("gpu", "tpot")] == pytest.approx(1.0)


def test_sizing_predicts_text_says_when_the_queue_multiplies_a_step_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sizing.cli import main

    # given one L40S serving an 8B model under Poisson arrivals, light and at about half its capacity
    def tpot_line(rate: str) -> str:
        argv = ["predict", "--model", "llama-3.1-8b", "--instance", "g6e.xlarge", "--input-tokens", "1000",
                "--output-tokens", "200", "--rate", rate]  # fmt: skip
        assert main(argv) == 0
        return next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("tpot:"))

    # when each is predicted in text, then the loaded one's TPOT interval says the queue multiplies a step error,
    # and by how much; the light one's says nothing of it
    said = re.search(r"a step error multiplied x([0-9.]+) by the queue", tpot_line("4"))
    assert said is not None and float(said.group(1)) >= 1.5
    assert "by the queue" not in tpot_line("0.5")
