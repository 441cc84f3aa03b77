"""The step factors fitted to an engine's steps (`sizing.perf.stepfit`)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from sizing.loadtest.metrics import RequestRecord
from sizing.loadtest.steps import EngineStep
from sizing.perf.config import HardwareConfig
from sizing.perf.profile import Profile
from sizing.perf.step import StepModel
from sizing.perf.stepfit import fit_steps, modelled_s, request_overhead

CFG = HardwareConfig.create("meta-llama/Llama-3.2-1B", "c7i.large", 1)
#: what the engine really does
TRUTH = Profile(compute_eff=0.25, bandwidth_eff=0.6, step_overhead_s=0.001, seq_overhead_s=0.001,
                family="xeon-spr", engine="vllm", request_overhead_s=0.015)  # fmt: skip
#: where the fit starts: a level fit that put the per-sequence cost on every step
START = dataclasses.replace(
    TRUTH, compute_eff=0.21, bandwidth_eff=0.68, step_overhead_s=0.016, seq_overhead_s=0.0003
)


def _model(p: Profile) -> StepModel:
    return StepModel.for_config(CFG, p)


def _steps(n: int = 400, seed: int = 3) -> list[EngineStep]:
    """Steps of 1-40 running sequences, one in four with one to three 128- or 512-token prompts, timed by the true
    profile with 3% noise, and 2% of them read 4x (a stalled client)."""
    rng = random.Random(seed)
    sm = _model(TRUTH)
    out = []
    for i in range(n):
        b = rng.randint(1, 40)
        k = rng.choice((0, 0, 0, 1, 2, 3))
        plen = rng.choice((128, 512))
        s = EngineStep(end=float(i), duration_s=1.0, decode_seqs=b, prefills=k, prefill_tokens=k * plen,
                       context_tokens=b * rng.randint(150, 600), spread_s=0.0)  # fmt: skip
        t = modelled_s(sm, s) * rng.gauss(1.0, 0.03) * (4.0 if rng.random() < 0.02 else 1.0)
        out.append(dataclasses.replace(s, duration_s=t))
    return out


def test_the_fit_finds_the_costs_a_level_fit_traded_against_each_other():
    # GIVEN steps an engine ran, and a starting profile that puts 16 ms on every step and 0.3 ms on a sequence
    steps = _steps()
    # WHEN the step factors are fitted to them
    fit = fit_steps(steps, _model, START)
    # THEN the steps are modelled within their noise, where the start was off by far more, with the engine's
    # efficiencies and its cost of a running sequence (a few per cent of a 1B model's 250 ms step: within a third)
    p = fit.profile
    assert fit.mdape_after < 0.03 < fit.mdape_before
    assert fit.median_ratio == pytest.approx(1.0, abs=0.02)
    assert p.compute_eff == pytest.approx(TRUTH.compute_eff, rel=0.1)
    assert p.bandwidth_eff == pytest.approx(TRUTH.bandwidth_eff, rel=0.1)
    assert p.seq_overhead_s == pytest.approx(TRUTH.seq_overhead_s, rel=0.35)
    # and the per-request cost, in no step, is left as it was
    assert p.request_overhead_s == START.request_overhead_s


def test_fitted_on_light_load_the_steps_of_heavy_load_come_out_right():
    # GIVEN only the steps of 1-6 running sequences (a short run at a few streams)
    light = [s for s in _steps(800) if s.decode_seqs <= 6]
    # WHEN fitted, and a decode step of 40 sequences and a step prefilling two 512-token prompts beside 30 are modelled
    p = fit_steps(light, _model, START).profile
    heavy = [
        EngineStep(end=0.0, duration_s=None, decode_seqs=40, prefills=0, prefill_tokens=0, context_tokens=40 * 600,
                   spread_s=0.0),
        EngineStep(end=0.0, duration_s=None, decode_seqs=30, prefills=2, prefill_tokens=1024,
                   context_tokens=30 * 600, spread_s=0.0),
    ]  # fmt: skip
    # THEN they are within 10% of what the engine takes, nearer than the starting profile's 16-18% (a 1B model
    # reads 2.5 GB of weights a step: at 1-6 sequences their cost moves a step by a few percent, as the noise does)
    for s in heavy:
        truth = modelled_s(_model(TRUTH), s)
        fitted, start = (
            abs(modelled_s(_model(p), s) / truth - 1),
            abs(modelled_s(_model(START), s) / truth - 1),
        )
        assert fitted < 0.10 < start


def test_no_efficiency_beyond_the_datasheet_however_fast_the_steps():
    # GIVEN steps four times as fast as the engine's, faster than the datasheet allows their prefills and weights
    fast = [dataclasses.replace(s, duration_s=s.duration_s / 4) for s in _steps()]
    # WHEN fitted
    p = fit_steps(fast, _model, START).profile
    # THEN the efficiencies stop at 1 of the datasheet figures
    assert p.bandwidth_eff <= 1.0 and p.compute_eff <= 1.0


def test_too_few_steps_are_refused_with_the_count():
    # WHEN a fit is asked of 10 steps
    with pytest.raises(ValueError, match="10 timed steps"):
        fit_steps(_steps(10), _model, START)


def test_the_request_cost_is_read_from_first_tokens_at_an_idle_engine():
    # GIVEN requests sent one at a time whose first tokens took 15 ms beyond their prompt's step, and two sent
    # while another was running (their first tokens waited too)
    sm = _model(TRUTH)
    recs = []
    for i in range(5):
        ttft = 0.015 + sm.iteration_time(300, 0, 0.0)
        recs.append(
            RequestRecord(start=10.0 * i, end=10.0 * i + 2, ttft_s=ttft, input_tokens=300, output_tokens=9)
        )
    recs += [RequestRecord(start=10.0 * i + 1, end=10.0 * i + 3, ttft_s=0.9, input_tokens=300, output_tokens=9)
             for i in range(2)]  # fmt: skip
    # WHEN the per-request cost is read
    got = request_overhead(recs, sm)
    # THEN it is the idle arrivals' 15 ms; the two that waited are not counted
    assert got == pytest.approx(0.015, abs=1e-6)


def test_a_start_whose_weights_alone_read_slower_than_the_engines_steps_still_fits():
    # GIVEN a start whose bandwidth makes the weights' read alone take longer than the engine's lightest steps (a
    # reference fitted without the model), and steps of at most 6 running sequences
    slow = dataclasses.replace(START, bandwidth_eff=0.35)
    light = [s for s in _steps(800) if s.decode_seqs <= 6]
    # WHEN fitted
    fit = fit_steps(light, _model, slow)
    # THEN the bandwidth moves to where the steps put it and the steps are modelled within their noise, rather than
    # every other cost driven to nothing
    assert fit.profile.bandwidth_eff == pytest.approx(TRUTH.bandwidth_eff, rel=0.15)
    assert fit.mdape_after < 0.03
    assert fit.profile.seq_overhead_s > 1e-4


#: an EPYC Milan core (no matrix unit): a 1B model's decode of two sequences is as much compute as weight reads
MILAN = HardwareConfig.create("meta-llama/Llama-3.2-1B", "c6a.large", 1)
MILAN_TRUTH = dataclasses.replace(TRUTH, family="epyc-milan", compute_eff=0.09)


def _milan(p: Profile) -> StepModel:
    return StepModel.for_config(MILAN, p)


def _light_run(seed: int = 5) -> list[EngineStep]:
    """What a learning run of one length at one and two streams keeps: ~790 decode steps at batch 1 and 2 whose
    second sequence costs 40% more than the model says (a cost it has no term for), and 8 steps that prefill a
    500-token prompt, timed by the true profile, with 3% noise."""
    rng = random.Random(seed)
    sm = _milan(MILAN_TRUTH)
    out = []
    for i in range(798):
        prefill = i % 100 == 0
        b = 1 if prefill else rng.choice((1, 2))
        s = EngineStep(end=float(i), duration_s=1.0, decode_seqs=b, prefills=int(prefill),
                       prefill_tokens=500 if prefill else 0, context_tokens=b * 600, spread_s=0.0)  # fmt: skip
        extra = 1.4 if b == 2 and not prefill else 1.0
        out.append(dataclasses.replace(s, duration_s=modelled_s(sm, s) * extra * rng.gauss(1.0, 0.03)))
    return out


def test_a_few_prefill_steps_weigh_as_much_as_hundreds_of_decode_steps():
    # GIVEN a light run's steps: hundreds of decode steps whose batch of two the model cannot explain, and 8 prefills
    steps = _light_run()
    # WHEN the step factors are fitted to them, from the Xeon's factors carried over
    p = fit_steps(steps, _milan, dataclasses.replace(START, family="epyc-milan")).profile
    # THEN the prompts' compute efficiency is the engine's, not one bent to explain the decode steps' second
    # sequence: a prompt's prefill, and so a first token, is predicted as the engine runs it
    assert p.compute_eff == pytest.approx(MILAN_TRUTH.compute_eff, rel=0.15)
    sm = _milan(p)
    prefill = next(s for s in steps if s.prefills)
    assert modelled_s(sm, prefill) == pytest.approx(prefill.duration_s, rel=0.1)
