"""The sizing-run state machine definition: valid ASL, every placeholder substituted by template.yaml, and one
retry policy with a Catch on every Task (so every failure reaches teardown or the run's failure handler)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sizing.store.schema import load_template

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachines" / "sizing_run.asl.json"


def all_states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, state in definition["States"].items():
        out[name] = state
        for nested in ("ItemProcessor", "Iterator"):
            if nested in state:
                out.update(all_states(state[nested]))
        for branch in state.get("Branches", []):
            out.update(all_states(branch))
    return out


def state_machine_resource() -> dict[str, Any]:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    (sm,) = [r for r in resources.values() if r["Type"] == "AWS::Serverless::StateMachine"]
    return sm["Properties"]


def test_statelint_accepts_the_definition():
    statelint = shutil.which("statelint") or str(Path(sys.executable).parent / "statelint")
    out = subprocess.run([statelint, str(ASL)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_placeholder_has_a_substitution_and_every_substitution_is_used():
    text = ASL.read_text()
    placeholders = set(re.findall(r"\$\{(\w+)\}", text))
    props = state_machine_resource()
    assert props["DefinitionUri"] == "statemachines/sizing_run.asl.json"
    subs = set(props["DefinitionSubstitutions"])
    assert placeholders == subs


def test_every_task_has_the_one_retry_policy_and_a_catch():
    states = all_states(json.loads(ASL.read_text()))
    tasks = {n: s for n, s in states.items() if s["Type"] == "Task"}
    assert len(tasks) >= 8
    policies = {json.dumps(s.get("Retry"), sort_keys=True) for s in tasks.values()}
    assert len(policies) == 1 and "null" not in policies
    for name, s in tasks.items():
        assert s.get("Catch"), f"{name} has no Catch"
        assert any("States.ALL" in c["ErrorEquals"] for c in s["Catch"]), name


def test_every_catch_inside_the_candidate_loop_reaches_teardown():
    states = all_states(json.loads(ASL.read_text()))
    loop = json.loads(ASL.read_text())["States"]["MeasureCandidates"]["ItemProcessor"]["States"]
    for name in ("Provision", "CheckReady", "LoadTest"):
        targets = {c["Next"] for c in loop[name]["Catch"]}
        assert targets == {"TeardownAfterError"}, name
    assert states["LoadTest"]["Resource"].endswith("waitForTaskToken")
    assert "HeartbeatSecondsPath" in states["LoadTest"] and "TimeoutSecondsPath" in states["LoadTest"]
    # the wait-until-ready loop is bounded: its check can give up
    choices = loop["ReadyChoice"]["Choices"]
    assert any(c.get("Variable") == "$.poll.value.give_up" for c in choices)


def test_a_provisioned_endpoint_is_checked_at_once_and_waited_for_only_when_not_ready():
    # given the candidate loop
    loop = json.loads(ASL.read_text())["States"]["MeasureCandidates"]["ItemProcessor"]["States"]
    # then the first readiness check follows provisioning directly (an endpoint that already serves, such as
    # SIZING_ENDPOINT, is measured without a poll interval's delay), and each wait follows a check that found
    # the endpoint not ready, before the next check
    assert loop["InitReadyPoll"]["Next"] == "CheckReady"
    assert loop["CheckReady"]["Next"] == "ReadyChoice"
    assert loop["ReadyChoice"]["Default"] == "WaitUntilReady"
    assert loop["WaitUntilReady"]["Next"] == "CheckReady"


@pytest.mark.parametrize("key", ["EventBusName"])
def test_non_function_substitutions_point_at_template_resources(key: str):
    props = state_machine_resource()
    assert props["DefinitionSubstitutions"][key] == {"Ref": "SizingEventBus"}
