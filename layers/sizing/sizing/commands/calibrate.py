"""`sizing calibrate`: refit the estimator's efficiency factors on measured rows and print the error tables."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from sizing.perf.calibration import PROFILE_PATH
    from sizing.perf.reference import DEFAULT_REFERENCE

    p = sub.add_parser(
        "calibrate", help="fit the performance model on measurements (writes the shipped profile)"
    )
    p.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="published measurements CSV")
    p.add_argument(
        "--extra",
        type=Path,
        action="append",
        default=[],
        help="normalised rows of our own load tests (sizing.perf.reference.add_rows format); repeatable",
    )
    p.add_argument("--out", type=Path, default=PROFILE_PATH, help="profile file to write")
    p.add_argument("--date", default=None, help="profile date (default: today, UTC)")
    p.add_argument(
        "--no-cv",
        action="store_true",
        help="skip the leave-one-source-out and leave-one-study-out cross-validation",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=max(1, os.cpu_count() or 1),
        help="processes for the cross-validation folds (default: the machine's cores; the result is the same)",
    )
    p.add_argument("--json", action="store_true", help="print the error table as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sizing.errors import InvalidInput, Problem
    from sizing.perf.fit import format_error_table, run_calibration
    from sizing.perf.reference import EXCLUDED, NORMALISED, parse_rows, write_rows

    if not args.reference.exists():
        raise InvalidInput(
            f"reference measurements not found: {args.reference}", [Problem("reference", "missing")]
        )
    date = args.date or dt.datetime.now(dt.UTC).date().isoformat()
    rows, excluded = parse_rows(args.reference)
    if args.out == Path(args.out).resolve() and args.out.parent == NORMALISED.parent:
        write_rows(rows, NORMALISED)
        EXCLUDED.write_text("row_id,reason\n" + "".join(f'{rid},"{why}"\n' for rid, why in excluded))

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.workers < 1:
        raise InvalidInput(
            f"--workers must be at least 1, got {args.workers}", [Problem("workers", "below 1")]
        )
    result = run_calibration(
        args.reference, args.extra, date, cv=not args.no_cv, progress=progress, workers=args.workers
    )
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(
        f"wrote {args.out} (version {result['version']}, {len(result['profiles'])} profiles)", file=sys.stderr
    )
    if args.json:
        json.dump(
            {"by_source": result["cross_validation"], "by_study": result["cross_validation_by_study"]},
            sys.stdout,
            indent=2,
        )
        print()
    elif result["cross_validation"]:
        print(format_error_table(result["cross_validation"]))
        print()
        print(format_error_table(result["cross_validation_by_study"]))
    return 0
