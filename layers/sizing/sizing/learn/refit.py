"""The calibration job: the reference rows plus the team's stored measurements -> a new profile version.

`prepare` reads (the adopted pointer and its ETag, the adopted version, every real measured level) and computes
(the candidate corrections, the cross-validation tables, the decision); `commit` writes the version object, then
-- when the decision is to adopt -- the pointer, conditionally. Nothing is written before `commit`, and the
pointer is written last, so a refit that fails at any point leaves the adopted profile as it was.
"""

from __future__ import annotations

import csv
import functools
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.learn import correction, matching
from sizing.learn.profiles import REFERENCE, ConcurrentAdoption, CorruptProfile, ProfileStore, new_version
from sizing.perf.calibration import PROFILE_PATH, load_profiles

log = logging.getLogger("sizing.learn")


@functools.cache
def shipped_reference() -> tuple[str, tuple[correction.ReferenceRow, ...]]:
    """The shipped profile's version and its reference rows' cross-validated predictions."""
    from sizing.perf.calrows import NORMALISED

    data = load_profiles(str(PROFILE_PATH))
    with NORMALISED.open() as fh:
        rows = correction.reference_rows(data, csv.DictReader(fh))
    return str(data.get("version", "none")), tuple(rows)


def team_rows(levels: list[Any]) -> list[correction.TeamRow]:
    return [
        correction.TeamRow(lv.level_id, lv.run_id, lv.family, lv.engine, lv.model, lv.figures())
        for lv in levels
    ]


@dataclass
class Prepared:
    version: dict[str, Any]
    adopt: bool
    pointer: dict[str, Any] | None
    etag: str | None


def _steps_words(c: dict[str, Any]) -> str:
    st = c["steps"]
    return (
        f"step factors fitted to {st['timed_steps']} engine steps of {st['step_levels']} levels (compute"
        f" {st['compute_eff']:.3f}, bandwidth {st['bandwidth_eff']:.3f}, {st['step_overhead_s'] * 1e3:.2f} ms a step,"
        f" {st['seq_overhead_s'] * 1e3:.3f} ms a sequence, {st['request_overhead_s'] * 1e3:.1f} ms a request; step"
        f" error {st['step_error_before']:.1%} -> {st['step_error_after']:.1%})"
    )


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        if n is None:
            out.append(f"{key}: correction removed")
        elif n.get("steps"):
            out.append(f"{key}: {_steps_words(n)} ({n['levels']} levels, {n['runs']} runs)")
        elif o is None or o.get("steps"):
            out.append(
                f"{key}: new correction prefill x{n['prefill_scale']:.3f}, decode x{n['decode_scale']:.3f}"
                f" ({n['levels']} levels, {n['runs']} runs)"
            )
        else:
            out.append(
                f"{key}: prefill x{o['prefill_scale']:.3f} -> x{n['prefill_scale']:.3f}, decode"
                f" x{o['decode_scale']:.3f} -> x{n['decode_scale']:.3f} ({n['levels']} levels, {n['runs']} runs)"
            )
    return out


def with_steps(
    rows: list[correction.TeamRow],
    candidate: dict[str, Any],
    team_after: dict[str, Any],
    levels: list[Any],
    steps: list[Any],
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Per model whose levels kept engine steps: the step correction (`sizing.learn.stepcorrection`) in place of
    the stretch where its leave-one-level-out error on the model's levels is lower. Returns the corrections, the
    team's cross-validation with the chosen predictions, and a line per model saying which was kept and why."""
    from sizing.catalog import load_catalog
    from sizing.learn import stepcorrection

    if not steps:
        return candidate, team_after, []
    kept = {r.level_id for r in rows}
    # a run the screen refused a level of measured another configuration or machine: none of its steps are learnt
    refused = {(lv.run_id, lv.candidate_id) for lv in levels if lv.level_id not in kept}
    steps = [it for it in steps if (it.run_id, it.candidate_id) not in refused]
    learnt, left = stepcorrection.learn([lv for lv in levels if lv.level_id in kept], steps, load_catalog())
    key_of = {r.level_id: correction.model_key(r.family, r.engine, r.model) for r in rows}
    preds: list[dict[str, Any]] = list(team_after.get("rows") or [])
    words: list[str] = []
    out = dict(candidate)
    for key, sc in learnt.items():
        stretch = [p for p in preds if key_of.get(p["level"]) == key]
        held = {r["level"] for r in sc.cv_rows}
        a = stepcorrection.key_error([p for p in stretch if p["level"] in held])
        b = stepcorrection.key_error(sc.cv_rows)
        if a is None or b is None:
            continue
        if b < a:
            runs = (candidate.get(key) or {}).get("runs", 0)
            out[key] = sc.entry(runs)
            preds = [
                p for p in preds if not (key_of.get(p["level"]) == key and p["level"] in held)
            ] + sc.cv_rows
            words.append(
                f"{key}: the step fit kept, its leave-one-level-out error {b:.1%} against the stretch's {a:.1%}"
            )
        else:
            words.append(
                f"{key}: the stretch kept, its leave-one-level-out error {a:.1%} against the step fit's {b:.1%}"
            )
    if left:
        words.append(
            f"step fits not tried for {', '.join(left)}: past the refit's {stepcorrection.STEP_FIT_BUDGET_S:.0f} s"
            " for them (a later refit reaches them); the stretch kept"
        )
    apes: dict[str, list[float]] = {m: [] for m in correction.METRICS}
    for p in preds:
        apes[p["metric"]].append(abs(p["predicted"] / p["measured"] - 1))
    return out, {**correction.summary(apes), "grouping": "level", "rows": preds}, words


def _simulated(
    levels: list[Any], steps: list[Any] | None, corrections: dict[str, Any]
) -> dict[tuple[str, str], float]:
    """The team's levels predicted under the adopted step corrections (none adopted: nothing to simulate)."""
    if not any(c.get("steps") for c in corrections.values()):
        return {}
    from sizing.catalog import load_catalog
    from sizing.learn import stepcorrection

    return stepcorrection.simulated(levels, steps or [], corrections, load_catalog())


def _repredict(row: correction.ReferenceRow, c: dict[str, Any]) -> float | None:
    from sizing.learn.stepcorrection import reference_prediction

    return reference_prediction(row, c)


def prepare(
    levels: list[Any], store: ProfileStore, trigger: str = "", steps: list[Any] | None = None
) -> Prepared:
    """Compute a refit on `levels` (real measured levels) and the engine `steps` they kept against what `store`
    has adopted."""
    started = time.perf_counter()
    try:
        pointer, etag = store.read_pointer()
    except CorruptProfile as exc:
        log.error("calibration profile pointer unusable: %s", exc)
        head = store.client.head_object(Bucket=store.bucket, Key=store.pointer_key)
        pointer, etag = None, str(head["ETag"])
    current = store.adopted()
    current_corr: dict[str, Any] = (current or {}).get("corrections") or {}
    reference_version, ref_rows = shipped_reference()
    rows, refused = correction.screen(team_rows(levels))
    candidate = correction.fit(rows)
    team_before = correction.team_error(rows, current_corr, _simulated(levels, steps, current_corr))
    team_after = correction.team_cv(rows)
    candidate, team_after, chosen = with_steps(rows, candidate, team_after, levels, steps or [])
    ref_before = correction.reference_error(ref_rows, None)
    candidate, adopt, reasons, ref_after = correction.adoptable(
        candidate, team_before, team_after, ref_rows, ref_before, _repredict
    )
    reasons = [*reasons, *chosen, *refused]
    table = matching.table(levels)
    changed = _changes(current_corr, candidate)
    old_confs = {(c["run_id"], c["candidate_id"]) for c in (current or {}).get("measured") or []}
    new_confs = [c for c in table if (c["run_id"], c["candidate_id"]) not in old_confs]
    if new_confs:
        changed.append(f"{len(new_confs)} measured configurations added (answered with basis: measured)")
    version = new_version(salt=trigger)
    data = {
        "format": 1,
        "version": version,
        "status": "candidate",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "trigger": trigger,
        "reference_version": reference_version,
        "parent": (current or {}).get("version", REFERENCE),
        "corrections": candidate,
        "measured": table,
        "levels": len(rows),
        "runs": len({r.run_id for r in rows}),
        "cross_validation": {
            "team": {
                "before": team_before,
                "after": team_after,
                "before_basis": "the adopted profile's predictions of the same levels (in sample)",
            },
            "reference": {
                "before": ref_before,
                "after": ref_after,
                "grouping": "source (the shipped leave-one-source-out predictions, corrections applied)",
            },
        },
        "decision": {"adopted": False, "reasons": reasons},
        "what_changed": changed,
        "refit_seconds": 0.0,
    }
    data["refit_seconds"] = round(time.perf_counter() - started, 4)
    return Prepared(data, adopt, pointer, etag)


def commit(prepared: Prepared, store: ProfileStore) -> dict[str, Any]:
    """Store the version; adopt it when the decision says so and nobody adopted since `prepare` read the
    pointer. Returns the version object as stored."""
    data = prepared.version
    store.write_version(data)
    if not prepared.adopt:
        return data
    try:
        store.adopt(data["version"], prepared.etag, prepared.pointer, "; ".join(data["decision"]["reasons"]))
    except ConcurrentAdoption as exc:
        data["decision"]["reasons"].append(f"not adopted: {exc}")
        store.write_version(data)
        return data
    data["status"] = "adopted"
    data["decision"]["adopted"] = True
    store.write_version(data)
    return data


def run_refit(level_store: Any, store: ProfileStore, trigger: str = "") -> dict[str, Any]:
    """Read every real measured level, refit, store and (maybe) adopt. Returns the version object."""
    levels = level_store.query()
    return commit(prepare(levels, store, trigger, level_store.steps()), store)


def outcome_line(data: dict[str, Any]) -> str:
    """One line for a person: the version, adopted or kept as a candidate, and why."""
    verb = "adopted" if data.get("status") == "adopted" else "kept as a candidate"
    return f"calibration {data['version']} {verb}: " + "; ".join(data["decision"]["reasons"])


def rollback(store: ProfileStore, version: str) -> dict[str, Any]:
    """Adopt `version` again (a stored version, or `reference` for the shipped profile alone). Returns the new
    pointer. InvalidInput naming the version when it is not stored or not valid."""
    if version != REFERENCE:
        try:
            store.read_version(version)
        except CorruptProfile as exc:
            known = ", ".join(store.list_versions()[:5]) or "none stored"
            raise InvalidInput(
                f"cannot roll back to {version}: {exc} (newest versions: {known})",
                [Problem("rollback", f"'{version}' is not a stored valid profile version")],
            ) from None
    try:
        pointer, etag = store.read_pointer()
    except CorruptProfile:
        pointer, etag = (
            None,
            str(store.client.head_object(Bucket=store.bucket, Key=store.pointer_key)["ETag"]),
        )
    was = (pointer or {}).get("version", REFERENCE)
    store.adopt(version, etag, pointer, f"rolled back from {was}")
    new, _ = store.read_pointer()
    assert new is not None
    return new


def overview(store: ProfileStore, limit: int = 20) -> dict[str, Any]:
    """What `GET /calibration` answers: the adopted version, and per version its status, figures and what
    changed (newest first)."""
    try:
        pointer, _ = store.read_pointer()
    except CorruptProfile as exc:
        pointer = None
        log.error("calibration profile pointer unusable: %s", exc)
    versions: list[dict[str, Any]] = []
    for v in store.list_versions()[:limit]:
        try:
            d = store.read_version(v)
        except CorruptProfile as exc:
            versions.append({"version": v, "status": "unreadable", "error": str(exc)})
            continue
        cv = d.get("cross_validation", {})
        versions.append(
            {
                "version": v,
                "status": d.get("status"),
                "created_at": d.get("created_at"),
                "parent": d.get("parent"),
                "levels": d.get("levels"),
                "runs": d.get("runs"),
                "team_error": {
                    "before": (cv.get("team", {}).get("before") or {}).get("overall"),
                    "after": (cv.get("team", {}).get("after") or {}).get("overall"),
                },
                "reference_error": {
                    m: {
                        "before": (cv.get("reference", {}).get("before") or {}).get(m, {}).get("mdape"),
                        "after": (cv.get("reference", {}).get("after") or {}).get(m, {}).get("mdape"),
                    }
                    for m in correction.METRICS
                },
                "decision": d.get("decision"),
                "what_changed": d.get("what_changed", []),
                "corrections": d.get("corrections", {}),
                "refit_seconds": d.get("refit_seconds"),
            }
        )
    return {
        "adopted": (pointer or {}).get("version", REFERENCE),
        "history": (pointer or {}).get("history", []),
        "reference_version": shipped_reference()[0],
        "versions": versions,
    }
