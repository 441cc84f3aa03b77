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


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--instance", "g5.xlarge", "--kv-cache-dtype", "fp8"], "serving.kv_cache_dtype"),
        (["--instance", "g6e.xlarge", "--max-model-len", "500000"], "max_model_len"),
        (["--instance", "g6e.xlarge", "--max-num-seqs", "0"], "max_num_seqs"),
    ],
    ids=["fp8-kv-on-a10g", "beyond-the-models-context", "no-sequences"],
)
def test_a_serving_config_the_replica_cannot_run_is_refused_naming_the_field(
    flags: list[str], field: str
) -> None:
    # given serving flags the hardware or the model cannot honour
    # when the twin is started with them
    proc = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "twin", "--model", MODEL, *flags, "--port", "0"],
        capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    # then it exits 2 and names the field, serving nothing
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr


def test_flags_not_given_are_the_engine_defaults_of_the_hardware() -> None:
    # given `sizing twin` with only the hardware and one changed setting
    import argparse

    from sizing.catalog import load_catalog
    from sizing.commands.twin import register, serving_from_args
    from sizing.plan.serving import serving_for

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["twin", "--model", MODEL, "--instance", "g6e.xlarge", "--max-num-seqs", "7"])
    # when its serving config is read
    serving = serving_from_args(args)
    # then it is the config a bare architecture id deploys, but for the setting given
    default = serving_for(load_catalog(), MODEL, "g6e.xlarge", 1, "bf16", "vllm")
    assert serving == default.model_copy(update={"max_num_seqs": 7})
    assert serving.model == MODEL
