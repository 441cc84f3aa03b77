"""The load-test process's own entry point (the load-test image's command on Fargate, a child process locally)
refuses a config it cannot use with a message and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _process(config: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sizing.loadtest.process", "run", config]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("missing.json", "cannot be read: No such file or directory"),
        ('{"endpoint": 3}', "is not valid"),
    ],
)
def test_a_config_it_cannot_use_is_exit_2_with_a_message(tmp_path: Path, config: str, says: str) -> None:
    # given a config file that does not exist, or inline JSON that is not a load-test config
    target = str(tmp_path / config) if config.endswith(".json") else config
    # when the load-test process is started with it
    done = _process(target)
    # then it exits 2 and says why (naming the fields where the config is not valid), without a traceback
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    if "not valid" in says:
        assert "endpoint:" in done.stderr and "out_dir:" in done.stderr
