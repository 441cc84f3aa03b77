"""Shared pieces of the HTML report: the number formats, the result being reported (`Page`) and its figures
(`Num`), and the helpers every section reads the result with."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from sizing.answer import answer_rows
from sizing.base.strict import Lenient
from sizing.base.text import ORIGIN_LABELS
from sizing.base.vocabulary import ENDPOINT, TWIN  # what served a load test's figures (`measured.origin`)
from sizing.learn.loop import RunLearning
from sizing.orchestrate.contracts import FailedCandidate, StepRecord
from sizing.results import Architecture, EstimateResult, Measured
from sizing.results.blocks import LevelOutcome
from sizing.upgrade import twin_run
from sizing.workload.spec import PercentileBounds

METRIC_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_s": "end-to-end"}
#: The latency metrics an SLO bounds, in the order the SLO states them.
SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_s")
METRIC_UNITS = {"ttft_ms": "ms", "tpot_ms": "ms", "e2e_s": "s"}
#: Percentile shown for a metric the SLO does not bound (the one capacity planning usually quotes).
DEFAULT_PERCENTILE = "p95"
#: Percentiles the planner reports; an SLO on another (p90) is read at the next stricter one, as the planner does.
REPORTED_PERCENTILES = ("p50", "p95", "p99")
#: A latency chart's y axis stops at the larger of these multiples of the SLO limit and of the highest operating
#: (or measured) point: past saturation latency grows without bound and would flatten the part that matters,
#: while the curve's crossing of the SLO line stays in view.
Y_CAP_SLO_FACTOR = 1.6
Y_CAP_POINT_FACTOR = 2.0
#: Architectures labelled in the cost/latency chart: the Pareto front, at most this many (labels overlap beyond).
MAX_PARETO_LABELS = 6
#: Cost axis turns logarithmic when the dearest architecture costs this many times the cheapest.
LOG_COST_RATIO = 8.0
KIND_LABELS = {
    "memory": "do not fit in memory",
    "slo": "miss an SLO",
    "dominated": "cannot beat the ranked ones on cost (bound)",
    "unsupported": "unsupported combination",
    "quota": "over a Bedrock quota",
    "budget": "over budget",
}
BREAKDOWN_LABELS = {
    "compute_usd_per_month": "Compute (instances)",
    "control_plane_usd_per_month": "EKS control plane",
    "load_balancer_usd_per_month": "Load balancer",
    "input_usd_per_month": "Input tokens",
    "output_usd_per_month": "Output tokens",
}

#: The hours of a day, as the hourly charts label them.
HOURS = [f"{h:02d}" for h in range(24)]

Fmt = Callable[[float], str]


# --- formatting -----------------------------------------------------------------------------------------------
def usd(v: float) -> str:
    return f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}"


def ms(v: float) -> str:
    return f"{v:,.0f} ms" if abs(v) >= 100 else f"{v:,.1f} ms"


def sec(v: float) -> str:
    return f"{v:,.2f} s" if abs(v) < 100 else f"{v:,.1f} s"


def rps(v: float) -> str:
    return f"{v:,.2f} req/s"


def count(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def two(v: float) -> str:
    return f"{v:,.2f}"


def tenths(v: float) -> str:
    return f"{v:,.1f}"


def token_count(v: float) -> str:
    return f"{v:,.0f}"


def pct(v: float) -> str:
    return f"{v:,.1f}%"


def share(v: float) -> str:
    """A fraction as a percentage (0.31 -> 31%)."""
    return f"{v:.0%}"


def fine_share(v: float) -> str:
    """A small fraction as a percentage that does not round it away (0.0003 -> 0.03%)."""
    return f"{v * 100:.2f}%" if abs(v) < 0.01 else f"{v * 100:.1f}%"


def plain(v: float) -> str:
    return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"


UNIT_FMT: dict[str, Fmt] = {"ms": ms, "s": sec}
#: The calibration's expected-error key of a predicted latency metric (the estimator states none for e2e).
EXPECTED_ERROR_KEY = {"ttft_ms": "ttft", "tpot_ms": "tpot"}


def lookup(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (`architectures.0.cost.usd_per_month`) of the result; None if absent. A key that
    itself holds a dot (`headroom.latency` is keyed by `ttft_ms.p95`) is found too."""
    return _walk(result, path.split("."))


def _walk(cur: Any, parts: list[str]) -> Any:
    if not parts:
        return cur
    if isinstance(cur, list):
        try:
            return _walk(cur[int(parts[0])], parts[1:])
        except (ValueError, IndexError):
            return None
    if isinstance(cur, dict):
        for n in range(1, len(parts) + 1):
            key = ".".join(parts[:n])
            if key in cur:
                found = _walk(cur[key], parts[n:])
                if found is not None:
                    return found
        return None
    return None


@dataclass(frozen=True, slots=True)
class Num:
    """A figure of the result as the page prints it (`macros.html` `n`): tagged with its path and exact value, or
    a grey placeholder (`missing`) when the result has no finite number there."""

    path: str
    value: float | None
    text: str = ""
    scale: float = 1.0
    missing: str = "—"

    @property
    def value_repr(self) -> str:
        return repr(self.value)

    @property
    def scale_text(self) -> str:
        return f"{self.scale:g}"


#: The grey dash of a cell the result has nothing for.
MISSING = Num("", None)

Span = tuple[Num, ...]


class RunEnvelope(Lenient):
    """What a run's result carries beside the estimate (`sizing.report.run.run_result`): the run's id, the
    candidates that failed, and what the learning loop did."""

    run_id: str | None = None
    failed: list[FailedCandidate] = Field(default_factory=list)
    learning: RunLearning | None = None


class Page:
    """The result being reported: its JSON (`r`, whose figures `n()` takes, tagged with their paths), the same
    result typed (`typed`, `sizing.upgrade`), a run's envelope typed (`run`) and its ranked architectures' rows
    (`rows`, `sizing.answer`)."""

    def __init__(self, result: dict[str, Any], typed: EstimateResult):
        self.r = result
        self.typed = typed
        self.run = RunEnvelope.model_validate(result)
        #: the run load-tested local twins (what figures recorded before `measured.origin` came from)
        self.twin_run = twin_run(result)
        self.rows = answer_rows(typed, twin_run=self.twin_run)

    def n(self, path: str, fmt: Fmt = plain, missing: str = "—", scale: float = 1.0) -> Num:
        """`scale`: the text shows the value times this (`share` shows a fraction as a percentage: 100)."""
        v = lookup(self.r, path)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return Num(path, None, missing=missing)
        return Num(path, v, fmt(v), scale, missing)

    def num(self, path: str, fmt: Fmt = plain, **kw: Any) -> Num | None:
        """The figure at `path`, or None when the result has no number there."""
        return self.n(path, fmt, **kw) if isinstance(lookup(self.r, path), int | float) else None


# --- helpers --------------------------------------------------------------------------------------------------
def slo_targets(result: EstimateResult) -> list[tuple[str, str, float]]:
    """(metric, percentile, limit) for every SLO target in the result's workload block."""
    slo = result.workload.slo
    if slo is None:
        return []
    out = []
    for metric in SLO_METRICS:
        bounds: PercentileBounds | None = getattr(slo, metric)
        if bounds is not None:
            out += [(metric, p, float(limit)) for p, limit in bounds.items()]
    return out


def shown_percentile(result: EstimateResult, metric: str) -> str:
    """The percentile the SLO bounds for `metric` (the highest when several), else p95."""
    pcts = [p for m, p, _ in slo_targets(result) if m == metric]
    if not pcts:
        return DEFAULT_PERCENTILE
    best = max(pcts, key=lambda p: float(p[1:]))
    return best if best in REPORTED_PERCENTILES else DEFAULT_PERCENTILE


def slo_limit(result: EstimateResult, metric: str, percentile: str) -> float | None:
    for m, p, limit in slo_targets(result):
        if m == metric and (p == percentile or (p not in REPORTED_PERCENTILES and percentile == "p95")):
            return limit
    return None


def short_label(a: Architecture) -> str:
    """`p5.48xlarge TP8 fp8 vllm (eks)`, `Bedrock <model id>`; the id when the parts are missing."""
    if a.deployment == "bedrock":
        return f"Bedrock {(a.bedrock.model_id if a.bedrock is not None else '') or a.id.split(':', 1)[-1]}"
    parts = (a.instance_type, a.tensor_parallel, a.quantization, a.engine)
    if not all(parts):
        return a.id
    return f"{parts[0]} TP{parts[1]} {parts[2]} {parts[3]} ({a.deployment})"


def feasible(a: Architecture) -> bool:
    """In the ranking: meets its SLOs (a run lists measured failures after the ranking, with rank 0)."""
    return a.meets_slo and a.rank != 0


def winner_index(result: EstimateResult) -> int | None:
    """Index of the chosen architecture: the best-ranked one that meets the SLOs."""
    return next((i for i, a in enumerate(result.architectures) if feasible(a)), None)


def was_measured(a: Architecture) -> bool:
    """The architecture carries a load test's block (an empty block says nothing)."""
    return a.measured is not None and a.measured != Measured()


def measured_origin(a: Architecture, twin_run: bool) -> str | None:
    """`twin` or `endpoint` for an architecture with load-test figures, None without. `measured.origin` says;
    without it, a run of local twins (`twin_run`, or figures that say they came from a twin) is a twin's."""
    m = a.measured
    if not was_measured(a) or m is None:
        return None
    if m.origin is not None:
        return m.origin
    if twin_run or TWIN in (m.how or "").lower():
        return TWIN
    return ENDPOINT


def origin_label(a: Architecture, twin_run: bool) -> str:
    """ "measured" or "simulated (twin)" for the architecture's load-test figures."""
    return ORIGIN_LABELS[measured_origin(a, twin_run) or ENDPOINT]


def origin_labels(result: EstimateResult, twin_run: bool) -> list[str]:
    """The labels of every architecture's load-test figures, each once: ["simulated (twin)"], ["measured"], ..."""
    out: list[str] = []
    for a in result.architectures:
        o = measured_origin(a, twin_run)
        if o is not None and ORIGIN_LABELS[o] not in out:
            out.append(ORIGIN_LABELS[o])
    return out


def _str(v: Any) -> str:
    """A text of the result; "" for anything else."""
    return v if isinstance(v, str) and v else ""


def _levels_signature(levels: Sequence[LevelOutcome]) -> tuple[tuple[str, float], ...]:
    """What identifies a candidate's sweep: its load targets and the throughput each served, in order."""
    sig = []
    for lv in levels:
        target = lv.target.model_dump() if lv.target is not None else {}
        key = ",".join(f"{k}={v:g}" for k, v in sorted(target.items()))
        sig.append((key, round(float(lv.requests_per_s or 0.0), 3)))
    return tuple(sorted(sig))


class _Named(Lenient):
    """Whom a measurement belongs to: the store's item names its candidate (and holds the level as `record`); a
    bare record may name its candidate or architecture itself."""

    candidate_id: str | None = None
    architecture_id: str | None = None
    record: dict[str, Any] | None = None


def measured_steps(
    measurements: Sequence[dict[str, Any]], result: EstimateResult
) -> dict[str, list[StepRecord]]:
    """Load-test step records by architecture id.

    Takes bare step records or the store's measurement items (`{candidate_id, record: {...}}`). A candidate id
    that is an architecture id is used as is; a run's own ids (c0, c1 ...) are matched to the architecture whose
    `measured.levels` is the same sweep; a record naming no candidate belongs to the measured architecture (or
    the best-ranked one). Unmatched candidates keep their own id."""
    archs = result.architectures
    ids = {a.id for a in archs}
    default = next((a.id for a in archs if was_measured(a)), archs[0].id if archs else "")
    by_candidate: dict[str, list[StepRecord]] = {}
    for m in measurements:
        item = _Named.model_validate(m)
        raw = item.record if item.record is not None else m
        cid = item.candidate_id or _Named.model_validate(raw).candidate_id or item.architecture_id or default
        by_candidate.setdefault(cid, []).append(StepRecord.model_validate(raw))
    signatures: dict[tuple[tuple[str, float], ...], str] = {}
    for a in archs:
        levels = a.measured.levels if a.measured is not None else []
        if levels:
            signatures.setdefault(_levels_signature(levels), a.id)
    out: dict[str, list[StepRecord]] = {}
    for cid, recs in by_candidate.items():
        outcomes = [LevelOutcome(target=r.target, requests_per_s=r.requests_per_s) for r in recs]
        arch_id = cid if cid in ids else signatures.get(_levels_signature(outcomes), cid)
        out.setdefault(arch_id, []).extend(recs)
    return out


def _floats(values: Any) -> list[float]:
    """Numbers of a list, 0 for gaps; [] when it is not a list."""
    if not isinstance(values, list):
        return []
    return [float(v) if isinstance(v, int | float) else 0.0 for v in values]


def _span(pg: Page, path: str) -> Span:
    """`min–peak` of a {min, peak} block, or one figure when they are equal."""
    lo, hi = lookup(pg.r, path + ".min"), lookup(pg.r, path + ".peak")
    if lo == hi:
        return (pg.n(path + ".peak", count),)
    return (pg.n(path + ".min", count), pg.n(path + ".peak", count))


# --- sections: each returns the values its template (`templates/<template>`) prints -----------------------------
Section = dict[str, Any]


def _section(template: str, **values: Any) -> Section:
    return {"template": template, **values}


def _metric_name(target: str) -> tuple[str, str]:
    """`ttft_ms.p95` -> ("TTFT", "p95")."""
    metric, q = target.split(".", 1)
    return METRIC_NAMES.get(metric, metric), q
