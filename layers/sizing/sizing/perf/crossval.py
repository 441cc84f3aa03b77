"""Cross-validation of the calibration (`sizing.perf.fit`): each published source -- or each study, stricter --
predicted by profiles fitted without it, the error tables per metric and family beside a plain roofline, and what
the reference data allow for TTFT (`ttft_floor`)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from sizing.perf.amplification import AMPLIFIED_METRICS, amplifications, slower_steps
from sizing.perf.calibration import family_of, profile_for
from sizing.perf.calrows import CalRow
from sizing.perf.fit import (
    METRICS,
    PRIOR,
    WITHIN,
    fit_profiles,
    is_moe,
    measured,
    predict_row,
    profile_key,
    roofline_row,
)


@dataclass
class Prediction:
    row_id: str
    family: str
    engine: str
    metric: str
    measured: float
    predicted: float
    roofline: float | None
    saturated: bool
    #: the row's model is a mixture of experts (the stated intervals are grouped by this too)
    moe: bool = False
    #: how much the prediction amplifies an error in its step time (`sizing.perf.amplification`; latencies only,
    #: 1 for the rest): the stated intervals read each held-out error per unit of it
    amplification: float = 1.0

    @property
    def ape(self) -> float:
        return abs(self.predicted / self.measured - 1)

    @property
    def ape_roofline(self) -> float:
        return abs(self.roofline / self.measured - 1) if self.roofline else math.inf


#: Cross-validation units: `source` holds out one published source at a time (a results file or page at a
#: commit: the reference's `source` column); `study` holds out every
#: source of one lab or repository together -- stricter, since a study's sources share engine builds and setup;
#: `harness` holds out every row measured the same way -- one client harness, or one engine generation's
#: measurements (`harness_of`) -- across every lab that used it: what a source of a kind the fit never saw brings.
CV_GROUPINGS = ("source", "study", "harness")
#: The grouping whose held-out predictions the stated intervals read (`calibration.INTERVAL_CV`'s first table, which
#: `procedure` writes from it).
INTERVAL_GROUPING = "harness"


#: Harnesses whose rows any engine build can produce, by the way a closed loop's clients start (`CalRow.start`):
#: llmperf's waves and the lock-step loops of genai-perf-style clients (`reference.LOCKSTEP_CLIENT`).
CLIENT_HARNESSES = {
    "waves": "llmperf (waves of requests)",
    "together": "lock-step closed loops (genai-perf and vLLM's serving benchmark at max-concurrency)",
}


def harness_of(row: CalRow) -> str:
    """How a row was measured, as one cross-validation group: its client harness where that decides the shape of
    the load (`CLIENT_HARNESSES`); else the engine vendor's own tables (TensorRT-LLM's published performance
    tables, the Neuron SDK's transformers-neuronx tables); else the engine generation that served it (vLLM V0 or
    V1, TGI 2, vLLM/TGI on Neuron, SGLang, TensorRT-LLM in community harnesses). This product's own load tests are
    one harness, and a group per model: the next rows they bring are another model measured by the same load
    generator (a team's own, or the next shape of the engine grid), so a fold holds out one model's levels. Held
    out whole, they left the CPU family (its only rows) on the literature prior, and its intervals stated the
    prior's error (TTFT bands 15-640x wide) rather than the next model's."""
    if row.origin not in ("", "reference"):
        return f"{row.origin} rows, {row.model}"
    if row.start in CLIENT_HARNESSES:
        return CLIENT_HARNESSES[row.start]
    if row.study == "NVIDIA/TensorRT-LLM":
        return "TensorRT-LLM's own performance tables"
    if row.build == "transformers-neuronx":
        return "Neuron SDK tables (transformers-neuronx)"
    if row.engine == "neuron":
        return "vLLM and TGI on Neuron (optimum-neuron, NxD Inference)"
    if row.engine == "vllm":
        return "vLLM V0 (before 0.8)" if row.build == "v0" else "vLLM V1"
    if row.engine == "tgi":
        return f"TGI {row.build or 'current'}"
    return f"{row.engine} in community harnesses"


def cv_key(row: CalRow, grouping: str) -> str:
    if grouping not in CV_GROUPINGS:
        raise ValueError(f"unknown cross-validation grouping {grouping!r} (one of {', '.join(CV_GROUPINGS)})")
    if grouping == "harness":
        return harness_of(row)
    return row.source if grouping == "source" else row.study


def _fold(
    rows: Sequence[CalRow], held_key: str, grouping: str, full: dict[str, dict[str, Any]]
) -> tuple[str, list[Prediction]]:
    """Refit without one group's rows (only the families it touches) and predict them."""
    held = [r for r in rows if cv_key(r, grouping) == held_key]
    fams = {family_of(r.accelerator) for r in held}
    train = [r for r in rows if cv_key(r, grouping) != held_key]
    profiles = fit_profiles(train, only_families=fams, base=full)
    data = {"version": "cv", "profiles": profiles, "global": dict(PRIOR)}
    note = f"  held out {held_key[:90]} ({len(held)} rows; refit {', '.join(sorted(fams))})"
    # only the cross-validation the stated intervals read stores each latency's amplification
    return note, predictions(held, data, amplify=grouping == INTERVAL_GROUPING)


def predictions(
    rows: Sequence[CalRow],
    data: dict[str, Any],
    roofline: bool = True,
    request_overhead_s: float | None = None,
    metrics: Iterable[str] = METRICS,
    amplify: bool = False,
) -> list[Prediction]:
    """Each row's measured `metrics` predicted with the profiles of `data` (optionally with another per-request
    overhead), beside the plain roofline's when `roofline`, and with each latency's amplification when `amplify`
    (one more simulation a row). Rows the model cannot simulate are left out."""
    wanted = set(metrics)
    preds: list[Prediction] = []
    for r in rows:
        prof = profile_for(r.accelerator, profile_key(r), data)
        if request_overhead_s is not None:
            prof = dataclasses.replace(prof, request_overhead_s=request_overhead_s)
        try:
            got = predict_row(r, prof)
            roof = roofline_row(r) if roofline else {}
            amp = amplifications(got, predict_row(r, slower_steps(prof))) if amplify else {}
        except ValueError:
            continue
        for k, v in measured(r).items():
            if k in got and k in wanted:
                preds.append(
                    Prediction(
                        r.row_id,
                        family_of(r.accelerator),
                        r.engine,
                        k,
                        v,
                        got[k],
                        roof.get(k),
                        r.saturated,
                        is_moe(r),
                        amp.get(k, 1.0),
                    )
                )
    return preds


def cross_validate(
    rows: Sequence[CalRow],
    full: dict[str, dict[str, Any]],
    progress: Callable[[str], None] | None = None,
    grouping: str = "source",
    workers: int = 1,
) -> list[Prediction]:
    """Leave-one-group-out: each group's rows predicted by profiles fitted without that group (`grouping`:
    "source" or "study", see `CV_GROUPINGS`). Folds are independent; `workers` > 1 runs them in processes. The
    result does not depend on `workers` (folds are deterministic and collected in key order)."""
    keys = sorted({cv_key(r, grouping) for r in rows})
    preds: list[Prediction] = []

    def collect(results: Iterable[tuple[str, list[Prediction]]]) -> None:
        for note, fold in results:
            preds.extend(fold)
            if progress:
                progress(note)

    if workers > 1 and len(keys) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            collect(pool.map(_fold, repeat(rows), keys, repeat(grouping), repeat(full)))
    else:
        collect(map(_fold, repeat(rows), keys, repeat(grouping), repeat(full)))
    return preds


def cv_table(
    rows: Sequence[CalRow],
    full: dict[str, dict[str, Any]],
    grouping: str,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """One cross-validation's error table (`error_table`), named by its grouping, with every prediction."""
    preds = cross_validate(rows, full, progress, grouping=grouping, workers=workers)
    return {**error_table(preds), "grouping": grouping, "rows": prediction_rows(preds)}


def prediction_rows(preds: Sequence[Prediction]) -> list[dict[str, Any]]:
    """Every cross-validated prediction, for inspection (which rows the model gets wrong, and by how much). A TTFT's
    roofline also gives its regime to the stated intervals (`sizing.perf.calibration.prefill_share`), and a
    latency's amplification puts its error on the intervals' per-unit scale (`sizing.perf.amplification`)."""
    return [
        {
            "row_id": p.row_id,
            "family": p.family,
            "engine": p.engine,
            "metric": p.metric,
            "measured": round(p.measured, 4),
            "predicted": round(p.predicted, 4),
            "roofline": None if p.roofline is None else round(p.roofline, 4),
            "moe": p.moe,
            **({"amplification": round(p.amplification, 3)} if p.metric in AMPLIFIED_METRICS else {}),
        }
        for p in preds
    ]


#: Per-request overheads tried for each source by `ttft_floor` (s): none up to 0.3 s, the most any reference
#: source calls for (optimum-neuron's MoE rows, whose gap is not an overhead at all)
SOURCE_OVERHEAD_GRID = (0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)


@dataclass
class TtftFloor:
    #: every TTFT row predicted by the profiles fitted on every row
    in_sample: list[Prediction]
    #: the same, each source with the per-request overhead that suits its rows best
    own_overhead: list[Prediction]
    #: the overhead each source chose (s)
    overheads: dict[str, float]


def ttft_floor(
    rows: Sequence[CalRow], data: dict[str, Any], grid: Sequence[float] = SOURCE_OVERHEAD_GRID
) -> TtftFloor:
    """How much TTFT error the reference data leave to the model. In sample, rows are predicted by profiles fitted
    on them; cross-validation can only do worse. With its own overhead, each source also gets the one per-request
    cost (API server, client, network; from `grid`) that suits its rows best: the fixed cost a held-out source
    brings and no other source can tell. The drop from in-sample to own-overhead is what the sources' fixed costs
    disagree by; what remains is what the model's mechanisms miss."""
    ttft_rows = [r for r in rows if r.ttft_ms]
    in_sample = predictions(ttft_rows, data, roofline=False, metrics=("ttft",))
    by_source: dict[str, list[CalRow]] = defaultdict(list)
    for r in ttft_rows:
        by_source[r.source].append(r)
    own: list[Prediction] = []
    chosen: dict[str, float] = {}
    for source, srows in sorted(by_source.items()):
        best: tuple[float, float, list[Prediction]] | None = None
        for overhead in grid:
            preds = predictions(srows, data, roofline=False, request_overhead_s=overhead, metrics=("ttft",))
            if not preds:
                break
            score = statistics.median(p.ape for p in preds)
            if best is None or score < best[0]:
                best = (score, overhead, preds)
        if best is not None:
            own += best[2]
            chosen[source] = best[1]
    return TtftFloor(in_sample, own, chosen)


def error_table(preds: Sequence[Prediction]) -> dict[str, Any]:
    """MdAPE and share within +-25% per metric (TTFT, TPOT, saturated throughput, all throughput, e2e) and per
    family, for the calibrated model and the plain roofline."""

    def summary(items: list[Prediction]) -> dict[str, Any]:
        if not items:
            return {"n": 0}
        ape = [p.ape for p in items]
        roof = [p.ape_roofline for p in items]
        return {
            "n": len(items),
            "mdape": round(statistics.median(ape), 4),
            "within_25": round(sum(a <= WITHIN for a in ape) / len(ape), 4),
            "roofline_mdape": round(statistics.median(roof), 4),
            "roofline_within_25": round(sum(a <= WITHIN for a in roof) / len(roof), 4),
        }

    groups: dict[str, list[Prediction]] = {
        "ttft": [p for p in preds if p.metric == "ttft"],
        "tpot": [p for p in preds if p.metric == "tpot"],
        "saturated_throughput": [p for p in preds if p.metric == "throughput" and p.saturated],
        "throughput": [p for p in preds if p.metric == "throughput"],
        "e2e": [p for p in preds if p.metric == "e2e"],
    }
    by_metric = {k: summary(v) for k, v in groups.items()}
    by_family: dict[str, Any] = {}
    for fam in sorted({p.family for p in preds}):
        fp = [p for p in preds if p.family == fam]
        by_family[fam] = {"all": summary(fp)}
        for k, v in groups.items():
            sub = [p for p in v if p.family == fam]
            if sub:
                by_family[fam][k] = summary(sub)
    return {"by_metric": by_metric, "by_family": by_family, "overall": summary(list(preds))}
