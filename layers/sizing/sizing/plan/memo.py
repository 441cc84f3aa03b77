"""Bounded memos of the planner's simulations, kept for the life of the process (a warm Lambda container).

A replica's capacity under an SLO depends on its step model, the workload's token distributions, the SLO and the
seed -- not on the user count, traffic profile, region or prices -- so a repeated request, or the same workload
re-sized for more users or another region, reuses the searches already done. Keys hold everything a simulation
reads (see `fingerprint`); values are copied or treated as read-only by the callers."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

import numpy as np

V = TypeVar("V")

_PLAIN = (bool, int, float, str, type(None))


class LRU(Generic[V]):
    """A thread-safe least-recently-used map with at most `maxsize` entries, counting hits and misses."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return None

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def info(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


def _frozen(value: Any) -> Hashable:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, str(value.dtype), value.tobytes())
    # dataclasses (config, memory fit, calibration profile with its version, engine defaults) print every field
    return (type(value).__qualname__, repr(value))


def fingerprint(step_model: Any) -> tuple[Hashable, ...]:
    """Everything a step model holds, as a hashable value: two step models with one fingerprint time every engine
    step alike. Taken from the instance's attributes, so a parameter added to the model later is part of the key
    without anyone remembering to add it here; the calibration profile (values, basis and version) is among them."""
    held = tuple((name, _frozen(value)) for name, value in sorted(vars(step_model).items()))
    return (type(step_model).__module__, type(step_model).__qualname__, *held)
