"""A Poisson level as a load generator reads it: the requests sent in one window after a warm-up, from an idle
engine, and the spread one such window is drawn from (`sizing.perf.simulator.simulate_windows`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sizing.base.distributions import TokenDistribution
from sizing.perf.calrows import CalRow
from sizing.perf.config import HardwareConfig
from sizing.perf.fit import predict_row, row_windows
from sizing.perf.simulator import OpenLoop, saturated, simulate, simulate_windows
from sizing.perf.step import Profile, StepModel

PROFILE = Profile(0.5, 0.6, 0.003)
PROMPT, ANSWER = TokenDistribution.fixed(500), TokenDistribution.fixed(100)


@pytest.fixture(scope="module")
def l4() -> StepModel:
    return StepModel.for_config(
        HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g6.xlarge", tp=1), PROFILE
    )


@pytest.fixture(scope="module")
def capacity(l4: StepModel) -> float:
    """Requests a second the replica serves at most (its saturated closed loop)."""
    return saturated(l4, PROMPT, ANSWER, n_requests=400).requests_per_s


def test_a_window_counts_the_requests_sent_in_it_whatever_they_took(l4: StepModel, capacity: float):
    # GIVEN Poisson arrivals at half the replica's capacity, read in a 60-s window after a 10-s warm-up
    rate = capacity / 2
    # WHEN one such window is simulated, with arrivals for the warm-up, the window and its tail
    res = simulate(l4, OpenLoop(rate, (10.0, 60.0)), PROMPT, ANSWER, n_requests=math.ceil(rate * 140), seed=3)
    # THEN it measured about the window's share of the requests (a Poisson count: within 4 standard deviations),
    # not the run's, and its rates are over the window
    sent = res.per_request["ttft_ms"].size
    assert abs(sent - rate * 60) < 4 * math.sqrt(rate * 60)
    assert res.requests_per_s == pytest.approx(sent / 60.0)
    assert res.output_tokens_per_s == pytest.approx(rate * 100, rel=0.25)


def test_a_level_at_saturation_reads_the_queue_its_window_grew_not_minutes_of_it(
    l4: StepModel, capacity: float
):
    # GIVEN arrivals at the replica's capacity, where a queue grows for as long as the load lasts
    # WHEN the level is read in a 20-s window, in a 200-s one, and as the steady run a published row is read in
    short = simulate_windows(l4, capacity, 5.0, 20.0, PROMPT, ANSWER)
    long = simulate_windows(l4, capacity, 5.0, 200.0, PROMPT, ANSWER)
    steady = simulate(l4, OpenLoop(capacity), PROMPT, ANSWER, n_requests=400, seed=0)
    # THEN the short window's first tokens wait less than the long one's, and less than minutes of queue would say
    assert short.pooled.ttft_ms.mean < long.pooled.ttft_ms.mean
    assert short.pooled.ttft_ms.mean < steady.ttft_ms.mean


def test_fewer_requests_in_a_window_draw_its_figures_from_a_wider_spread(l4: StepModel, capacity: float):
    # GIVEN a level at half the replica's capacity
    rate = 0.5 * capacity
    # WHEN it is read in windows of 10 s and of 100 s
    narrow = simulate_windows(l4, rate, 5.0, 100.0, PROMPT, ANSWER)
    wide = simulate_windows(l4, rate, 5.0, 10.0, PROMPT, ANSWER)
    # THEN every figure's windows spread about the level's figure, and the short window's spread is the wider
    for metric in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        lo, hi = wide.band(metric)
        assert lo < hi
        assert (hi - lo) > 1.5 * (narrow.band(metric)[1] - narrow.band(metric)[0])
    lo, hi = wide.band("tpot_ms")
    assert lo <= wide.pooled.tpot_ms.mean <= hi
    # and the windows simulated hold enough requests to settle the level's mean, each window its own draw
    assert wide.means["tpot_ms"].size >= 4
    assert np.unique(wide.means["tpot_ms"]).size == wide.means["tpot_ms"].size


def test_the_same_seed_gives_the_same_windows(l4: StepModel, capacity: float):
    a = simulate_windows(l4, capacity / 2, 5.0, 30.0, PROMPT, ANSWER, seed=4)
    b = simulate_windows(l4, capacity / 2, 5.0, 30.0, PROMPT, ANSWER, seed=4)
    for metric in ("ttft_ms", "tpot_ms", "e2e_s"):
        assert getattr(a.pooled, metric) == getattr(b.pooled, metric)
    assert a.pooled.output_tokens_per_s == b.pooled.output_tokens_per_s
    assert a.band("ttft_ms") == b.band("ttft_ms")


def test_a_bad_window_is_refused(l4: StepModel):
    with pytest.raises(ValueError, match="window"):
        simulate_windows(l4, 1.0, 5.0, 0.0, PROMPT, ANSWER)


def _row(rate: float, window: tuple[float, float] | None) -> CalRow:
    """A Poisson level of this product's load test on one L4 (as `benchmarks/engine.py measure` records one)."""
    return CalRow.model_validate(
        {
            "row_id": "LT-poisson", "source": "test", "study": "test", "engine": "vllm", "accelerator": "l4",
            "tp": 1, "model": "meta-llama/Llama-3.1-8B-Instruct", "quantization": "bf16", "input_tokens": 500,
            "output_tokens": 100, "load": "rate", "load_value": rate, "ttft_ms": 100.0, "tpot_ms": 30.0,
            "output_tokens_per_s": rate * 100, "origin": "loadtest",
            **({"warmup_s": window[0], "window_s": window[1]} if window else {}),
        }
    )  # fmt: skip


def test_a_load_test_row_of_a_poisson_level_is_predicted_as_its_window_read(capacity: float):
    # GIVEN the same Poisson level at the replica's capacity, recorded with its 15-s window and without one
    windowed, steady = _row(capacity, (5.0, 15.0)), _row(capacity, None)
    # WHEN the fit predicts each
    got, was = predict_row(windowed, PROFILE), predict_row(steady, PROFILE)
    windows = row_windows(windowed, PROFILE)
    # THEN the windowed row reads its windows' figures, and its first token waits less than a steady state's queue
    assert windows is not None and row_windows(steady, PROFILE) is None
    assert got["ttft"] == pytest.approx(windows.pooled.ttft_ms.mean)
    assert got["ttft"] < was["ttft"]
