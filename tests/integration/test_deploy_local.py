"""LocalTwinProvisioner starts `sizing twin` children on loopback and never leaves one behind;
ExistingEndpoint wraps a URL someone else runs."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from sizing.deploy.architecture import DeployTarget
from sizing.deploy.base import ExistingEndpoint
from sizing.deploy.kube import ProvisioningError
from sizing.plan.serving import serving_for
from sizing_local.twins import LocalTwinProvisioner

pytestmark = pytest.mark.integration

#: Generous: a twin starts in about a second, but this machine is shared and sometimes loaded.
TWIN_START_S = 120.0
ARCH = DeployTarget.from_id("eks:g6e.xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_twin_serves_until_teardown_stops_it(tmp_path: Path) -> None:
    # given a provisioner running the real `sizing twin`
    with LocalTwinProvisioner(log_dir=tmp_path, startup_timeout_s=TWIN_START_S) as prov:
        # when a candidate is applied
        endpoint = prov.apply(ARCH, "run-local", ARCH.id)
        pid = int(endpoint.details["pid"])
        # then it answers on loopback as an OpenAI server for the model
        assert endpoint.url.startswith("http://127.0.0.1:")
        assert prov.ready(endpoint)
        with urllib.request.urlopen(endpoint.openai_base_url + "/models", timeout=5) as resp:
            models = json.load(resp)
        assert any(m["id"] == "meta-llama/Llama-3.1-8B" for m in models["data"])
        # and applying again reuses the running twin
        assert prov.apply(ARCH, "run-local", ARCH.id) == endpoint
        # when torn down, then the process is gone and the endpoint no longer ready
        report = prov.teardown("run-local")
        assert len(report.deleted) == 1
        assert not alive(pid)
        assert not prov.ready(endpoint)


def test_the_twin_serves_the_architectures_serving_config_not_the_engine_defaults(tmp_path: Path) -> None:
    # given an architecture whose serving config differs from the engine's defaults: the workload's -Instruct
    # name, a 5,000-token context, 7 sequences per batch, an fp8 KV cache, no chunked prefill, an older image
    from sizing.catalog import load_catalog

    default = serving_for(load_catalog(), "meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, "bf16", "vllm")
    serving = default.model_copy(
        update={
            "max_model_len": 5000,
            "max_num_seqs": 7,
            "max_num_batched_tokens": 6144,
            "kv_cache_dtype": "fp8",
            "enable_chunked_prefill": False,
            "image": "vllm/vllm-openai:v0.10.2",
        }
    )
    assert (serving.max_model_len, serving.max_num_seqs) != (default.max_model_len, default.max_num_seqs)
    arch = DeployTarget.from_id(
        "eks:g6e.xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B-Instruct", serving=serving
    )
    with LocalTwinProvisioner(log_dir=tmp_path, startup_timeout_s=TWIN_START_S) as prov:
        # when it is provisioned as a local twin
        endpoint = prov.apply(arch, "run-serving", arch.id)
        # then the twin serves the model under its name exactly as the workload named it
        assert endpoint.model == "meta-llama/Llama-3.1-8B-Instruct"
        with urllib.request.urlopen(endpoint.openai_base_url + "/models", timeout=5) as resp:
            card = json.load(resp)["data"][0]
        assert card["id"] == "meta-llama/Llama-3.1-8B-Instruct"
        # and its model card states the architecture's config, field for field
        assert card["max_model_len"] == 5000
        assert card["serving"] == serving.model_dump(mode="json")
        # and it behaves like it: a 6,000-token prompt is refused with 400 as vLLM refuses it
        body = {"model": endpoint.model, "prompt": [1] * 6000, "max_tokens": 1}
        req = urllib.request.Request(endpoint.openai_base_url + "/completions", json.dumps(body).encode())
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400
        assert "maximum context length is 5000 tokens" in json.load(err.value)["error"]["message"]
        # while a prompt within the context is answered
        body["prompt"] = [1] * 4000
        req = urllib.request.Request(endpoint.openai_base_url + "/completions", json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.load(resp)["usage"]["prompt_tokens"] == 4000
        # and its log's ready line names the batch limit it runs with
        log = Path(endpoint.details["log"]).read_text()
        assert "max_model_len 5,000, max_num_seqs 7" in log and "engine max_num_seqs 7" in log
        # and it says what it is when asked for its version, as vLLM answers GET /version
        with urllib.request.urlopen(endpoint.url + "/version", timeout=5) as resp:
            assert json.load(resp)["version"].startswith("twin-")


def test_a_twin_that_exits_at_start_is_reported_and_reaped(tmp_path: Path) -> None:
    # given a "twin" that fails at once
    prov = LocalTwinProvisioner(
        [sys.executable, "-c", "import sys; print('no GPU model'); sys.exit(3)"], log_dir=tmp_path
    )
    # when applied, then the error says why, and nothing is left running
    with pytest.raises(ProvisioningError, match="exited with code 3: no GPU model"):
        prov.apply(ARCH, "run-fail", ARCH.id)
    assert prov.running() == []


def test_a_twin_that_never_answers_is_killed_after_the_startup_timeout(tmp_path: Path) -> None:
    # given a "twin" that hangs without serving
    pidfile = tmp_path / "pid"
    hang = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    prov = LocalTwinProvisioner([sys.executable, "-c", hang], log_dir=tmp_path, startup_timeout_s=1.0)
    # when applied
    with pytest.raises(ProvisioningError, match="within 1 s"):
        prov.apply(ARCH, "run-hang", ARCH.id)
    # then the hung process was killed
    assert not alive(int(pidfile.read_text()))
    assert prov.running() == []


def test_close_stops_every_twin_of_every_run(tmp_path: Path) -> None:
    prov = LocalTwinProvisioner(log_dir=tmp_path, startup_timeout_s=TWIN_START_S)
    other = DeployTarget.from_id("eks:g6e.xlarge:tp1:fp8:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    pids = [int(prov.apply(a, run, a.id).details["pid"]) for a, run in ((ARCH, "r1"), (other, "r2"))]
    assert all(alive(p) for p in pids)
    prov.close()
    assert not any(alive(p) for p in pids)


def test_an_existing_endpoint_is_ready_when_its_health_answers(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/health").respond_with_data("ok")
    prov = ExistingEndpoint(httpserver.url_for("/"), model="my-model")
    endpoint = prov.apply({}, "run-x", "external")
    assert endpoint.kind == "existing" and endpoint.model == "my-model"
    assert prov.ready(endpoint)
    assert prov.teardown("run-x").complete
    gone = ExistingEndpoint("http://127.0.0.1:9").apply({}, "run-x", "external")
    assert not prov.ready(gone)
