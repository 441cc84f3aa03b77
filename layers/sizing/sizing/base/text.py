"""Plain-text presentation shared by the CLI, the Slack messages and the calibration tables: aligned tables and
the name a run's figures go by (no extra dependency)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sizing.base.vocabulary import ENDPOINT, TWIN

#: How a run's figures are named by `measured.origin` (`sizing.base.vocabulary.Origin`). A block without an origin
#: predates it and was taken as measured.
ORIGIN_LABELS: dict[str, str] = {TWIN: "simulated (twin)", ENDPOINT: "measured"}


def measured_label(measured: Any) -> str:
    """`simulated (twin)` for a local twin's figures, `measured` for a real server's."""
    origin = measured.get("origin") if isinstance(measured, dict) else None
    return ORIGIN_LABELS.get(str(origin), ORIGIN_LABELS[ENDPOINT])


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows under their headers, each column padded to its widest cell, a rule of dashes below the headers."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
