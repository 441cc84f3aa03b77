"""The reference profile an estimate starts from: the shipped one, or another file of the same form named by
SIZING_REFERENCE_PROFILE (what the product would say under another calibration)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sizing.perf.calibration import PROFILE_PATH, REFERENCE_PROFILE_ENV

CHILD = (
    "from sizing.perf.calibration import load_profiles, profile_for;"
    "d = load_profiles(); p = profile_for('xeon-spr-c7i.large', 'vllm', d);"
    "print(d['version'], p.bandwidth_eff)"
)


def test_an_estimate_starts_from_the_profile_the_environment_names(tmp_path: Path):
    # GIVEN a copy of the shipped profile whose CPU family reads memory at half the efficiency, under another version
    data = json.loads(PROFILE_PATH.read_text())
    shipped, version = data["profiles"]["xeon-spr/vllm"]["bandwidth_eff"], data["version"]
    data["version"] = "what-if"
    for key, entry in data["profiles"].items():
        if key.startswith("xeon-spr/"):
            entry["bandwidth_eff"] = shipped / 2
    other = tmp_path / "reference.json"
    other.write_text(json.dumps(data))
    # WHEN a process reads its reference profile with SIZING_REFERENCE_PROFILE naming that file, and one without it
    env = {k: v for k, v in os.environ.items() if k != REFERENCE_PROFILE_ENV}

    def child(extra: dict[str, str]) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", CHILD], env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return out.stdout.split()

    named, plain = child({REFERENCE_PROFILE_ENV: str(other)}), child({})
    # THEN the first states the named file's version and figures, the second the shipped profile's
    assert named[0] == "what-if" and float(named[1]) == shipped / 2
    assert plain[0] == version and float(plain[1]) == shipped
