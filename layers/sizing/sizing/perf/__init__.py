"""Performance estimator: memory fit, calibrated step times, continuous-batching simulation, point prediction.

Public surface (imported lazily so `sizing predict` stays fast): `HardwareConfig`, `memory_fit`/`MemoryFit`,
`StepModel`/`Profile`, `simulate`/`ClosedLoop`/`OpenLoop`/`SimResult`/`Stats`, `saturated`, `bounds`/`Bounds`,
`predict`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HardwareConfig": "sizing.perf.config",
    "MemoryFit": "sizing.perf.memory",
    "memory_fit": "sizing.perf.memory",
    "StepModel": "sizing.perf.step",
    "Profile": "sizing.perf.step",
    "ROOFLINE": "sizing.perf.step",
    "simulate": "sizing.perf.simulator",
    "saturated": "sizing.perf.simulator",
    "bounds": "sizing.perf.simulator",
    "Bounds": "sizing.perf.simulator",
    "ClosedLoop": "sizing.perf.simulator",
    "OpenLoop": "sizing.perf.simulator",
    "SimResult": "sizing.perf.simulator",
    "Stats": "sizing.perf.simulator",
    "predict": "sizing.perf.predict",
    "profile_for": "sizing.perf.calibration",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'sizing.perf' has no attribute {name!r}")
