"""The refit's correction: a uniform slowdown is recovered, shrunk towards the reference profile by the prior,
and its leave-one-level-out predictions are those of a correction refitted without each level."""

from __future__ import annotations

import math

from sizing.learn.correction import (
    PRIOR_LEVELS,
    ReferenceRow,
    TeamRow,
    adoptable,
    corrected,
    fit,
    lookup,
    reference_error,
    screen,
    team_cv,
    team_error,
)


def _row(i: int, k: float, model: str = "m", run: str = "r1") -> TeamRow:
    pred = {"ttft": 100.0 + i, "tpot": 20.0 + i, "throughput": 500.0 - i}
    meas = {"ttft": pred["ttft"] * k, "tpot": pred["tpot"] * k, "throughput": pred["throughput"] / k}
    return TeamRow(f"l{i}", run, "l40s", "vllm", model, {m: (pred[m], meas[m]) for m in pred})


def test_a_uniform_slowdown_is_recovered_shrunk_by_the_prior():
    # given three levels of a server 1.3x slower than predicted
    rows = [_row(i, 1.3) for i in range(3)]

    # when the correction is fitted
    got = fit(rows)["l40s/vllm/m"]

    # then both scales are 1.3 shrunk by one level's worth of prior, in log space
    want = math.exp(3 * math.log(1.3) / (3 + PRIOR_LEVELS))
    assert math.isclose(got["prefill_scale"], want, rel_tol=1e-4)
    assert math.isclose(got["decode_scale"], want, rel_tol=1e-4)
    assert corrected("throughput", 100.0, got) < 100.0 < corrected("ttft", 100.0, got)


def test_other_models_on_the_hardware_get_the_pooled_correction():
    # given levels of one model only
    corrections = fit([_row(i, 1.3) for i in range(3)])

    # when another model on the same family and engine looks its correction up
    hit = lookup(corrections, "l40s", "vllm", "other")

    # then it gets the pooled one, shrunk harder than the model's own
    assert hit is not None
    key, c = hit
    assert key == "l40s/vllm/*"
    assert 1.0 < c["decode_scale"] < corrections["l40s/vllm/m"]["decode_scale"]


def test_leave_one_level_out_predicts_each_level_without_it():
    # given levels of two models from two runs, with different slowdowns
    rows = [_row(i, 1.2) for i in range(3)] + [_row(i, 1.5, "n", "r2") for i in range(3, 5)]

    # when cross-validated
    cv = team_cv(rows)

    # then each held-out prediction is that of a correction refitted without the level
    for i, row in enumerate(rows):
        held = fit(rows[:i] + rows[i + 1 :])
        hit = lookup(held, row.family, row.engine, row.model)
        for p in (p for p in cv["rows"] if p["level"] == row.level_id):
            want = corrected(p["metric"], row.figures[p["metric"]][0], hit[1] if hit else None)
            assert math.isclose(p["predicted"], want, rel_tol=1e-4)


def test_levels_far_outside_what_a_calibration_corrects_are_refused_saying_why():
    # GIVEN three levels of a server 1.3x slower than predicted, and two of another machine's figures filed under
    # the same hardware, ten times slower
    rows = [_row(i, 1.3) for i in range(3)] + [_row(i, 10.7, run="r2") for i in range(3, 5)]
    # WHEN the refit screens them
    kept, refused = screen(rows)
    # THEN the far levels are refused, each named with how far off it is and why, and the fit learns from the rest
    assert [r.level_id for r in kept] == ["l0", "l1", "l2"]
    assert len(refused) == 2 and "l3" in refused[0] and "run r2" in refused[0]
    assert "ttft 10.7x slower" in refused[0] and "beyond the 4x a calibration corrects" in refused[0]
    assert fit(kept)["l40s/vllm/m"] == fit(rows[:3])["l40s/vllm/m"]


def test_a_models_own_correction_is_adopted_when_only_the_pooled_one_hurts_the_reference_rows():
    # given three levels of model m measured 1.5x slower than the reference profile predicts, and reference rows of
    # another model on the same hardware that the profile already predicts right
    team = [_row(i, 1.5) for i in range(3)]
    ref = [ReferenceRow(f"x{i}", "l40s", "vllm", "other", metric, 100.0, 100.0)
           for i in range(20) for metric in ("ttft", "tpot", "throughput")]  # fmt: skip
    candidate = fit(team)
    before, after = team_error(team, {}), team_cv(team)
    ref_before = reference_error(ref, None)

    # when the refit decides what to adopt
    kept, adopt, reasons, ref_after = adoptable(candidate, before, after, ref, ref_before)

    # then it adopts m's own correction (the team's error falls) and leaves out the pooled one, which would have
    # slowed the other model's right predictions, saying so
    assert adopt
    assert set(kept) == {"l40s/vllm/m"}
    assert lookup(kept, "l40s", "vllm", "other") is None
    assert ref_after["changed_predictions"] == 0
    assert any("pooled correction" in r and "worsens" in r for r in reasons)
    # and with the pooled one the whole candidate would have been refused
    assert reference_error(ref, candidate)["changed_predictions"] == 60
