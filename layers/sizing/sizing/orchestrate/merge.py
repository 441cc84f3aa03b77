"""Merge measured load-test steps into the estimated architectures, re-rank, and turn the steps into calibration
rows for the estimator.

A measured candidate's capacity is the highest measured load whose every SLO percentile holds; its replicas and
cost are recomputed from that capacity (with the same headroom as the estimate). Architectures that were not
measured keep their estimate; the `measured` field says which is which, and `measured.origin` what measured it:
`endpoint` (a real server) or `twin` (a local twin, which serves at our own model's pace: its figures are
simulated, not measured). `measured.predicted_at_level` is the estimator re-simulated at the load level the block
shows, so predicted and measured figures compare at the same load point; `measured.serving` and
`measured.engine_version` say which configuration was measured.

The architectures are read once, where they enter, into the typed `Architecture` (`sizing.upgrade`: a stored or
older result's missing figures read as unknown); the merge changes typed values (a validated `Measured`, `Cost`,
`Replicas`, `Instances`) and writes each architecture's JSON at the edge: its stored JSON with the fields the merge
changed, dumped, so the run's stored and returned JSON keep their keys and order."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from sizing.base.errors import InvalidInput, NotFound, Problem, SizingError
from sizing.base.serving_config import ServingConfig
from sizing.base.spawn import simulated_ramp_s
from sizing.base.vocabulary import CAPACITY_PHASE, ENDPOINT, TWIN, Origin
from sizing.catalog import Catalog
from sizing.learn.matching import LEVEL_REQUESTS, LEVEL_ROUNDS
from sizing.loadtest.capacity import from_records
from sizing.loadtest.metrics import lockstep_users
from sizing.loadtest.server import serving_differences
from sizing.orchestrate.contracts import CandidateOutcome, StepRecord
from sizing.perf.memory import kv_dtype_bytes
from sizing.perf.replica import replica_of
from sizing.perf.simulator import ClosedLoop, OpenLoop, Replay, simulate
from sizing.perf.step import StepModel
from sizing.plan.answer import pricing_of
from sizing.plan.candidates import HardwareOption
from sizing.plan.cost import project
from sizing.plan.search import DEFAULT_HEADROOM
from sizing.results import Architecture, Cost, Instances, Measured, Percentiles, Replicas, rank_cost
from sizing.results.blocks import LevelOutcome, LoadTarget, PredictedAtLevel, SearchedCapacity
from sizing.upgrade import upgrade_result
from sizing.workload.derived import WorkloadModel, build_model
from sizing.workload.spec import WorkloadSpec

METRICS = ("ttft_ms", "tpot_ms", "e2e_s")
#: What callers may pass as `origin`: `loadtest` is the earlier name of a real server's measurement.
ORIGIN_ALIASES: dict[str, Origin] = {"twin": TWIN, "endpoint": ENDPOINT, "loadtest": ENDPOINT}
#: The calibration rows' own `origin` (sizing.perf.calrows.CalRow): `twin` rows are refused by calibration
#: (sizing.perf.calibration.TWIN_ORIGIN), `loadtest` rows are this product's measurements of real servers.
ROW_ORIGIN: dict[Origin, str] = {TWIN: "twin", ENDPOINT: "loadtest"}
#: Largest closed-loop level re-simulated as given (perf.predict.MAX_SIMULATED_CONCURRENCY): beyond it a replica
#: is long saturated and only the queue grows.
MAX_LEVEL_CONCURRENCY = 4096


def _value(step: StepRecord, metric: str, pct: str) -> float | None:
    dist = step.distribution(metric)
    v: float | None = getattr(dist, pct, None)
    if v is None and pct == "p90":
        v = dist.p95
    return None if v is None else float(v)


def step_meets(step: StepRecord, spec: WorkloadSpec) -> bool:
    if step.requests <= 0:
        return False
    if step.failed > 0.01 * max(step.requests, 1):  # more than 1% errors is not a passing level
        return False
    for metric, pct, limit in spec.slo.targets():
        v = _value(step, metric, pct)
        if v is None or v > limit:
            return False
    return True


def _measured_block(
    steps: list[StepRecord],
    best: StepRecord | None,
    spec: WorkloadSpec,
    origin: Origin = ENDPOINT,
    arch: Architecture | None = None,
    wm: WorkloadModel | None = None,
    cat: Catalog | None = None,
) -> dict[str, Any]:
    """The `measured` block's fields from a candidate's step records (the load generator's own, read as stored),
    in the order the block states them."""
    shown = best or min(steps, key=lambda s: (s.target.concurrency if s.target else None) or 0)
    served = (
        "a local twin (our own model's simulation, not a measurement)" if origin == TWIN else "the endpoint"
    )
    serving = next((s.serving for s in steps if s.serving), None) or (arch.serving if arch else None)
    server = next((s.server_facts for s in steps if s.server_facts), None)
    block: dict[str, Any] = {
        **{m: Percentiles(p50=shown.distribution(m).p50, p95=shown.distribution(m).p95,
                          p99=shown.distribution(m).p99) for m in METRICS},
        "requests_per_s": shown.requests_per_s,
        "output_tokens_per_s": shown.output_tokens_per_s,
        "at": shown.target,
        "capacity_rps": best.requests_per_s if best else 0.0,
        "meets_slo": best is not None,
        "levels": [
            LevelOutcome(target=s.target, requests_per_s=s.requests_per_s, meets_slo=step_meets(s, spec))
            for s in steps
        ],
        "origin": origin,
        "serving": serving,
        "engine_version": next((s.engine_version for s in steps if s.engine_version), None),
        # what the server reported it runs, and where that differs from the serving configuration assumed
        "server": server,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "how": "Locust sweep (closed-loop concurrency levels) of " + served
        + ", per-request TTFT/ITL/e2e from the token stream",
    }  # fmt: skip
    if digest := next((s.trace_digest for s in steps if s.trace_digest), None):
        # a replayed trace: open-loop levels, each the trace time-scaled to its rate
        block["trace_digest"] = digest
        block["how"] = block["how"].replace(
            "closed-loop concurrency levels", "the recorded trace replayed at each rate"
        )
    block["differs"] = serving_differences(
        None if serving is None else serving.model_dump(mode="json"), server, _kv_shape(serving, cat)
    )
    if arch is not None and wm is not None and cat is not None:
        block["predicted_at_level"] = predicted_at_level(
            arch,
            shown.target,
            wm,
            cat,
            prefix_tokens=shown.shared_prefix_tokens,
            group=lockstep_users(shown.lockstep_group),
            warmup_s=shown.warmup_s,
        )
    return block


def _kv_shape(serving: ServingConfig | None, cat: Catalog | None) -> tuple[float, float] | None:
    """The served model's KV bytes a token at one byte an element, and the element's bytes the estimate assumed (None
    where the catalog does not know the model): what the server's cache bytes over its tokens are read against
    (`sizing.loadtest.server.serving_differences`)."""
    if serving is None or cat is None:
        return None
    try:
        at_one_byte = cat.model(serving.model).kv_bytes_per_token(1.0)
    except NotFound:
        return None
    return at_one_byte, kv_dtype_bytes(serving.engine, serving.quantization, serving.kv_cache_dtype)


def _architecture(arch: Architecture | dict[str, Any]) -> Architecture:
    """One architecture read into the typed model (a stored or hand-written one through `sizing.upgrade`)."""
    if isinstance(arch, Architecture):
        return arch
    return upgrade_result({"architectures": [arch]}, "architecture").architectures[0]


def predicted_at_level(
    arch: Architecture | dict[str, Any],
    target: LoadTarget | dict[str, Any] | None,
    wm: WorkloadModel,
    cat: Catalog,
    seed: int = 0,
    prefix_tokens: int = 0,
    group: int = 1,
    warmup_s: float | None = None,
) -> PredictedAtLevel | None:
    """The estimator's TTFT/TPOT/e2e percentiles re-simulated at a measured load level (`target`: closed-loop
    `concurrency`, `users` with `think_time_s`, or an open-loop `rate_rps`) with the workload's token
    distributions on the architecture's serving config, every prompt starting with the `prefix_tokens` the level
    sent (its record's `shared_prefix_tokens`), a closed loop's users in the lock-step groups of `group` the level
    measured (`lockstep_users`), started as the load test started them after its `warmup_s`
    (`sizing.base.spawn`). None when there is no replica to simulate (Bedrock) or no level."""
    arch = _architecture(arch)
    level = LoadTarget.model_validate(target) if isinstance(target, dict) else target
    if level is None or not level.model_fields_set or arch.deployment == "bedrock" or not arch.instance_type:
        return None
    load: ClosedLoop | OpenLoop | Replay
    n = LEVEL_REQUESTS
    if level.rate_rps:
        rate = float(level.rate_rps)
        load = (
            OpenLoop(rate) if wm.replay is None else Replay(rate, wm.replay)
        )  # a trace: as the level sent it
    else:
        users = level.concurrency or level.users
        if not users:
            return None
        c = min(max(1, int(users)), MAX_LEVEL_CONCURRENCY)
        load = ClosedLoop(
            c,
            think_time_s=float(level.think_time_s or 0.0),
            ramp_s=simulated_ramp_s(c, warmup_s, group),
            group=group,
        )
        n = max(LEVEL_REQUESTS, LEVEL_ROUNDS * c)
    try:
        step = StepModel.for_config(replica_of(arch, cat), catalog=cat)
        sim = simulate(
            step,
            load,
            wm.input_tokens,
            wm.output_tokens,
            n_requests=n,
            seed=seed,
            itl=False,
            prefix_tokens=prefix_tokens,
        )
    except (SizingError, ValueError):  # the replica does not fit or cannot be built: nothing to compare
        return None
    digits = {"ttft_ms": 1, "tpot_ms": 2, "e2e_s": 3}

    def stat(metric: str) -> Percentiles:
        st = getattr(sim, metric)
        return Percentiles.model_validate(
            {
                q: None if math.isnan(st.get(q)) else round(st.get(q), digits[metric])
                for q in ("p50", "p95", "p99")
            }
        )

    return PredictedAtLevel(
        ttft_ms=stat("ttft_ms"),
        tpot_ms=stat("tpot_ms"),
        e2e_s=stat("e2e_s"),
        requests_per_s=round(sim.requests_per_s, 4),
        at=level,
    )


def merge_measurements(
    architectures: Sequence[Architecture | dict[str, Any]],
    measured: Sequence[CandidateOutcome | dict[str, Any]],
    steps: Sequence[dict[str, Any]],
    spec: WorkloadSpec,
    cat: Catalog,
    headroom: float = DEFAULT_HEADROOM,
    run_id: str = "",
    origin: str = ENDPOINT,
) -> dict[str, Any]:
    """Architectures with `measured` filled in and re-ranked; calibration rows from every measured step. `origin`:
    `endpoint` for real servers (`loadtest`, its earlier name, is accepted), `twin` for local twins, whose rows
    calibration refuses; it becomes `measured.origin`. The architectures come as stored (JSON, read once into the
    typed model) or typed; they go back as JSON, each its stored JSON with what the merge changed."""
    kind = ORIGIN_ALIASES.get(origin)
    if kind is None:
        raise InvalidInput(
            f"unknown measurement origin '{origin}' (use twin or endpoint)",
            [Problem("origin", f"'{origin}' is not twin or endpoint")],
        )
    docs = [a.model_dump(mode="json") if isinstance(a, Architecture) else dict(a) for a in architectures]
    typed = upgrade_result(
        {"workload": {"model": spec.model}, "architectures": docs}, "run's result"
    ).architectures

    wm = build_model(spec, cat.model(spec.model).id)
    by_candidate, searched = _levels_by_candidate(steps)
    applies, deployed = _applies(measured)
    rows: list[dict[str, Any]] = []
    #: each architecture, typed, with what the merge changed on it (typed values, dumped at the edge)
    out: list[tuple[Architecture, dict[str, Any], dict[str, Any]]] = []
    for a, doc in zip(typed, docs, strict=True):
        changes: dict[str, Any] = {}
        cid = applies.get(a.id)
        recs = by_candidate.get(cid or "", [])
        if cid and recs:
            passing = [r for r in recs if step_meets(r, spec)]
            best = max(passing, key=lambda r: r.requests_per_s or 0) if passing else None
            block = _measured_block(recs, best, spec, kind, a, wm, cat)
            if deployed.get(cid) and deployed[cid] != a.id:
                # the figures belong to what was measured: this row stands on another deployment's load test
                own = deployed[cid]
                block["measured_on"] = own
                block["note"] = (
                    f"measured on the {own.split(':', 1)[0].upper()} deployment of the same hardware ({own}), not on"
                    f" this {a.deployment} one"
                )
            meets = best is not None
            capacity = _searched_capacity(a, searched.get(cid or ""))
            rate = float(best.requests_per_s or 0.0) if best is not None else None
            if capacity is not None:
                block["capacity"] = capacity
                block["capacity_rps"] = capacity.capacity_rps or 0.0
                meets = capacity.capacity_rps is not None
                # the estimate stands where its capacity lies inside the measured interval (noise, not signal)
                rate = None if capacity.consistent_with_estimate else capacity.capacity_rps
            # validated here: a misspelled key fails instead of riding along unread
            changes["measured"] = Measured.model_validate(block)
            changes["meets_slo"] = meets
            if rate is not None and a.deployment != "bedrock":
                changes.update(_reprice(a, float(rate) * (1 - headroom), spec, wm, cat))
            if a.id == next((m_id for m_id, c in applies.items() if c == cid), None):
                rows += calibration_rows(
                    a.model_copy(update=changes), recs, cid, run_id, ROW_ORIGIN[kind], wm, cat
                )
        out.append((a.model_copy(update=changes), doc, changes))
    feasible = sorted((x for x in out if x[0].meets_slo), key=lambda x: rank_cost(x[0]))
    rest = [x for x in out if not x[0].meets_slo]
    ranked = [(x, rank) for rank, x in enumerate(feasible, start=1)] + [(x, 0) for x in rest]
    return {
        "architectures": [_document(doc, {**changes, "rank": rank}) for (a, doc, changes), rank in ranked],
        "calibration_rows": rows,
    }


def _levels_by_candidate(
    steps: Sequence[dict[str, Any]],
) -> tuple[dict[str, list[StepRecord]], dict[str, list[dict[str, Any]]]]:
    """Each candidate's measured levels (typed), and the capacity search's levels (as stored, for
    `from_records`). Each item is the store's measurement: the candidate and the level's record."""
    by_candidate: dict[str, list[StepRecord]] = {}
    searched: dict[str, list[dict[str, Any]]] = {}
    for s in steps:
        record = StepRecord.model_validate(s["record"])
        if record.phase == CAPACITY_PHASE:
            searched.setdefault(s["candidate_id"], []).append(s["record"])
        else:
            by_candidate.setdefault(s["candidate_id"], []).append(record)
    return by_candidate, searched


def _applies(measured: Sequence[CandidateOutcome | dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """Architecture -> the candidate whose measurement applies to it; candidate -> the architecture it deployed
    and load-tested (the first it applies to: the ranked one)."""
    applies: dict[str, str] = {}
    deployed: dict[str, str] = {}
    for outcome in (CandidateOutcome.model_validate(m) for m in measured):
        if outcome.candidate_id is None:
            continue
        for arch_id in outcome.applies_to:
            applies[arch_id] = outcome.candidate_id
            deployed.setdefault(outcome.candidate_id, arch_id)
    return applies, deployed


def _document(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The architecture's JSON after the merge: its stored JSON (`doc`, keys and order kept) with the fields the
    merge changed, each typed value dumped with the keys it was given (as the run has always stored them)."""
    return {
        **doc,
        **{
            k: v.model_dump(mode="json", exclude_unset=True) if isinstance(v, BaseModel) else v
            for k, v in changes.items()
        },
    }


def _reprice(
    a: Architecture, usable: float, spec: WorkloadSpec, wm: WorkloadModel, cat: Catalog
) -> dict[str, Any]:
    """Replicas and cost of the row recomputed from a measured usable rate per replica (the estimate's cost kept
    as `cost_estimated`): the fields that change, typed."""
    tp = int(a.tensor_parallel or 1)
    rpi = int(a.replicas_per_instance or 1)
    hw = HardwareOption(str(a.instance_type), tp, str(a.quantization), a.engine, rpi * tp)
    users = spec.users.total if spec.users else None
    cost = project(wm, usable, hw.replicas_per_instance, pricing_of(cat, wm, hw, a.deployment), users)
    nodes = cost.pop("_nodes")  # the fleet's node counts, beside the bill `project` returns
    priced = Cost.model_validate(cost)
    sched = priced.schedule.replicas_by_hour if priced.schedule is not None else [0]
    return {
        "cost_estimated": a.cost,
        "cost": priced,
        "replicas": Replicas(peak=max(sched), min=min(sched), mean=round(sum(sched) / 24, 2)),
        "instances": Instances(peak=nodes["peak"], min=nodes["min"], mean=round(nodes["mean"], 2)),
    }


def _searched_capacity(arch: Architecture, records: list[dict[str, Any]] | None) -> SearchedCapacity | None:
    """The capacity the run's search found for this row's hardware, with its interval, and whether the estimate's
    own capacity lies inside it: a measurement re-prices a row only when its interval excludes the prediction
    (signal); inside it, the row says "measured, consistent with the estimate" and keeps the estimate's cost
    (noise). None when the run searched nothing for it."""
    if not records:
        return None
    predicted = float(arch.per_replica.rps_slo_limit if arch.per_replica else 0.0)
    est = from_records(records, predicted or 1.0)
    low = est.low_rps if est.low_rps is not None else 0.0
    high = est.high_rps if est.high_rps is not None else math.inf
    consistent = est.capacity_rps is not None and predicted > 0 and low <= predicted <= high
    if consistent and est.low_rps is None and est.high_rps is None:
        verdict = (
            f"measured {est.capacity_rps:g} req/s per replica, but no level decided with confidence: too uncertain"
            " to differ from the estimate, which stands"
        )
    elif consistent:
        verdict = "measured, consistent with the estimate"
    elif est.capacity_rps is None:
        verdict = "no level met the SLOs"
    else:
        verdict = (
            f"measured {est.capacity_rps:g} req/s per replica against {predicted:g} predicted: outside the"
            " interval, so the row is re-priced at the measured capacity"
        )
    return SearchedCapacity.model_validate(
        {
            **est.model_dump(mode="json"),
            "predicted_rps": round(predicted, 4),
            "consistent_with_estimate": consistent,
            "verdict": verdict,
        }
    )


def calibration_rows(
    arch: Architecture | dict[str, Any],
    records: Sequence[StepRecord | dict[str, Any]],
    candidate_id: str,
    run_id: str = "",
    origin: str = "loadtest",
    wm: WorkloadModel | None = None,
    cat: Catalog | None = None,
) -> list[dict[str, Any]]:
    """One normalised calibration row (sizing.perf.calrows.CalRow format) per measured concurrency level: the
    deployment as served (its max_model_len and max_num_seqs), the lengths as drawn (measured means, the workload's
    lognormal spread), the load and what was measured. Row ids and the source name the run, so rows of several
    runs of one architecture stay apart. A managed service (Bedrock) runs on hardware it does not name: no rows.
    Nor does a level whose prompts shared a prefix that the server cached: the reference fit simulates its rows
    without a prefix cache (`sizing.perf.calrows.CalRow` has no such column), so the cache's saving would read
    as the estimator's error. Such levels still feed the team's refit and answer as measured configurations
    (`sizing.learn.levels`), which simulate them with their prefix."""
    arch = _architecture(arch)
    if arch.deployment == "bedrock" or not arch.accelerator:
        return []
    serving = arch.serving
    max_model_len = serving.max_model_len if serving is not None else None
    if max_model_len is None and cat is not None:
        max_model_len = cat.model(arch.model).max_position_embeddings
    sigmas: dict[str, float] = {}
    if wm is not None:
        for side, dist in (("input", wm.input_tokens), ("output", wm.output_tokens)):
            if dist.kind == "lognormal":
                sigmas[f"{side}_sigma"] = dist.sigma
    run = f"{run_id[:8]}-" if run_id else ""
    rows = []
    for r in (StepRecord.model_validate(x) if isinstance(x, dict) else x for x in records):
        conc = r.target.concurrency if r.target is not None else None
        if not conc or not r.requests:
            continue
        cached = r.serving or serving
        if r.shared_prefix_tokens and cached is not None and cached.enable_prefix_caching:
            continue
        # what the server reported it runs wins over what the estimate assumed: a figure belongs to what was measured
        facts = r.server_facts
        group = lockstep_users(r.lockstep_group)
        rows.append(
            {
                "row_id": f"LT-{run}{candidate_id}-{int(conc)}",
                "source": f"llm-sizing load test {arch.id}" + (f" (run {run_id})" if run_id else ""),
                "study": f"loadtest:{arch.id}",
                "engine": arch.engine,
                "accelerator": arch.accelerator,
                "tp": arch.tensor_parallel,
                "model": arch.catalog_model or arch.model,
                "quantization": arch.quantization,
                "input_tokens": r.input_tokens or 1,
                "output_tokens": r.output_tokens or 1,
                **sigmas,
                "load": "concurrency",
                "load_value": conc,
                # users the level found in lock-step: the fit simulates them in groups of the size measured (the
                # CPU engine's 64-stream levels formed groups of 11-13 where its budget admits 15)
                "start": "together" if group > 1 else "spread",
                "lockstep_group": group if group > 1 else None,
                "max_model_len": (facts.max_model_len if facts else None) or max_model_len,
                "max_num_seqs": (facts.max_num_seqs if facts else None)
                or (serving.max_num_seqs if serving else None),
                "kv_cache_tokens": facts.kv_cache_tokens if facts else None,
                "ttft_ms": r.ttft_ms.mean,
                "tpot_ms": r.tpot_ms.mean,
                "e2e_s": r.e2e_s.mean,
                "output_tokens_per_s": r.output_tokens_per_s,
                "requests_per_s": r.requests_per_s,
                # the warm-up its users started in: the fit starts the simulated users so (`sizing.base.spawn`)
                "warmup_s": r.warmup_s,
                "origin": origin,
            }
        )
    return rows
