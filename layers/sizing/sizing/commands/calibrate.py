"""`sizing calibrate`: refit the estimator's efficiency factors on measured rows and print the error tables."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.base.text import table
from sizing.learn.profiles import DEFAULT_PREFIX, ProfileStore
from sizing.learn.refit import overview, rollback
from sizing.perf.calibration import PROFILE_PATH
from sizing.perf.tables import format_error_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help="normalised rows of our own load tests (sizing.perf.calrows.add_rows format); repeatable",
    )
    p.add_argument(
        "--from-run",
        type=Path,
        action="append",
        default=[],
        metavar="RESULT_JSON",
        help="a sizing run's result file (`sizing run` writes result.json): its measured rows join the load-test "
        "rows kept beside the profile (measurements-loadtest.csv), which every calibration includes; runs "
        "measured on local twins are refused; repeatable",
    )
    p.add_argument("--out", type=Path, default=PROFILE_PATH, help="profile file to write")
    p.add_argument("--date", default=None, help="profile date (default: today, UTC)")
    p.add_argument(
        "--no-cv",
        action="store_true",
        help="skip the leave-one-source-out and leave-one-study-out cross-validation",
    )
    p.add_argument(
        "--harness-cv-only",
        action="store_true",
        help="of the cross-validations, only the leave-one-harness-out one, which the stated errors and intervals"
        " rest on (minutes instead of the better part of an hour on two cores)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=max(1, os.cpu_count() or 1),
        help="processes for the cross-validation folds (default: the machine's cores; the result is the same)",
    )
    p.add_argument("--json", action="store_true", help="print the error table as JSON")
    team = p.add_argument_group(
        "the team's profiles (docs/learning.md)",
        "the corrections the stack refits from real measurements, versioned in S3 (CALIBRATION_BUCKET)",
    )
    team.add_argument(
        "--rollback",
        metavar="VERSION",
        default=None,
        help="adopt this stored version again (`reference`: the shipped profile alone); estimators use it within"
        " seconds",
    )
    team.add_argument(
        "--versions", action="store_true", help="list the stored versions, newest first (as GET /calibration)"
    )
    team.add_argument("--bucket", default=None, help="calibration bucket (default: $CALIBRATION_BUCKET)")
    team.add_argument(
        "--prefix", default=None, help="key prefix (default: $CALIBRATION_PREFIX or calibration/)"
    )
    p.set_defaults(func=run)


def _team_store(args: argparse.Namespace) -> ProfileStore:
    bucket = args.bucket or os.environ.get("CALIBRATION_BUCKET")
    if not bucket:
        raise InvalidInput(
            "no calibration bucket: give --bucket or set CALIBRATION_BUCKET (the stack's CalibrationBucketName"
            " output)",
            [Problem("bucket", "missing")],
        )
    return ProfileStore(bucket, args.prefix or os.environ.get("CALIBRATION_PREFIX", DEFAULT_PREFIX))


def team_profiles(args: argparse.Namespace) -> int:
    """`--rollback VERSION` and `--versions`: the team's profiles in S3."""
    store = _team_store(args)
    if args.rollback:
        pointer = rollback(store, args.rollback)
        print(f"adopted {pointer['version']} ({pointer['reason']})")
        return 0
    data = overview(store)
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        print()
        return 0

    print(f"adopted: {data['adopted']} (reference profile {data['reference_version']})")
    rows = [
        [
            v["version"],
            v.get("status"),
            v.get("levels"),
            _pct((v.get("team_error") or {}).get("before")),
            _pct((v.get("team_error") or {}).get("after")),
            "; ".join(v.get("what_changed") or [])[:100],
        ]
        for v in data["versions"]
    ]
    print(table(["version", "status", "levels", "team error before", "after", "what changed"], rows))
    return 0


def _pct(summary: dict[str, Any] | None) -> str:
    v = (summary or {}).get("mdape")
    return "-" if v is None else f"{v:.1%}"


def run(args: argparse.Namespace) -> int:
    if args.rollback or args.versions:
        return team_profiles(args)
    from sizing.perf.calrows import LOADTEST_ROWS_NAME, NORMALISED, merge_new_rows, rows_from_run, write_rows
    from sizing.perf.procedure import run_calibration
    from sizing.perf.reference import EXCLUDED, parse_rows

    if not args.reference.exists():
        raise InvalidInput(
            f"reference measurements not found: {args.reference}", [Problem("reference", "missing")]
        )
    date = args.date or dt.datetime.now(dt.UTC).date().isoformat()
    if args.workers < 1:
        raise InvalidInput(
            f"--workers must be at least 1, got {args.workers}", [Problem("workers", "below 1")]
        )
    # every run is read and checked before anything is written
    imported = [row for path in args.from_run for row in rows_from_run(_read_json(path), str(path))]
    loadtest_rows = args.out.parent / LOADTEST_ROWS_NAME
    if imported:
        added, held = merge_new_rows(imported, loadtest_rows)
        print(f"{added} load-test rows added to {loadtest_rows} ({held} already there)", file=sys.stderr)
    # the kept load-test rows, then any other row files (each file once)
    extra = list(
        {p.resolve(): p for p in [*([loadtest_rows] if loadtest_rows.exists() else []), *args.extra]}.values()
    )
    rows, excluded = parse_rows(args.reference)
    if args.out == Path(args.out).resolve() and args.out.parent == NORMALISED.parent:
        write_rows(rows, NORMALISED)
        EXCLUDED.write_text("row_id,reason\n" + "".join(f'{rid},"{why}"\n' for rid, why in excluded))

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    result = run_calibration(
        args.reference,
        extra,
        date,
        cv=not args.no_cv,
        progress=progress,
        workers=args.workers,
        harness_only=args.harness_cv_only,
    )
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(
        f"wrote {args.out} (version {result['version']}, {len(result['profiles'])} profiles)", file=sys.stderr
    )
    if args.json:
        json.dump(
            {
                "by_source": result["cross_validation"],
                "by_study": result["cross_validation_by_study"],
                "by_harness": result["cross_validation_by_harness"],
            },
            sys.stdout,
            indent=2,
        )
        print()
    elif result["cross_validation"]:
        print(format_error_table(result["cross_validation"]))
        print()
        print(format_error_table(result["cross_validation_by_study"]))
        print()
        print(format_error_table(result["cross_validation_by_harness"]))
    return 0


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidInput(f"--from-run: no such file: {path}", [Problem("from_run", "missing")]) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(
            f"--from-run: {path} is not a JSON run result ({exc})", [Problem("from_run", "not JSON")]
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"--from-run: {path} is not a run result", [Problem("from_run", "not an object")])
    return data
