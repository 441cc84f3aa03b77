"""`sizing run` outside a checkout: an installed package carries the stack it deploys (template.yaml, the state
machine's definition, the functions' code) as package data of `sizing_local`, and finds it from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sizing.store.schema import TEMPLATE_ENV

ROOT = Path(__file__).resolve().parents[2]

#: what the subprocess checks, from a directory with no template above it: every file deploy_local reads resolves
#: from the installed package, and every handler the template names loads
CHECK = """
import json, sys
from sizing.lambdas import load_function
from sizing.store.schema import load_template, repo_root
from sizing_local.files import use_stack_files

path = use_stack_files()
tpl = load_template(path)
names = []
for name, res in tpl["Resources"].items():
    props = res.get("Properties") or {}
    if res["Type"] == "AWS::Serverless::Function":
        module, func = props["Handler"].rsplit(".", 1)
        getattr(load_function(props["CodeUri"], module), func)
        names.append(name)
    if res["Type"] == "AWS::Serverless::StateMachine":
        json.loads((repo_root() / props["DefinitionUri"]).read_text())
print(json.dumps({"template": str(path), "functions": names}))
"""


@pytest.mark.slow
def test_an_installed_sizing_finds_its_stack_from_any_directory(tmp_path: Path) -> None:
    # given the package built as a wheel and installed into a folder of its own (not the editable checkout)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(ROOT), "-w", str(wheels)],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("*.whl")
    # the layer stays lean: the stack's files ride in sizing_local only
    names = zipfile.ZipFile(wheel).namelist()
    assert "sizing_local/stack_files/template.yaml" in names
    assert not [n for n in names if n.startswith("sizing/") and "stack_files" in n]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != TEMPLATE_ENV}
    env["PYTHONPATH"] = str(site)
    # when it looks for its stack from a directory with no template.yaml above it
    out = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )
    # then it reads the installed copy, and every function the template names loads from it
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["template"].startswith(str(site)) and found["template"].endswith("stack_files/template.yaml")
    assert {"ApiFunction", "StepEstimateFunction", "StepCollectFunction"} <= set(found["functions"])
