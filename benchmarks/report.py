"""Report figures: time to render the HTML report of every example workload (whole page, and its parts: the
simulated latency curves, the manifests), the page's size, and its charts and tagged figures. Prints figures;
asserts nothing. The target is a report in well under 2 s.

    .venv/bin/python benchmarks/report.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from sizing.plan import estimate
from sizing.report import render_report
from sizing.report.curves import latency_curves
from sizing.report.page import winner_manifests
from sizing.report.reading import read_report
from sizing.workload.parse import load_spec

ROOT = Path(__file__).resolve().parents[1]


def _time(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), max(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(
        f"{'example':<22}{'page s (med/max)':>18}{'curves s':>10}{'manifests s':>13}{'KiB':>7}{'charts':>8}{'figures':>9}"
    )
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        typed = estimate(load_spec(path))
        result = typed.document()
        page_med, page_max = _time(partial(render_report, result), args.repeat)
        curves_med, _ = _time(partial(latency_curves, typed), args.repeat)
        man_med, _ = _time(partial(winner_manifests, typed), args.repeat)
        html = render_report(result)
        view = read_report(html)
        print(
            f"{path.stem:<22}{page_med:>9.3f} /{page_max:>6.3f}{curves_med:>10.3f}{man_med:>13.3f}"
            f"{len(html.encode()) / 1024:>7.0f}{len(view.charts):>8}{len(view.figures):>9}"
        )


if __name__ == "__main__":
    main()
