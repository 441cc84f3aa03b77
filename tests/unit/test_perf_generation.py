"""Engine generations: a family measured only with vLLM V0 gets the current vLLM's profile from the overhead
change the families measured with both generations show."""

from __future__ import annotations

import math

import pytest

from sizing.perf.calibration import profile_for
from sizing.perf.fit import _current_generation, generation_step


def _entry(step: float, seq: float, rows: int, compute: float = 0.5, bandwidth: float = 0.8) -> dict:
    return {
        "compute_eff": compute,
        "bandwidth_eff": bandwidth,
        "step_overhead_s": step,
        "seq_overhead_s": seq,
        "request_overhead_s": 0.02,
        "moe_eff": 1.0,
        "rows": rows,
        "basis": "test",
    }


def _profiles() -> dict[str, dict]:
    # hopper and l4 were measured with both generations: V1 took a half and a quarter of V0's step overhead off
    return {
        "hopper/*": _entry(0.003, 4e-5, 11),
        "hopper/vllm": _entry(0.002, 2e-5, 2),
        "hopper/vllm@v0": _entry(0.004, 4e-5, 9),
        "l4/*": _entry(0.002, 4e-5, 7),
        "l4/vllm": _entry(0.0015, 4e-5, 6),
        "l4/vllm@v0": _entry(0.002, 4e-5, 1),
        # a10g only with V0 (and another engine)
        "a10g/*": _entry(0.003, 3e-5, 20, compute=0.7),
        "a10g/vllm@v0": _entry(0.0032, 3e-5, 12, compute=0.8, bandwidth=0.86),
        "a10g/tgi": _entry(0.0037, 3e-5, 8),
    }


def test_a_family_measured_only_with_v0_gets_the_current_vllm_from_the_others_generation_step():
    profiles = _profiles()
    # WHEN the current generation is derived
    _current_generation(profiles)
    # THEN the A10G vLLM profile is its V0 fit with the step overhead moved by the geometric mean of the others'
    # generation steps (x0.5 on hopper, x0.75 on l4), and the per-sequence overhead by theirs (x0.5, x1)
    a10g = profiles["a10g/vllm"]
    assert a10g["step_overhead_s"] == pytest.approx(0.0032 * math.sqrt(0.5 * 0.75), rel=1e-3)
    assert a10g["seq_overhead_s"] == pytest.approx(3e-5 * math.sqrt(0.5), rel=1e-2)
    # AND the efficiencies (kernels) stay those of its own rows, and the entry says it has none of its own
    assert (a10g["compute_eff"], a10g["bandwidth_eff"]) == (0.8, 0.86)
    assert a10g["rows"] == 0
    assert "a10g x vllm@v0 moved to the current vllm" in a10g["basis"]
    assert "hopper, l4" in a10g["basis"]
    # AND the product's vLLM prediction on A10G uses it, not the family pooled over engines
    a10g["expected_error"] = {"tpot": 0.2}  # as `sizing calibrate` gives every entry its family's error
    prof = profile_for("a10g", "vllm", {"version": "t", "profiles": profiles})
    assert prof.step_overhead_s == pytest.approx(a10g["step_overhead_s"])
    assert prof.basis == a10g["basis"]
    # AND, as no row measured it, the error it states is wider than the family's
    assert prof.expected_error["tpot"] > 0.2
    # AND families fitted on their own current-generation rows are left as fitted
    assert profiles["hopper/vllm"]["step_overhead_s"] == 0.002


def test_the_derived_profile_follows_a_refit_and_needs_families_with_both_generations():
    profiles = _profiles()
    _current_generation(profiles)
    # GIVEN a refit in which hopper's current-generation rows are gone (e.g. held out in cross-validation)
    del profiles["hopper/vllm"]
    _current_generation(profiles)
    # THEN the step comes from l4 alone, and hopper itself is now derived from its V0 fit
    assert generation_step(profiles, "vllm")[1] == ["l4"]
    assert profiles["a10g/vllm"]["step_overhead_s"] == pytest.approx(0.0032 * 0.75, rel=1e-3)
    assert profiles["hopper/vllm"]["rows"] == 0
    # AND with no family measured in both generations, each family's earlier-generation fit stands in unchanged
    # and says so (TGI: every TGI row is 2.x, the product deploys TGI 3)
    del profiles["l4/vllm"]
    _current_generation(profiles)
    assert generation_step(profiles, "vllm")[1] == []
    a10g = profiles["a10g/vllm"]
    assert a10g["step_overhead_s"] == pytest.approx(0.0032, rel=1e-3) and a10g["rows"] == 0
    assert "no family measured both generations" in a10g["basis"]


def test_a_metric_the_familys_held_out_rows_never_measured_states_the_fleets_error_widened():
    # GIVEN a family whose sources published TTFT and throughput but no TPOT
    entry = {**_entry(0.003, 3e-5, 17), "expected_error": {"ttft": 0.3, "throughput": 0.15}}
    data = {
        "version": "t",
        "profiles": {"l40s/vllm": entry},
        "cross_validation_by_study": {"by_metric": {"ttft": {"mdape": 0.37}, "tpot": {"mdape": 0.28}}},
    }
    # WHEN a prediction asks for its profile
    prof = profile_for("l40s", "vllm", data)
    # THEN it keeps its family's own figures and states the all-families TPOT error, widened, rather than none
    assert prof.expected_error["ttft"] == 0.3
    assert prof.expected_error["throughput"] == 0.15
    assert prof.expected_error["tpot"] == pytest.approx(0.28 * 1.5)
