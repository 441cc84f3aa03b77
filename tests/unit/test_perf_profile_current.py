"""The shipped calibration profile comes from the model that runs it: its version names the reference inputs, the
fitting procedure and the estimator's behaviour on every reference row (its fingerprint), so an estimate never
states errors and intervals that were measured for another model, while a refactor that moves no prediction
leaves the profile current."""

from __future__ import annotations

from pathlib import Path

from sizing.perf import procedure
from sizing.perf.calibration import PROFILE_PATH, interval_for, load_profiles
from sizing.perf.calrows import LOADTEST_ROWS_NAME
from sizing.perf.reference import DEFAULT_REFERENCE


def _extra() -> list[Path]:
    loadtest = PROFILE_PATH.parent / LOADTEST_ROWS_NAME
    return [loadtest] if loadtest.exists() else []


def test_the_shipped_profile_was_calibrated_on_these_inputs_with_this_procedure() -> None:
    # given the shipped profile
    data = load_profiles()
    # when the inputs `sizing calibrate` reads and the procedure's definitions are hashed as the calibration does
    digest = procedure.profile_inputs_digest(DEFAULT_REFERENCE, _extra())
    # then the profile names that very digest, and its version that digest with its fingerprint (else: run
    # `sizing calibrate`)
    assert data["inputs_sha256_12"] == digest, "calibration.json is stale: run `sizing calibrate`"
    assert data["version"].endswith(f"+{procedure.version_digest(digest, data['fingerprint'])}")


def test_the_procedures_digest_follows_its_definitions_not_where_they_live(tmp_path: Path) -> None:
    # given a procedure module, the same split over two modules with other docstrings, the same with its import
    # inside the function, and one constant edited
    one = tmp_path / "one.py"
    one.write_text(
        '"""A."""\nimport math\nK = 2\n\n\ndef f(x):\n    """Doc."""\n    return math.log(x) * K\n'
    )
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("K = 2  # a comment\n")
    b.write_text('"""B."""\nimport math\n\n\ndef f(x):\n    """Other doc."""\n    return math.log(x) * K\n')
    hoisted = tmp_path / "hoisted.py"
    hoisted.write_text("K = 2\n\n\ndef f(x):\n    import math\n\n    return math.log(x) * K\n")
    edited = tmp_path / "edited.py"
    edited.write_text(one.read_text().replace("K = 2", "K = 3"))
    # when each is hashed
    # then moving, re-documenting and moving an import keep the digest, an edited definition changes it
    assert procedure.procedure_digest([one]) == procedure.procedure_digest([a, b])
    assert procedure.procedure_digest([hoisted]) == procedure.procedure_digest([one])
    assert procedure.procedure_digest([edited]) != procedure.procedure_digest([one])


def test_the_estimator_predicts_every_reference_row_as_the_shipped_profile_was_measured_with() -> None:
    # given the shipped profile's fingerprint: each usable row's measured figures, prediction and roofline
    data = load_profiles()
    usable, _, _ = procedure.calibration_rows(DEFAULT_REFERENCE, _extra())
    # when the estimator as it is predicts the same rows with the same profiles
    current = procedure.fingerprint(usable, data)
    # then nothing moved (else the stated errors belong to another model: run `sizing calibrate`)
    changes = procedure.fingerprint_changes(data["fingerprint"], current)
    assert not changes, "calibration.json is stale, run `sizing calibrate`:\n" + "\n".join(changes)


def test_a_moved_prediction_is_named_as_a_change() -> None:
    # given the shipped fingerprint and the same with one prediction 0.1% faster
    data = load_profiles()
    stored = data["fingerprint"]
    rid = next(k for k, v in sorted(stored.items()) if v.get("predicted"))
    metric = next(iter(stored[rid]["predicted"]))
    moved = {**stored, rid: {**stored[rid], "predicted": {**stored[rid]["predicted"]}}}
    moved[rid]["predicted"][metric] *= 0.999
    # when the two are compared
    changes = procedure.fingerprint_changes(stored, moved)
    # then the change names the row and the metric, and last-bit noise is no change
    assert len(changes) == 1
    assert changes[0].startswith(f"{rid} predicted {metric}:")
    noise = {
        **stored,
        rid: {**stored[rid], "predicted": {metric: stored[rid]["predicted"][metric] * (1 + 1e-9)}},
    }
    noise[rid]["predicted"] = {**stored[rid]["predicted"], **noise[rid]["predicted"]}
    assert procedure.fingerprint_changes(stored, noise) == []


def test_every_profiles_stated_error_is_its_familys_held_out_error() -> None:
    # given the shipped profile's leave-one-harness-out table (the error a source of an unseen harness brings)
    data = load_profiles()
    by_family = data["cross_validation_by_harness"]["by_family"]
    # then every fitted profile states exactly its family's cross-validated error per metric
    for key, entry in data["profiles"].items():
        fam = key.split("/")[0]
        expected = {
            m: by_family[fam][m]["mdape"]
            for m in ("ttft", "tpot", "throughput")
            if m in by_family.get(fam, {})
        }
        assert entry.get("expected_error", {}) == expected, key


def test_the_stated_interval_is_read_from_this_profiles_held_out_predictions() -> None:
    # given the shipped profile
    data = load_profiles()
    # when an interval is stated for a calibrated family
    bands = interval_for("neuron-v2", "neuron")
    # then it names this profile's version and the leave-one-harness-out predictions it rests on, which are in
    # this profile's table
    assert data["version"] in bands["basis"]
    assert "leave-one-harness-out" in bands["basis"]
    assert data["cross_validation_by_harness"]["rows"]
