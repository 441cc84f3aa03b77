"""The shipped calibration profile comes from the sources that run it: its version's digest is the hash of the
reference rows and of the estimator modules `sizing calibrate` fitted with, so an estimate never states errors
and intervals that were measured for another model."""

from __future__ import annotations

from pathlib import Path

from sizing.perf import fit
from sizing.perf.calibration import PROFILE_PATH, interval_for, load_profiles
from sizing.perf.reference import ANNOTATIONS, DEFAULT_REFERENCE, LOADTEST_ROWS_NAME, REFERENCE_MODELS

#: What `sizing.perf.fit.run_calibration` hashes into the version, in its order.
MODEL_SOURCES = ("engines.py", "memory.py", "step.py", "simulator.py", "fit.py", "reference.py")


def test_the_shipped_profile_was_calibrated_on_these_sources() -> None:
    # given the shipped profile and the inputs `sizing calibrate` reads
    data = load_profiles()
    here = Path(fit.__file__).parent
    loadtest = PROFILE_PATH.parent / LOADTEST_ROWS_NAME
    extra = [loadtest] if loadtest.exists() else []
    inputs = [DEFAULT_REFERENCE, ANNOTATIONS, REFERENCE_MODELS, *extra, *(here / f for f in MODEL_SOURCES)]
    # when they are hashed as the calibration hashes them
    digest = fit.inputs_digest(inputs)
    # then the profile's version names that very digest (else: run `sizing calibrate`)
    assert data["inputs_sha256_12"] == digest, "calibration.json is stale: run `sizing calibrate`"
    assert data["version"].endswith(f"+{digest}")


def test_every_profiles_stated_error_is_its_familys_held_out_error() -> None:
    # given the shipped profile's leave-one-study-out table
    data = load_profiles()
    by_family = data["cross_validation_by_study"]["by_family"]
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
    # then it names this profile's version, and every held-out row it rests on is in this profile's table
    assert data["version"] in bands["basis"]
    assert data["cross_validation"]["rows"]
