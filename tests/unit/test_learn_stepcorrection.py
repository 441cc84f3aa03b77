"""The refit's step correction: the step time's factors fitted to a real server's own steps
(`sizing.learn.stepcorrection`), stored in a profile version and read by the next estimate."""

from __future__ import annotations

import dataclasses
import random

import pytest

from sizing.catalog import load_catalog
from sizing.learn import profiles
from sizing.learn.levels import LevelSteps
from sizing.learn.profiles import CorruptProfile, configured_store
from sizing.learn.stepcorrection import fit, reference_profile
from sizing.loadtest.steps import EngineStep
from sizing.loadtest.stepsample import StepsSample
from sizing.perf.calibration import profile_for
from sizing.perf.config import HardwareConfig
from sizing.perf.profile import STEP_CORRECTION_FACTORS
from sizing.perf.step import StepModel
from sizing.perf.stepfit import MIN_STEPS, modelled_s

MODEL = "meta-llama/Llama-3.2-1B"
KEY = f"xeon-spr/vllm/{MODEL}"


def _truth():
    """What the server really does: the reference profile's compute, half its weights' read rate left, a cost per
    running sequence three times the reference's, and its own per-request cost."""
    ref = reference_profile("xeon-spr", "vllm")
    return dataclasses.replace(
        ref,
        bandwidth_eff=ref.bandwidth_eff * 0.8,
        step_overhead_s=0.004,
        seq_overhead_s=max(ref.seq_overhead_s, 1e-4) * 3,
        request_overhead_s=0.02,
    )


def _level(instance: str, n: int, steps: int, seed: int) -> LevelSteps:
    """A level's steps sample on `instance`, timed by the true profile with 3% noise: 1-40 running sequences, one
    step in four finishing a 128- or 512-token prompt; and eight first tokens at an idle engine."""
    rng = random.Random(seed)
    cfg = HardwareConfig.create(MODEL, instance, 1)
    sm = StepModel.for_config(cfg, _truth())
    rows = []
    for _ in range(steps):
        b = rng.randint(1, 40)
        k = rng.choice((0, 0, 0, 1))
        tokens = k * rng.choice((128, 512))
        s = EngineStep(end=0.0, duration_s=1.0, decode_seqs=b, prefills=k, prefill_tokens=tokens,
                       context_tokens=b * rng.randint(150, 600), spread_s=0.0)  # fmt: skip
        rows.append(
            (round(modelled_s(sm, s) * rng.gauss(1.0, 0.03) * 1e3, 3), b, k, tokens, s.context_tokens)
        )
    idle = [((_truth().request_overhead_s + sm.iteration_time(p, 0, 0.0)) * 1e3, p) for p in (100, 300) * 4]
    return LevelSteps(
        run_id="r1", candidate_id="c1", n=n, phase="levels", concurrency=n + 1, model=MODEL, family="xeon-spr",
        accelerator="xeon-spr", instance_type=instance, tensor_parallel=1, quantization="bf16", engine="vllm",
        sample=StepsSample(rebuilt=steps, timed=steps, steps=rows, idle_first_tokens=idle),
    )  # fmt: skip


def test_the_step_factors_and_the_request_cost_come_back_from_two_instance_sizes_steps():
    # GIVEN a server's steps on c7i.large and c7i.xlarge, as two runs' levels kept them
    items = [_level("c7i.large", 0, 150, 1), _level("c7i.xlarge", 1, 150, 2)]
    # WHEN the refit fits the model's step correction to them from the reference profile
    got = fit(items, load_catalog())
    # THEN one set of factors models both sizes' steps within their noise, and reads the server's per-request cost
    assert got is not None and got.steps == 300 and got.levels == 2
    assert got.mdape_after < 0.03 < got.mdape_before
    truth = _truth()
    assert got.factors["request_overhead_s"] == pytest.approx(truth.request_overhead_s, rel=0.1)
    # and a step of 32 sequences, which neither factor alone fixes, is the server's within 5%
    heavy = EngineStep(end=0.0, duration_s=None, decode_seqs=32, prefills=0, prefill_tokens=0,
                       context_tokens=32 * 400, spread_s=0.0)  # fmt: skip
    cfg = HardwareConfig.create(MODEL, "c7i.large", 1)
    fitted = reference_profile("xeon-spr", "vllm").with_step_factors(got.factors)
    want = modelled_s(StepModel.for_config(cfg, truth), heavy)
    assert modelled_s(StepModel.for_config(cfg, fitted), heavy) == pytest.approx(want, rel=0.05)
    assert all(fitted.__getattribute__(f) <= 1 for f in ("compute_eff", "bandwidth_eff"))


def test_too_few_steps_are_no_step_correction():
    # GIVEN one level that kept fewer timed steps than a fit needs
    items = [_level("c7i.large", 0, MIN_STEPS - 1, 3)]
    # WHEN the refit tries to fit
    # THEN there is no step correction (the stretch stays the model's correction)
    assert fit(items, load_catalog()) is None


@pytest.fixture
def folder(profile_folder):
    return profile_folder


def _adopt(store, name: str, steps: dict) -> None:
    store.ensure_bucket()
    pointer, etag = store.read_pointer()
    store.write_version(
        {
            "version": name,
            "status": "adopted",
            "corrections": {
                KEY: {"prefill_scale": 1.0, "decode_scale": 1.0, "steps": steps, "levels": 3, "runs": 1}
            },
            "measured": [],
        }
    )
    store.adopt(name, etag, pointer, "team error improves")
    profiles.invalidate()


def test_the_next_estimate_of_that_model_runs_on_the_adopted_step_factors(folder):
    # GIVEN an adopted step correction for a 1B model on Sapphire Rapids
    factors = {"compute_eff": 0.3, "bandwidth_eff": 0.5, "step_overhead_s": 0.004, "seq_overhead_s": 0.001,
               "request_overhead_s": 0.02, "timed_steps": 900, "step_levels": 5}  # fmt: skip
    store = configured_store()
    assert store is not None
    _adopt(store, "v1", factors)
    # WHEN the estimator asks for the profile of that model, and of another model, on that hardware
    mine = profile_for("xeon-spr", "vllm", model=MODEL)
    other = profile_for("xeon-spr", "vllm", model="meta-llama/Llama-3.1-8B")
    # THEN the model's profile has the fitted factors and says so; another model keeps the reference's
    for f in STEP_CORRECTION_FACTORS:
        assert getattr(mine, f) == pytest.approx(factors[f])
    assert "team step correction" in mine.basis and "900 engine steps of 5" in mine.basis
    assert "+team.v1" in mine.version
    assert other.bandwidth_eff == reference_profile("xeon-spr", "vllm").bandwidth_eff


def test_a_stored_step_correction_beyond_the_datasheet_is_refused_naming_it(folder):
    # GIVEN a version whose step correction reads the memory at 1.2 of its datasheet bandwidth
    store = configured_store()
    assert store is not None
    bad = {f: 0.01 for f in STEP_CORRECTION_FACTORS} | {"compute_eff": 0.3, "bandwidth_eff": 1.2}
    store.ensure_bucket()
    store.write_version(
        {"version": "v9", "corrections": {KEY: {"prefill_scale": 1.0, "decode_scale": 1.0, "steps": bad}}}
    )
    # WHEN it is read
    # THEN it is refused as not a valid profile, naming the correction and the factor
    with pytest.raises(CorruptProfile, match=r"steps\.bandwidth_eff is not a share of the datasheet figure"):
        store.read_version("v9")
