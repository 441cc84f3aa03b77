"""Which load level to run next: a fixed list, or an SLA search (bracketing, then bisection)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sizing.loadtest.capacity import CapacitySearch
from sizing.loadtest.config import LoadTestConfig, SlaSearchSpec
from sizing.loadtest.metrics import StepResult


class LevelPlan(Protocol):
    def next_level(self, history: Sequence[StepResult]) -> float | None: ...


class FixedLevels:
    """Run the given levels in order."""

    def __init__(self, levels: Sequence[float]) -> None:
        self.levels = list(levels)

    def next_level(self, history: Sequence[StepResult]) -> float | None:
        return self.levels[len(history)] if len(history) < len(self.levels) else None


def level_of(r: StepResult) -> float:
    return r.level


def nothing_answered(step: StepResult) -> bool:
    """Every request the step sent failed (refused, errored or timed out); a step that sent none is not one."""
    return step.requests > 0 and step.answered <= 0


def pointless_after(history: Sequence[StepResult], level: float) -> bool:
    """Whether running `level` next cannot measure anything: not one request of the last step was answered and
    the next level is no lower (an endpoint that refuses, fails or stalls every request answers no more under
    more load). A lower level -- an SLA search bisecting down -- is still worth its step."""
    return bool(history) and nothing_answered(history[-1]) and level >= level_of(history[-1])


class SlaSearch:
    """Highest level at which every SLO percentile holds. Double from `start` while levels pass (bracketing);
    once one fails, bisect between the highest pass below it and the lowest failure until the bracket is
    narrower than the resolution. Whole levels (concurrency, users) are rounded."""

    def __init__(self, spec: SlaSearchSpec, integer: bool) -> None:
        self.spec = spec
        self.integer = integer

    def bracket(self, history: Sequence[StepResult]) -> tuple[float | None, float | None]:
        passing = [level_of(r) for r in history if r.meets_slo]
        failing = [level_of(r) for r in history if r.meets_slo is False]
        hi = min(failing) if failing else None
        below = [x for x in passing if hi is None or x < hi]
        lo = max(below) if below else None
        return lo, hi

    def _narrow_enough(self, lo: float, hi: float) -> bool:
        width = hi - lo
        tol = self.spec.resolution * hi if self.spec.relative else self.spec.resolution
        return width <= max(tol, 1.0 if self.integer else 0.0)

    def next_level(self, history: Sequence[StepResult]) -> float | None:
        if len(history) >= self.spec.max_steps:
            return None
        if not history:
            return self._round(self.spec.start)
        lo, hi = self.bracket(history)
        if hi is None:  # everything passed so far: double
            assert lo is not None
            if lo >= self.spec.max_level:
                return None
            return self._round(min(lo * 2, self.spec.max_level))
        low = lo if lo is not None else 0.0
        if self._narrow_enough(low, hi):
            return None
        nxt = self._round((low + hi) / 2)
        if nxt <= low or nxt >= hi or any(level_of(r) == nxt for r in history):
            return None
        return nxt

    def _round(self, x: float) -> float:
        return float(max(1, round(x))) if self.integer else round(x, 4)

    def summary(self, history: Sequence[StepResult]) -> dict[str, Any]:
        lo, hi = self.bracket(history)
        return {
            "max_passing_level": lo,
            "first_failing_level": hi,
            "probes": [
                {"level": level_of(r), "meets_slo": r.meets_slo, "failures": r.slo_failures} for r in history
            ],
        }


def plan_for(cfg: LoadTestConfig) -> FixedLevels | SlaSearch | CapacitySearch:
    if cfg.capacity_search is not None:
        c = cfg.capacity_search
        return CapacitySearch(c.start, tolerance=c.tolerance, max_levels=c.max_levels, max_rate=c.max_rate)
    if cfg.sla_search is not None:
        return SlaSearch(cfg.sla_search, integer=cfg.mode != "rate")
    return FixedLevels(cfg.levels)
