"""Measured levels as items: each load level a run measured, with everything that decides what it measured.

Keys (the run's partition, plus GSI1 to query by hardware family and model across runs):
  measured level  PK=RUN#{run_id}  SK=LEVEL#{candidate}#{concurrency:06d}
                  GSI1PK=MEASURED (a real endpoint) or MEASURED#twin (a local twin)
                  GSI1SK={family}#{model}#{recorded_at}#{run_id}#{candidate}#{concurrency}

A twin's level is stored as a twin level (its own GSI1 partition): the refit reads only `MEASURED`, so a twin,
which serves at the estimator's own pace, never calibrates anything. Levels carry no TTL: they are the team's
calibration data (the raw per-step records beside them expire after 90 days).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator

from sizing.base import table
from sizing.base.errors import SizingError
from sizing.base.serving_config import ServerFacts, serving_key
from sizing.base.spawn import simulated_ramp_s
from sizing.base.strict import Lenient, Strict
from sizing.base.vocabulary import CAPACITY_PHASE
from sizing.catalog import load_catalog
from sizing.learn.matching import LEVEL_REQUESTS, LEVEL_ROUNDS
from sizing.loadtest.metrics import Distribution, lockstep_users
from sizing.loadtest.stepsample import StepsSample
from sizing.orchestrate.contracts import CandidateOutcome, StepRecord
from sizing.perf.calibration import PROFILE_PATH, family_of, load_profiles, profile_for
from sizing.perf.config import HardwareConfig
from sizing.perf.replica import replica_of
from sizing.perf.simulator import ClosedLoop, simulate
from sizing.perf.step import StepModel
from sizing.results import Architecture
from sizing.store.codec import from_item, to_item
from sizing.store.items import now_iso
from sizing.upgrade import upgrade_result

REAL_INDEX_PK = table.MEASURED
TWIN_INDEX_PK = table.MEASURED_TWIN
INDEX = table.INDEX
#: Figures kept per latency metric.
STATS = ("mean", "p50", "p95", "p99")
#: The refit's residuals: metric -> the figure it compares (predicted with measured).
RESIDUALS = (
    ("ttft", "ttft_ms", "mean"),
    ("tpot", "tpot_ms", "mean"),
    ("throughput", "output_tokens_per_s", None),
)


class Deployment(Strict):
    """What a stored measurement ran on: the catalog model (an alias names the same weights), the hardware, the
    engine and, where recorded, the serving configuration."""

    model: str = Field(description="the catalog model the estimate used")
    family: str
    accelerator: str
    instance_type: str
    tensor_parallel: int
    quantization: str
    engine: str
    serving: dict[str, Any] | None = None

    def config(self, cat: Any, server_facts: ServerFacts | None = None) -> HardwareConfig:
        """The deployment as the estimator models it: its serving configuration where it was recorded, else the
        hardware with the engine's defaults (`replica_of`'s reading of an architecture), with what the server
        reported it runs (`as_served`)."""
        cfg = replica_of(
            {
                "model": self.model,
                "instance_type": self.instance_type,
                "tensor_parallel": self.tensor_parallel,
                "quantization": self.quantization,
                "engine": self.engine,
                "serving": self.serving,
            },
            cat,
        )
        return as_served(cfg, server_facts)


class MeasuredLevel(Deployment):
    """One measured load level of one run's candidate."""

    run_id: str
    candidate_id: str
    level: int = Field(ge=1, description="closed-loop concurrency")
    recorded_at: str = Field(default_factory=now_iso)
    origin: Literal["endpoint", "twin"]
    architecture_id: str
    serving_key: str
    engine_version: str | None = None
    served_model: str | None = None
    input_tokens: float = Field(gt=0, description="mean prompt tokens drawn")
    output_tokens: float = Field(gt=0, description="mean output tokens drawn")
    shared_prefix_tokens: int = Field(
        default=0, ge=0, description="tokens every prompt of the level started with, the same in all requests"
    )
    input_sigma: float | None = None
    output_sigma: float | None = None
    lockstep_group: int = Field(
        default=1,
        ge=1,
        description="users per lock-step group the level was re-simulated with (1: users at random phases)",
    )
    warmup_s: float | None = Field(
        default=None,
        ge=0,
        description="the warm-up its users started in, re-simulated so (sizing.base.spawn); None: stored before"
        " levels kept it",
    )
    requests: int = 0
    errors: int = 0
    #: metric -> statistics (ttft_ms, tpot_ms, e2e_s: mean/p50/p95/p99) plus output_tokens_per_s, requests_per_s
    measured: dict[str, Any]
    #: the same, predicted at this level with the reference profile alone (the refit's baseline)
    predicted: dict[str, Any]
    reference_version: str

    @property
    def level_id(self) -> str:
        return f"{self.run_id[:8]}-{self.candidate_id}-{self.level}"

    def keys(self) -> dict[str, str]:
        return {
            **table.level_key(self.run_id, self.candidate_id, self.level),
            table.GSI1PK: TWIN_INDEX_PK if self.origin == "twin" else REAL_INDEX_PK,
            table.GSI1SK: f"{self.family}#{self.model}#{self.recorded_at}#{self.run_id}#{self.candidate_id}"
            f"#{self.level}",
        }

    @property
    def measured_figures(self) -> LevelFigures:
        return LevelFigures.model_validate(self.measured)

    @property
    def predicted_figures(self) -> LevelFigures:
        return LevelFigures.model_validate(self.predicted)

    def figures(self) -> dict[str, tuple[float, float]]:
        """metric -> (predicted, measured) of the means (the refit's residuals)."""
        predicted, measured = self.predicted_figures, self.measured_figures
        out: dict[str, tuple[float, float]] = {}
        for metric, key, stat in RESIDUALS:
            p, m = predicted.value(key, stat), measured.value(key, stat)
            if p is not None and m is not None:
                out[metric] = (p, m)
        return out


class LevelFigures(Lenient):
    """A level item's figures as it states them (`MeasuredLevel.measured`, and `predicted` at the same level): per
    latency metric its mean and percentiles (`STATS`), and the throughput. Read only: the item keeps the JSON it was
    stored with."""

    ttft_ms: Distribution = Field(default_factory=Distribution)
    tpot_ms: Distribution = Field(default_factory=Distribution)
    e2e_s: Distribution = Field(default_factory=Distribution)
    output_tokens_per_s: float | None = None
    requests_per_s: float | None = None

    @field_validator("ttft_ms", "tpot_ms", "e2e_s", mode="before")
    @classmethod
    def _none_is_unknown(cls, value: Any) -> Any:
        return {} if value is None else value

    def value(self, key: str, stat: str | None = None) -> float | None:
        """The figure `key` (a latency metric's `stat`; a throughput's with `stat` None), where the level states
        one above 0."""
        v = getattr(self, key)
        if stat is not None:
            v = getattr(v, stat) if isinstance(v, Distribution) else None
        return float(v) if isinstance(v, int | float) and v > 0 else None


class Refused(BaseModel):
    """A measured level not stored, and why."""

    candidate_id: str
    level: int | None
    reason: str


def _models_match(asked: str, served: str | None, cat: Any) -> bool:
    if served is None:
        return True  # the server does not say (Bedrock, SageMaker, a proxy): nothing to contradict
    names = {s.strip() for s in served.split(",") if s.strip()}
    if asked in names:
        return True
    try:
        want = cat.model(asked).id
    except Exception:  # a model the catalog does not know: names must agree as written
        return False
    for n in names:
        try:
            if cat.model(n).id == want:
                return True
        except Exception:  # this served name is not a catalog model
            continue
    return False


def _stats(dist: Distribution) -> dict[str, float | None]:
    return {k: getattr(dist, k) for k in STATS}


def levels_from_run(
    architectures: Sequence[Architecture | dict[str, Any]],
    measured: Sequence[CandidateOutcome | dict[str, Any]],
    steps: Sequence[dict[str, Any]],
    run_id: str,
    origin: Literal["endpoint", "twin"],
    wm: Any,
    cat: Any,
) -> tuple[list[MeasuredLevel], list[Refused]]:
    """The run's measured levels as items (one per closed-loop level of each measured candidate), and those
    refused with the reason: a server reporting another model than the run asked for, a level without a
    successful request, a managed service (Bedrock runs on hardware it does not name). `architectures`: the
    run's ranked answers (typed, or their JSON, read by `sizing.upgrade`); `measured`: the Map's outcomes;
    `steps`: the stored measurements (`candidate_id` and the level's `record`, read as a `StepRecord`)."""
    by_candidate: dict[str, list[StepRecord]] = {}
    for s in steps:
        by_candidate.setdefault(s["candidate_id"], []).append(StepRecord.model_validate(s["record"]))
    arch_of = {a.id: a for a in _answers(architectures)}
    version = str(load_profiles(str(PROFILE_PATH)).get("version", "none"))
    out: list[MeasuredLevel] = []
    refused: list[Refused] = []
    for outcome in (CandidateOutcome.model_validate(m) if isinstance(m, dict) else m for m in measured):
        cid = outcome.candidate_id
        arch = next((arch_of[i] for i in outcome.applies_to if i in arch_of), None)
        if not cid or arch is None or outcome.status != "MEASURED":
            continue
        if arch.deployment == "bedrock" or not arch.accelerator:
            refused.append(
                Refused(candidate_id=cid, level=None, reason="a managed service names no hardware")
            )
            continue
        asked = arch.model or ""
        for rec in by_candidate.get(cid, []):
            if rec.phase == CAPACITY_PHASE:
                continue  # the capacity search's Poisson levels: the merge reads them, the refit learns closed loops
            conc = rec.target.concurrency if rec.target is not None else None
            level = int(conc) if conc else None
            served = rec.served_model
            # a server that serves the run's model under another name the user gave (--served-model): the load
            # test sent that name, and the server listed it
            declared = bool(rec.served_as) and rec.served_as != asked
            if not declared and not _models_match(asked, served, cat):
                refused.append(
                    Refused(
                        candidate_id=cid,
                        level=level,
                        reason=f"the server reports model '{served}', the run asked for '{asked}': its figures"
                        " are not a measurement of this configuration",
                    )
                )
                continue
            errors = rec.failed
            if not level or rec.requests - errors <= 0:
                refused.append(Refused(candidate_id=cid, level=level, reason="no successful request"))
                continue
            prefix = rec.shared_prefix_tokens
            group = lockstep_users(rec.lockstep_group)
            predicted = predict_level(arch, level, wm, cat, prefix, rec.server_facts, group, rec.warmup_s)
            if predicted is None:
                refused.append(
                    Refused(candidate_id=cid, level=level, reason="the estimator cannot simulate it")
                )
                continue
            config = rec.serving or arch.serving
            serving = None if config is None else config.model_dump(mode="json")
            model = cat.model(arch.catalog_model or asked).id
            sigmas = {
                f"{side}_sigma": dist.sigma
                for side, dist in (("input", wm.input_tokens), ("output", wm.output_tokens))
                if dist.kind == "lognormal"
            }
            out.append(
                MeasuredLevel(
                    run_id=run_id,
                    candidate_id=cid,
                    level=level,
                    origin=origin,
                    architecture_id=arch.id,
                    model=model,
                    family=family_of(arch.accelerator),
                    accelerator=arch.accelerator,
                    instance_type=arch.instance_type or "",
                    tensor_parallel=int(arch.tensor_parallel or 1),
                    quantization=str(arch.quantization),
                    engine=str(arch.engine),
                    serving=serving,
                    # keyed by the catalog model (an alias names the same weights)
                    serving_key=serving_key({**(serving or {}), "model": model}),
                    engine_version=rec.engine_version,
                    served_model=served,
                    input_tokens=float(rec.input_tokens or wm.input_tokens.mean),
                    output_tokens=float(rec.output_tokens or wm.output_tokens.mean),
                    shared_prefix_tokens=prefix,
                    **sigmas,
                    lockstep_group=group,
                    warmup_s=rec.warmup_s,
                    requests=rec.requests,
                    errors=errors,
                    measured={
                        **{k: _stats(rec.distribution(k)) for k in ("ttft_ms", "tpot_ms", "e2e_s")},
                        "output_tokens_per_s": rec.output_tokens_per_s,
                        "requests_per_s": rec.requests_per_s,
                    },
                    predicted=predicted,
                    reference_version=version,
                )
            )
    return out, refused


def _answers(architectures: Sequence[Architecture | dict[str, Any]]) -> list[Architecture]:
    """The run's answers typed: their JSON read once by `sizing.upgrade` (what an older result lacks, unknown)."""
    docs = [a for a in architectures if isinstance(a, dict)]
    typed = upgrade_result({"architectures": docs}, "run's answers").architectures if docs else []
    return [a for a in architectures if isinstance(a, Architecture)] + typed


def predict_level(
    arch: Architecture | dict[str, Any],
    concurrency: int,
    wm: Any,
    cat: Any,
    prefix_tokens: int = 0,
    server_facts: ServerFacts | None = None,
    group: int = 1,
    warmup_s: float | None = None,
) -> dict[str, Any] | None:
    """The reference profile's prediction (no team correction) of a closed-loop level with the workload's token
    distributions on the architecture's serving config: the refit's baseline. `prefix_tokens`: the prefix every
    prompt of the level shared (the step record's `shared_prefix_tokens`), read from the prefix cache where the
    configuration caches prefixes. `server_facts`: what the measured server reported it runs
    (`ServerFacts`): its own KV capacity, context and batch limit replace the assumed ones. `group`: the users'
    lock-step groups the level measured (`sizing.loadtest.metrics.lockstep_users`); `warmup_s`: the warm-up its
    users started in (`sizing.base.spawn`)."""
    try:
        cfg = as_served(replica_of(arch, cat), server_facts)
        acc = cfg.parts(cat).accelerator.id
        profile = profile_for(acc, cfg.engine, load_profiles(str(PROFILE_PATH)))
        step = StepModel.for_config(cfg, profile=profile, catalog=cat)
        sim = simulate_closed(
            step, concurrency, group, wm.input_tokens, wm.output_tokens, prefix_tokens, warmup_s
        )
    except (ValueError, KeyError, ArithmeticError):
        return None
    except Exception as exc:  # a SizingError (does not fit, unknown instance): nothing to compare with
        if isinstance(exc, SizingError):
            return None
        raise

    def stat(metric: str) -> dict[str, float | None]:
        st = getattr(sim, metric)
        vals = {"mean": st.mean, **{q: st.get(q) for q in ("p50", "p95", "p99")}}
        return {k: None if v is None or math.isnan(v) else round(float(v), 4) for k, v in vals.items()}

    return {
        **{m: stat(m) for m in ("ttft_ms", "tpot_ms", "e2e_s")},
        "output_tokens_per_s": round(sim.output_tokens_per_s, 3),
        "requests_per_s": round(sim.requests_per_s, 5),
    }


def simulate_closed(
    step: StepModel,
    concurrency: int,
    group: int,
    input_dist: Any,
    output_dist: Any,
    prefix_tokens: int = 0,
    warmup_s: float | None = None,
) -> Any:
    """A measured closed-loop level simulated as the refit compares it: enough requests for the level's rounds
    (`LEVEL_REQUESTS`, `LEVEL_ROUNDS`), one seed, no inter-token bookkeeping; its users started as the load test
    started them where the level states its warm-up (`sizing.base.spawn.simulated_ramp_s`)."""
    c = max(1, int(concurrency))
    return simulate(
        step,
        ClosedLoop(c, ramp_s=simulated_ramp_s(c, warmup_s, group), group=group),
        input_dist,
        output_dist,
        n_requests=max(LEVEL_REQUESTS, LEVEL_ROUNDS * c),
        seed=0,
        itl=False,
        prefix_tokens=prefix_tokens,
    )


def as_served(cfg: HardwareConfig, server_facts: ServerFacts | None) -> HardwareConfig:
    """`cfg` with what the measured server reported it runs (`ServerFacts`): its own KV capacity, context and batch
    limit replace the assumed ones."""
    facts = server_facts or ServerFacts(endpoint="")
    reported = {
        "kv_cache_tokens": facts.kv_cache_tokens,
        "max_model_len": facts.max_model_len,
        "max_num_seqs": facts.max_num_seqs,
    }
    served: dict[str, Any] = {key: v for key, v in reported.items() if v is not None and v > 0}
    return replace(cfg, **served) if served else cfg


class LevelSteps(Deployment):
    """One measured load level's engine steps (`StepsSample`), with the deployment they ran on: what the refit
    fits the step time's factors to (`sizing.learn.stepcorrection`). Every level of a real endpoint's run keeps
    one, the capacity search's open-loop levels too: a step is a step whatever sent its requests, and those levels
    run the engine fuller than the closed loops do."""

    run_id: str
    candidate_id: str
    n: int = Field(ge=0, description="the level's place among the candidate's measured levels")
    phase: str = Field(description="`levels` (the closed-loop sweep) or the capacity search's phase")
    concurrency: int | None = Field(default=None, description="a closed-loop level's concurrency")
    rate_rps: float | None = Field(default=None, description="an open-loop level's arrival rate")
    recorded_at: str = Field(default_factory=now_iso)
    server_facts: ServerFacts | None = None
    sample: StepsSample

    def keys(self) -> dict[str, str]:
        return {
            **table.steps_key(self.run_id, self.candidate_id, self.n),
            table.GSI1PK: table.MEASURED_STEPS,
            table.GSI1SK: f"{self.family}#{self.model}#{self.recorded_at}#{self.run_id}#{self.candidate_id}"
            f"#{self.n:03d}",
        }

    def measures(self, level: MeasuredLevel) -> bool:
        """Whether these are the steps of the closed-loop `level`."""
        return (
            self.run_id == level.run_id
            and self.candidate_id == level.candidate_id
            and self.phase != CAPACITY_PHASE
            and self.concurrency == level.level
        )

    def steps_config(self, cat: Any) -> HardwareConfig:
        """The deployment the steps ran on, as the server reported it."""
        return self.config(cat, self.server_facts)


def steps_from_run(
    architectures: Sequence[Architecture | dict[str, Any]],
    levels: Sequence[MeasuredLevel],
    steps: Sequence[dict[str, Any]],
) -> list[LevelSteps]:
    """The engine steps of every level (closed loops and the capacity search) of the candidates whose closed-loop
    `levels` were stored: the measured server's steps, with its deployment."""
    arch_of = {a.id: a for a in _answers(architectures)}
    first = {lv.candidate_id: lv for lv in levels}
    out: list[LevelSteps] = []
    counts: dict[str, int] = {}
    for s in steps:
        cid = s["candidate_id"]
        lv = first.get(cid)
        rec = StepRecord.model_validate(s["record"])
        if lv is None or rec.engine_steps is None or not rec.engine_steps.steps:
            continue
        arch = arch_of.get(lv.architecture_id)
        target = rec.target
        n = counts.get(cid, 0)
        counts[cid] = n + 1
        out.append(
            LevelSteps(
                run_id=lv.run_id,
                candidate_id=cid,
                n=n,
                phase=rec.phase or "levels",
                concurrency=int(target.concurrency) if target is not None and target.concurrency else None,
                rate_rps=float(target.rate_rps) if target is not None and target.rate_rps else None,
                recorded_at=lv.recorded_at,
                model=lv.model,
                family=lv.family,
                accelerator=lv.accelerator,
                instance_type=lv.instance_type,
                tensor_parallel=lv.tensor_parallel,
                quantization=lv.quantization,
                engine=lv.engine,
                serving=(rec.serving.model_dump(mode="json") if rec.serving else None)
                or (arch.serving.model_dump(mode="json") if arch is not None and arch.serving else None),
                server_facts=rec.server_facts,
                sample=rec.engine_steps,
            )
        )
    return out


#: A stored item kind a GSI1 listing reads (`LevelStore._listed`).
Item = TypeVar("Item", bound=BaseModel)


class LevelStore:
    """Measured levels in the sizing table (`SizingStore`'s table and client)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def put(self, levels: list[MeasuredLevel]) -> int:
        return self._put(levels, "level")

    def query(
        self, family: str | None = None, model: str | None = None, *, twin: bool = False
    ) -> list[MeasuredLevel]:
        """Real levels (or twin levels with `twin`), optionally of one hardware family and one model (a name the
        catalog knows is read as its catalog entry: levels are stored under it)."""
        if model is not None:
            import contextlib

            with contextlib.suppress(Exception):  # not a catalog model: stored as named
                model = load_catalog().model(model).id

        return self._listed(TWIN_INDEX_PK if twin else REAL_INDEX_PK, family, model, MeasuredLevel)

    def put_steps(self, items: list[LevelSteps]) -> int:
        return self._put(items, "steps")

    def _put(self, items: Sequence[MeasuredLevel | LevelSteps], kind: str) -> int:
        requests = [
            {"PutRequest": {"Item": to_item({**it.model_dump(mode="json"), **it.keys(), "type": kind})}}
            for it in items
        ]
        self.store._batch_write(requests)
        return len(requests)

    def steps(self, family: str | None = None, model: str | None = None) -> list[LevelSteps]:
        """Every real level's engine steps, optionally of one hardware family and one catalog model."""
        return self._listed(table.MEASURED_STEPS, family, model, LevelSteps)

    def _listed(self, partition: str, family: str | None, model: str | None, kind: type[Item]) -> list[Item]:
        """The items of a GSI1 partition (`kind`), optionally of one hardware family and one catalog model."""
        prefix = "" if family is None else f"{family}#" + ("" if model is None else f"{model}#")
        kwargs: dict[str, Any] = {
            "TableName": self.store.table_name,
            "IndexName": INDEX,
            "KeyConditionExpression": "GSI1PK = :pk" + (" AND begins_with(GSI1SK, :sk)" if prefix else ""),
            "ExpressionAttributeValues": {":pk": {"S": partition}},
        }
        if prefix:
            kwargs["ExpressionAttributeValues"][":sk"] = {"S": prefix}
        out: list[Item] = []
        while True:
            page = self.store.client.query(**kwargs)
            for item in page.get("Items", []):
                data = from_item(item)
                out.append(
                    kind.model_validate(
                        {k: v for k, v in data.items() if k not in (*table.KEY_ATTRS, "type")}
                    )
                )
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def of_run(self, run_id: str) -> list[MeasuredLevel]:
        items = self.store._query_prefix(table.run_pk(run_id), table.LEVEL_PREFIX)
        return [
            MeasuredLevel.model_validate({k: v for k, v in i.items() if k not in (*table.KEY_ATTRS, "type")})
            for i in items
        ]
