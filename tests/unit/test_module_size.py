"""No module of the packages already split by concern grows past the size a newcomer reads in one sitting: the
planner (`plan/`, one module per phase) and the report (`report/`, one module per section it draws)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "sizing" / "sizing"
#: The most lines a module of these packages may have (the issue's target for the domain package).
MAX_LINES = 600
#: Packages held to it; others join once they are split.
HELD = ("plan", "report")


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_split_packages_is_over_the_limit() -> None:
    # given every Python module of the planner and the report
    modules = [m for pkg in HELD for m in sorted((PACKAGE / pkg).rglob("*.py"))]
    # when their lines are counted
    over = {str(m.relative_to(PACKAGE)): _lines(m) for m in modules if _lines(m) > MAX_LINES}
    # then none is over the limit
    assert modules and not over, over
