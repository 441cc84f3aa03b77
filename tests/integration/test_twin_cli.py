"""`sizing twin` serves a candidate's twin as its own process until stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

pytestmark = pytest.mark.integration

#: Seconds the twin process may take to import the catalog and the perf model and start listening.
START_TIMEOUT_S = 60
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_the_twin_command_serves_the_model_on_the_port_it_prints() -> None:
    # given `sizing twin` on a free loopback port
    proc = subprocess.Popen(
        [sys.executable, "-m", "sizing.cli", "twin", "--model", MODEL, "--instance", "g6e.xlarge", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        # then it says what it serves and where
        assert "serving http://127.0.0.1:" in line, proc.stderr.read() if proc.stderr else ""
        url = line.split("serving ", 1)[1].split()[0]
        # and answers like an OpenAI endpoint
        models = json.load(urllib.request.urlopen(url + "/v1/models", timeout=10))
        assert [m["id"] for m in models["data"]] == [MODEL]
        # under the name it was given and under the catalog id that name resolves to
        for name in (MODEL, line.split("(", 1)[1].split(")", 1)[0]):
            body = json.dumps({"model": name, "prompt": "hello", "max_tokens": 2}).encode()
            req = urllib.request.Request(url + "/v1/completions", body)
            resp = json.load(urllib.request.urlopen(req, timeout=10))
            assert resp["usage"]["completion_tokens"] <= 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_unknown_model_is_refused_with_exit_code_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "twin", "--model", "no-such/model", "--instance", "g6e.xlarge"],
        capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "error" in proc.stderr
