"""The simulator's hot loop compiled by mypyc (`sizing.perf.native`, built by `make`) against the same source run
as Python: a sizing must not depend on which of the two a machine has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from support.replicas import SCENARIOS, simulated_figures

from sizing.perf import native

TESTS = Path(__file__).resolve().parents[1]
#: The figures of every scenario, computed in a child process that runs the Python modules.
CHILD = "import json; from support.replicas import simulated_figures; print(json.dumps(simulated_figures()))"


@pytest.mark.skipif(not native.KERNEL.native, reason=f"no compiled kernel here: {native.KERNEL.reason}")
def test_the_compiled_kernel_simulates_every_scheduler_path_as_python_does_to_the_last_bit():
    # given this process simulating with the compiled kernel, and a child told to run the Python modules
    env = {**os.environ, native.ENV_SWITCH: "0", "PYTHONPATH": str(TESTS)}
    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    # when both simulate every scenario (preemption, reserved KV, TGI's deferral, Neuron buckets and waves,
    # prefix caching, whole-prompt prefill)
    python = json.loads(child.stdout)
    compiled = json.loads(json.dumps(simulated_figures()))
    # then every request's TTFT, TPOT and e2e, and every rate and count, are the same float for float
    assert sorted(compiled) == sorted(SCENARIOS)
    for name in SCENARIOS:
        assert compiled[name] == python[name], name


def test_switching_the_compiled_kernel_off_runs_python(monkeypatch: pytest.MonkeyPatch):
    # given SIZING_NATIVE=0
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    # when the kernel is chosen
    kernel = native.load_kernel()
    # then it is the Python modules, and it says why
    assert not kernel.native and kernel.scheduler.__module__ == "sizing.perf.scheduler"
    assert "SIZING_NATIVE=0" in kernel.reason


def test_a_compiled_copy_of_other_sources_is_not_used(monkeypatch: pytest.MonkeyPatch):
    # given a compiled package that records the digest of sources since edited
    monkeypatch.delenv(native.ENV_SWITCH, raising=False)
    stale = types.ModuleType(native.NATIVE_PACKAGE)
    stale.SOURCE_DIGEST = "0" * 64  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, native.NATIVE_PACKAGE, stale)
    # when the kernel is chosen
    kernel = native.load_kernel()
    # then the Python modules run (an edit is never shadowed by an old binary), and the reason says to rebuild
    assert not kernel.native and "rebuilds" in kernel.reason


def test_the_digest_changes_with_any_of_the_loops_sources(tmp_path: Path):
    # given a copy of the hot loop's sources
    here = Path(native.__file__).parent
    for name in native.KERNEL_MODULES:
        (tmp_path / f"{name}.py").write_bytes((here / f"{name}.py").read_bytes())
    same = native.source_digest(tmp_path)
    # when one module gains a line
    (tmp_path / "decoderuns.py").write_text((here / "decoderuns.py").read_text() + "\n# edited\n")
    # then the digest is the sources' own until then, and differs after
    assert same == native.source_digest()
    assert native.source_digest(tmp_path) != same


def test_make_rebuilds_the_compiled_copy_when_any_module_of_the_loop_changes():
    # given the Makefile's prerequisites of the compiled copy
    makefile = (TESTS.parent / "Makefile").read_text()
    listed = next(line for line in makefile.splitlines() if line.startswith("NATIVE_SOURCES :="))
    # then every module whose source enters the digest is one of them (an edit to a module left out would run
    # as Python until some listed file changed)
    for name in native.KERNEL_MODULES:
        assert f"{name}.py" in listed, name


def test_the_layer_is_compiled_for_the_platform_the_functions_run_on():
    # given the functions' runtime and architecture in template.yaml, and the layer's declared platform
    from sizing.store.schema import load_template
    from sizing_local import native as build

    template = load_template(TESTS.parent / "template.yaml")
    function = template["Globals"]["Function"]
    layer = template["Resources"]["SizingLayer"]
    # then the layer's compiled copy is built by that runtime's interpreter for that architecture: a copy built
    # for another would not load there, and the functions would simulate as Python, several times slower
    assert function["Runtime"] == build.LAYER_RUNTIME
    assert function["Architectures"] == [build.LAYER_ARCHITECTURE]
    assert layer["Properties"]["CompatibleRuntimes"] == [build.LAYER_RUNTIME]
    assert layer["Properties"]["CompatibleArchitectures"] == [build.LAYER_ARCHITECTURE]
    assert layer["Metadata"]["BuildArchitecture"] == build.LAYER_ARCHITECTURE
    # and no function overrides the architecture the layer is built for
    overridden = [
        name
        for name, resource in template["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function" and "Architectures" in resource["Properties"]
    ]
    assert overridden == []


def test_building_the_layer_on_another_architecture_says_where_to_build_it(tmp_path: Path):
    # given a built layer on a machine of another architecture than the functions'
    from sizing_local import native as build

    (tmp_path / "sizing").mkdir()
    # when the layer's compiled copy is built there
    ok, message = build.build_layer(tmp_path, machine="aarch64")
    # then nothing is compiled, and the message names both architectures
    assert not ok
    assert "run on x86_64 and this machine is aarch64" in message
    assert not (tmp_path / native.NATIVE_PACKAGE).exists()


def test_building_the_layer_before_sam_build_says_so(tmp_path: Path):
    # given an empty directory where the built layer should be
    from sizing_local import native as build

    # when the layer's compiled copy is built into it
    ok, message = build.build_layer(tmp_path, machine=build.LAYER_ARCHITECTURE)
    # then it is refused before any compile, naming the missing step
    assert not ok and "run `sam build` first" in message
