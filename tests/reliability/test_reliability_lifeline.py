"""The lifeline of a local run's children, on its own: a child started with `lifeline_env()` ends its process
group once its parent is gone, however the parent went (here: SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

#: Seconds allowed for the child to notice (it polls every second) and stop.
GRACE_S = 10
#: Seconds allowed for the child to import the product and start its own child: about a second on a quiet box, more
#: beside a busy test run on two cores.
START_S = 30
#: The middle process: starts a grandchild with a lifeline (as LocalTwinProvisioner does), prints its pid, waits.
PARENT = r"""
import subprocess, sys, time
from sizing.base.lifeline import lifeline_env
child = subprocess.Popen([sys.executable, "-c", CHILD], env=lifeline_env(), start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""
#: The grandchild: a twin or load generator stand-in with the watch started, and a Locust stand-in beside it.
CHILD = (
    "import subprocess, sys, time\n"
    "from sizing.base.lifeline import exit_with_parent\n"
    "assert exit_with_parent()\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "time.sleep(600)\n"
)


def test_a_child_ends_with_its_sigkilled_parent_and_takes_its_group_along():
    # given a parent whose child (and grandchild) hold a lifeline to it
    parent = subprocess.Popen(
        [sys.executable, "-c", f"CHILD = {CHILD!r}\n" + PARENT], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + START_S
        group = [child]
        while len(group) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            group = [child, *(p.pid for p in psutil.Process(child).children(recursive=True))]
        assert len(group) == 2
        # when the parent is SIGKILLed
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        # then the child and what it started are gone
        deadline = time.monotonic() + GRACE_S
        alive = group
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [
                pid for pid in group if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
            ]
        assert alive == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_without_a_lifeline_nothing_is_watched():
    from sizing.base.lifeline import exit_with_parent

    assert exit_with_parent(environ={}) is False


def _armed_in_a_child(parent_env: str) -> str:
    """Start a group leader with SIZING_PARENT_PID set; it prints whether its lifeline was armed."""
    from sizing.base.lifeline import PARENT_ENV

    code = "from sizing.base.lifeline import exit_with_parent; print(exit_with_parent())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, PARENT_ENV: parent_env},
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip()


def test_a_lifeline_inherited_from_further_up_is_not_armed():
    # given a child whose environment names its real parent, and one naming a pid further up (a stale value
    # passed on from a grandparent): only the first watches, so nothing is ended by mistake
    assert _armed_in_a_child(str(os.getpid())) == "True"
    assert _armed_in_a_child(str(os.getppid())) == "False"
