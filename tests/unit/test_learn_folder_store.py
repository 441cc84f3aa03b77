"""A laptop's learning kept between commands: the profile store on a local folder (SIZING_CALIBRATION_DIR), which
`sizing run --endpoint` refits into and the next `sizing estimate` reads."""

from __future__ import annotations

import pytest

from sizing.learn import profiles
from sizing.learn.profiles import DIR_ENV, ConcurrentAdoption, configured_store


def _version(name: str, scale: float) -> dict:
    key = "xeon-spr/vllm/sizing-engine/tiny-llama"
    return {
        "version": name,
        "status": "adopted",
        "corrections": {key: {"prefill_scale": scale, "decode_scale": scale}},
        "measured": [],
    }


@pytest.fixture
def folder(profile_folder):
    return profile_folder


def test_an_adopted_version_written_by_one_command_is_what_the_next_reads(folder):
    # GIVEN a refit that adopts a version into the folder
    store = configured_store()
    assert store is not None
    store.ensure_bucket()
    pointer, etag = store.read_pointer()
    store.write_version(_version("v1", 1.3))
    store.adopt("v1", etag, pointer, "team error improves")
    # WHEN another command (a fresh cache) asks for the adopted profile
    profiles.invalidate()
    adopted = profiles.active()
    # THEN it is that version, read from the files
    assert adopted is not None and adopted["version"] == "v1"
    assert (folder / profiles.LOCAL_BUCKET / "calibration" / "adopted.json").is_file()


def test_two_refits_at_once_adopt_one_and_the_other_is_told(folder):
    # GIVEN two refits that read the same pointer
    store = configured_store()
    assert store is not None
    store.ensure_bucket()
    pointer, etag = store.read_pointer()
    store.write_version(_version("v1", 1.2))
    store.write_version(_version("v2", 1.4))
    # WHEN both try to adopt
    store.adopt("v1", etag, pointer, "first")
    # THEN the second is refused as a concurrent adoption, and the first stays adopted
    with pytest.raises(ConcurrentAdoption):
        store.adopt("v2", etag, pointer, "second")
    profiles.invalidate()
    assert profiles.active()["version"] == "v1"
    assert store.list_versions() == ["v2", "v1"]


def test_without_the_folder_a_laptop_estimate_uses_the_reference_profile(monkeypatch):
    # GIVEN no folder, no bucket and no embedded stack
    for name in (DIR_ENV, "CALIBRATION_BUCKET", "SIZING_BACKEND", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    profiles.use_store(None)
    # THEN there is no store to read
    assert configured_store() is None
