"""The whole calibration procedure: the rows it can use, the fit, both cross-validations, and the versioned
profile (`data/calibration.json`) -- whose version names the reference inputs, the procedure's own code
(`PROCEDURE_SOURCES`) and the estimator's fingerprint on the reference rows."""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sizing.perf import fit as fitting
from sizing.perf.calibration import ERROR_METRICS, TWIN_ORIGIN, profile_for
from sizing.perf.calrows import CalRow, read_rows
from sizing.perf.crossval import cv_table
from sizing.perf.fit import (
    PRIOR,
    fit_profiles,
    measured,
    predict_row,
    profile_key,
    reference_catalog,
    roofline_row,
    row_config,
)
from sizing.perf.memory import memory_fit
from sizing.perf.reference import ANNOTATIONS, REFERENCE_MODELS, parse_rows


def inputs_digest(paths: Iterable[Any]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


#: The calibration procedure's modules. Their code is hashed into a profile's version beside the reference inputs,
#: as definitions (`procedure_digest`): moving a function between them, a comment or a docstring changes nothing,
#: an edit of any definition does. The estimator's modules (engines, memory, step, simulator, reference parsing)
#: are not hashed at all: their behaviour is, through `fingerprint`. A change that moves any reference row's
#: prediction makes the shipped profile stale (its errors and intervals were measured for another model); a
#: refactor that moves none does not.
PROCEDURE_SOURCES = ("optimizer.py", "fit.py", "crossval.py", "procedure.py")


def _definitions(path: Path) -> dict[str, str]:
    """Each module-level definition of `path` (function, class, constant) by name, as its syntax tree without
    docstrings or imports, at any depth (an import says where a name lives, not what the code does: hoisting one
    out of a function changes nothing); `__all__` is left out too."""
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            name = ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        else:
            continue
        if name == "__all__":
            continue
        for sub in ast.walk(node):
            body = getattr(sub, "body", None)
            if not isinstance(body, list):
                continue
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and ast.get_docstring(
                sub
            ):
                body = body[1:]
            kept = [b for b in body if not isinstance(b, ast.Import | ast.ImportFrom)]
            setattr(sub, "body", kept or [ast.Pass()])  # noqa: B010 (any node with a statement body)
        out[name] = ast.dump(node)
    return out


#: What versions a profile rather than fits it (this digest, the fingerprint and their comparison): left out of
#: the procedure's digest, so mending them restamps nothing.
VERSIONING = frozenset(
    {
        "PROCEDURE_SOURCES",
        "VERSIONING",
        "_definitions",
        "procedure_digest",
        "profile_inputs_digest",
        "inputs_digest",
        "version_digest",
        "FINGERPRINT_DIGITS",
        "FINGERPRINT_RTOL",
        "_sig",
        "fingerprint_changes",
    }
)


def procedure_digest(paths: Iterable[Path]) -> str:
    """The hash of the procedure's definitions across `paths`, independent of which module holds each; the
    versioning code itself (`VERSIONING`) left out."""
    defs: dict[str, str] = {}
    for path in paths:
        defs.update({k: v for k, v in _definitions(path).items() if k not in VERSIONING})
    return hashlib.sha256(json.dumps(defs, sort_keys=True).encode()).hexdigest()[:12]


def profile_inputs_digest(reference: Any, extra: Sequence[Any] = ()) -> str:
    """What a profile was fitted on and with: the reference inputs' bytes and the procedure's definitions."""
    here = Path(__file__).parent
    data = inputs_digest([reference, ANNOTATIONS, REFERENCE_MODELS, *extra])
    code = procedure_digest(here / f for f in PROCEDURE_SOURCES)
    return hashlib.sha256(f"{data}\n{code}".encode()).hexdigest()[:12]


#: Significant digits a fingerprint keeps, and the relative difference it tolerates when compared: far below any
#: modelling change (the smallest efficiency step a fit takes moves predictions by ~1e-3), far above the last-bit
#: noise of reordered floating-point sums.
FINGERPRINT_DIGITS = 7


FINGERPRINT_RTOL = 1e-5


def _sig(values: dict[str, float]) -> dict[str, float]:
    return {k: float(f"{v:.{FINGERPRINT_DIGITS}g}") for k, v in sorted(values.items())}


def fingerprint(rows: Sequence[CalRow], data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every row's measured figures (as parsed), its prediction with the profiles of `data` and the plain
    roofline's: what the estimator does on the reference data, keyed by row id."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        prof = profile_for(r.accelerator, profile_key(r), data)
        try:
            got, roof = predict_row(r, prof), roofline_row(r)
        except ValueError as exc:
            out[r.row_id] = {"measured": _sig(measured(r)), "error": str(exc)}
            continue
        out[r.row_id] = {"measured": _sig(measured(r)), "predicted": _sig(got), "roofline": _sig(roof)}
    return out


def fingerprint_changes(stored: dict[str, Any], current: dict[str, Any], limit: int = 10) -> list[str]:
    """Where the estimator's behaviour on the reference rows departs from a profile's fingerprint (at most
    `limit` lines; empty when it matches)."""
    changes: list[str] = []
    for rid in sorted(set(stored) | set(current)):
        a, b = stored.get(rid), current.get(rid)
        if a is None or b is None:
            changes.append(f"{rid}: {'new row' if a is None else 'row gone'}")
            continue
        for part in ("measured", "predicted", "roofline", "error"):
            x, y = a.get(part), b.get(part)
            if isinstance(x, dict) and isinstance(y, dict) and set(x) == set(y):
                changes += [
                    f"{rid} {part} {k}: {x[k]:.7g} -> {y[k]:.7g}"
                    for k in x
                    if not math.isclose(x[k], y[k], rel_tol=FINGERPRINT_RTOL, abs_tol=1e-12)
                ]
            elif x != y:
                changes.append(f"{rid} {part}: {x} -> {y}")
    return changes[:limit]


def version_digest(inputs_sha: str, prints: dict[str, Any]) -> str:
    """A profile's digest: its inputs' and procedure's hash with its fingerprint."""
    canonical = json.dumps(prints, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{inputs_sha}\n{canonical}".encode()).hexdigest()[:12]


#: 2: the version hashes the inputs, the procedure and the estimator's fingerprint (`fingerprint`).
PROFILE_FORMAT = 2


def calibration_rows(
    reference: Any, extra: Sequence[Any] = ()
) -> tuple[list[CalRow], list[tuple[str, str]], list[tuple[str, str]]]:
    """The rows a calibration fits on, those the parser or annotations excluded and those the model cannot use,
    each excluded one with its reason."""
    rows, excluded = parse_rows(reference)
    for path in extra:
        rows += read_rows(path)
    unusable: list[tuple[str, str]] = []
    usable: list[CalRow] = []
    for r in rows:
        if r.origin == TWIN_ORIGIN:
            unusable.append((r.row_id, "measured on a local twin, which runs at the estimator's own pace"))
            continue
        try:
            cfg = row_config(r)
            fit = memory_fit(cfg, reference_catalog())
            if not fit.fits:
                unusable.append((r.row_id, f"does not fit in the memory model: {fit.reason}"))
                continue
        except (KeyError, ValueError) as exc:
            unusable.append((r.row_id, f"cannot be modelled: {exc}"))
            continue
        usable.append(r)
    return usable, excluded, unusable


def run_calibration(
    reference: Any,
    extra: Sequence[Any] = (),
    date: str = "",
    cv: bool = True,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    harness_only: bool = False,
) -> dict[str, Any]:
    """Parse, fit, cross-validate; the content of `data/calibration.json` (deterministic for the same inputs).
    `harness_only`: of the cross-validations, the harness one alone (the one the stated errors and intervals rest
    on; the source and study ones are the tables' comparison figures and take most of the time)."""
    say = progress or (lambda _msg: None)
    usable, excluded, unusable = calibration_rows(reference, extra)
    say(
        f"{len(usable)} rows usable, {len(excluded)} excluded by the parser/annotations, {len(unusable)} unusable"
    )
    say("fitting profiles per family and per (family, engine) ...")
    profiles = fit_profiles(usable)
    table: dict[str, Any] = {}
    by_study: dict[str, Any] = {}
    by_harness: dict[str, Any] = {}
    if cv and not harness_only:
        say("leave-one-source-out cross-validation ...")
        table = cv_table(usable, profiles, "source", say, workers)
        say("leave-one-study-out cross-validation (stricter) ...")
        by_study = cv_table(usable, profiles, "study", say, workers)
    if cv:
        say("leave-one-harness-out cross-validation (a harness or engine generation never seen) ...")
        by_harness = cv_table(usable, profiles, "harness", say, workers)
        # the error a user should expect: the harness-level figure (a source measured in a way the fit never saw:
        # what fresh sources bring), else the study-level one for a family no held-out harness measured
        for key, entry in profiles.items():
            fam = key.split("/")[0]
            fam_table = by_harness["by_family"].get(fam) or (by_study.get("by_family") or {}).get(fam, {})
            entry["expected_error"] = {m: fam_table[m]["mdape"] for m in ERROR_METRICS if m in fam_table}
    inputs_sha = profile_inputs_digest(reference, extra)
    prints = fingerprint(usable, {"profiles": profiles, "global": {**PRIOR}})
    digest = version_digest(inputs_sha, prints)
    return {
        "format": PROFILE_FORMAT,
        "version": f"{date or 'undated'}+{digest}",
        "date": date,
        "inputs_sha256_12": inputs_sha,
        "fingerprint": prints,
        "procedure": (fitting.__doc__ or "").strip().splitlines()[0],
        "prior": PRIOR,
        "global": {**PRIOR, "basis": "literature prior (no family data)"},
        "profiles": profiles,
        "rows": {"usable": len(usable), "excluded": excluded + unusable},
        "cross_validation": table,
        "cross_validation_by_study": by_study,
        "cross_validation_by_harness": by_harness,
    }
