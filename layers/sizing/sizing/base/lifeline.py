"""Children of a local run end with the run's process, however it ends. SIGTERM and Ctrl-C are handled by the
parent (it stops its twins and load generators); a SIGKILL leaves it no chance, and its children — each in its own
process group — would run on. So each child started by the embedded default watches its parent and, once the
parent is gone, ends its own process group (itself and, for a load generator, its Locust process)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping

#: Set by the parent (`LocalTwinProvisioner`, `LocalLauncher`) to its own pid; unset, nothing is watched (a
#: twin or load generator started by hand lives as long as its shell wants).
PARENT_ENV = "SIZING_PARENT_PID"
#: How often a child checks its parent: a second is soon enough for a process on loopback, and free.
POLL_S = 1.0
#: The pid an orphan is re-parented to (without a subreaper): a child that is already an orphan still ends.
INIT_PID = 1


def lifeline_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that should end with this process."""
    return {**(os.environ if environ is None else environ), PARENT_ENV: str(os.getpid())}


def exit_with_parent(environ: Mapping[str, str] | None = None, poll_s: float = POLL_S) -> bool:
    """In a child: start a daemon thread that ends this process group when the parent named in the environment
    is no longer our parent (it died; we were re-parented). Returns whether a watch was started."""
    raw = (os.environ if environ is None else environ).get(PARENT_ENV, "")
    if not raw.isdigit() or os.getpgrp() != os.getpid():
        return False  # no parent to watch, or not a group leader (ending the group would end others too)
    parent = int(raw)
    if os.getppid() not in (parent, INIT_PID):
        return False  # a value inherited from further up (not our parent's): nothing of ours to watch

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                os.killpg(os.getpgrp(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
    return True
