"""The simulator's hot loop, compiled to C where it was built, else the same modules as Python.

Four modules make the loop: `sizing.perf.steptime`, `decoderuns`, `arrivals` and `scheduler`, about nine
tenths of a simulation's time. `make` (`python -m sizing_local.native`) compiles a copy of them with mypyc, the compiler that
ships with mypy, into the virtual environment as the package `sizing_native`. That package records the digest of the
sources it was compiled from.

This module picks the compiled copy when it is installed and was compiled from the sources as they are now.
Otherwise, or with SIZING_NATIVE=0, it picks the Python modules. Both run the same source, so a simulation comes out
the same to the last bit either way (tests/unit/test_perf_native.py); the compiled copy runs the planner's
simulations about 6x faster.

The Lambda layer ships the compiled copy too: `make build` compiles it with the runtime's interpreter (python3.12)
for the functions' architecture (x86_64) and checks it there against the Python modules (`sizing_local.native`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from sizing.perf import arrivals, scheduler, steptime

#: The hot loop's modules, in the order their sources enter the digest.
KERNEL_MODULES = ("steptime", "decoderuns", "arrivals", "scheduler")
#: The package the compiled copy is installed as.
NATIVE_PACKAGE = "sizing_native"
#: Set to 0 to run the Python modules although a compiled copy is installed.
ENV_SWITCH = "SIZING_NATIVE"


def source_digest(directory: Path | None = None) -> str:
    """SHA-256 over the hot loop's sources (in `directory`, default this package's): what the compiled copy was
    built from, when it matches."""
    here = directory or Path(__file__).parent
    digest = hashlib.sha256()
    for name in KERNEL_MODULES:
        digest.update(name.encode())
        digest.update((here / f"{name}.py").read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Kernel:
    """The classes a simulation runs, and where they come from."""

    scheduler: type[scheduler.Scheduler]
    step_time: type[steptime.StepTime]
    open_arrivals: type[arrivals.OpenArrivals]
    closed_arrivals: type[arrivals.ClosedArrivals]
    #: compiled (mypyc) or the Python modules
    native: bool
    #: why this one, in a line (benchmarks print it)
    reason: str


def kernel_line() -> str:
    """Which simulator kernel this process runs, in a line for benchmarks to print beside their figures."""
    line = f"simulator kernel: {KERNEL.reason}"
    if not KERNEL.native:
        line += "; the Lambda layer runs the compiled copy (make build), so these figures overstate its time"
    return line


def _python(reason: str) -> Kernel:
    return Kernel(
        scheduler.Scheduler, steptime.StepTime, arrivals.OpenArrivals, arrivals.ClosedArrivals, False, reason
    )


def load_kernel() -> Kernel:
    """The compiled copy when it is installed, built from these sources and not switched off; else Python."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return _python(f"Python ({ENV_SWITCH}=0)")
    try:
        package = importlib.import_module(NATIVE_PACKAGE)
    except ImportError:
        return _python("Python (no compiled copy installed: make builds one where a C compiler is at hand)")
    if getattr(package, "SOURCE_DIGEST", None) != source_digest():
        return _python("Python (the compiled copy was built from other sources: make rebuilds it)")
    try:
        native_scheduler = importlib.import_module(f"{NATIVE_PACKAGE}.scheduler")
        native_arrivals = importlib.import_module(f"{NATIVE_PACKAGE}.arrivals")
        native_steptime = importlib.import_module(f"{NATIVE_PACKAGE}.steptime")
    except ImportError as exc:  # built for another interpreter or platform
        return _python(f"Python (the compiled copy does not load: {exc})")
    return Kernel(
        native_scheduler.Scheduler,
        native_steptime.StepTime,
        native_arrivals.OpenArrivals,
        native_arrivals.ClosedArrivals,
        True,
        "compiled (mypyc)",
    )


#: The kernel this process simulates with, chosen once at import.
KERNEL = load_kernel()
