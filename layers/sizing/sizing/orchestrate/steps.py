"""The sizing run's steps, one function per state of `statemachines/sizing_run.asl.json`.

Each takes the state's input (plain JSON) and a `Services` bundle (store, catalog, provisioners, load-test
launcher) and returns the state's output. The payloads are the typed contracts of `sizing.orchestrate.contracts`:
a step validates its input once (`step_input`) and returns its result model's JSON. Handlers in `functions/steps/`
are one-line wrappers around these."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from sizing.base.errors import SizingError
from sizing.base.vocabulary import ENDPOINT, TWIN
from sizing.catalog import Catalog, load_catalog
from sizing.deploy.base import ExistingEndpoint
from sizing.loadtest.config import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
from sizing.orchestrate.budget import kernel_stamped, measurement_cost, sweep_workers
from sizing.orchestrate.contracts import (
    CAPACITY_LEVELS,
    Candidate,
    CheckReadyInput,
    CollectInput,
    EstimateInput,
    EstimateOutput,
    FailedCandidate,
    FailRunInput,
    LoadPlan,
    LoadTask,
    LoadTestInput,
    MachineSettings,
    ProvisionInput,
    Ranking,
    ReadyCheck,
    RunFailure,
    Teardown,
    TeardownInput,
    TraceLoad,
    capacity_window_cap,
    step_input,
)
from sizing.orchestrate.launchers import FargateLauncher, LocalLauncher
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.releases.catalog import LiveCatalog, ModelRegistry
from sizing.results import Architecture
from sizing.results.blocks import TokenSummary, WorkloadFigures
from sizing.service.runs import DEFAULT_TOP_K
from sizing.store import SizingStore
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec
from sizing.workload.spec import TokenSpec, WorkloadSpec

#: Sweep levels around the predicted SLO-limit concurrency c of one replica: below, at and above the knee.
LEVEL_FACTORS = (0.5, 1.0, 1.5)
#: A level's window holds at least this many predicted e2e p95s, so each closed-loop stream answers several
#: times in it (a window of fixed seconds held under one answer per stream for long answers, and its p95 rested
#: on the survivors); the settings' step is the floor.
WINDOW_ANSWERS = 5
#: Lowest rate a replayed trace is time-scaled to (req/s): a bound that keeps a level's window holding requests
#: where the estimate gives no capacity to start from, not a model figure.
MIN_REPLAY_RPS = 0.05
#: A level's warm-up lasts at least this many predicted e2e medians, so every stream has completed a cycle and
#: the batch is full before the window opens (a 2 s warm-up spawned 102 users in a second, arriving in waves).
WARMUP_ANSWERS = 2


class Launcher(Protocol):
    """Starts a candidate's load test; the load generator completes the task token itself."""

    def start(self, task: dict[str, Any]) -> dict[str, Any]: ...


@dataclass
class Services:
    settings: OrchestrationSettings
    store: SizingStore
    provisioner_for: Callable[[str], Any]
    launcher: Launcher
    #: Gives the current catalog: a container outlives releases, so the released models are read afresh
    #: (`releases.catalog.LiveCatalog`); the shipped catalog by default.
    catalogs: Callable[[], Catalog] = load_catalog

    @property
    def catalog(self) -> Catalog:
        return self.catalogs()


def build_services(settings: OrchestrationSettings | None = None) -> Services:
    """The parts for the configured backend: local twins and child processes, or EKS/SageMaker and Fargate."""
    s = settings or OrchestrationSettings.from_env()
    store = SizingStore(s.table_name)
    catalog = _catalog(s, store)
    if s.backend == "local":
        provisioner = _local_provisioner(s)
        return Services(s, store, lambda _deployment: provisioner, LocalLauncher(s), catalog)

    return Services(s, store, _aws_provisioners(s), FargateLauncher(s), catalog)


def _catalog(s: OrchestrationSettings, store: SizingStore) -> Callable[[], Catalog]:
    """The shipped catalog plus the models added at runtime from release events (kept in the table)."""
    return LiveCatalog(ModelRegistry(s.table_name, store.client))


_local_twins: Any = None


def local_twins(time_scale: float = 1.0) -> Any:
    """The process-wide twin provisioner of the embedded default (handlers run in-process there, so the twins
    they start outlive one invocation and are stopped by `close_local_twins`); the twins it starts next run
    `time_scale` times faster than real time."""
    global _local_twins
    if _local_twins is None:
        from sizing_local.twins import LocalTwinProvisioner

        _local_twins = LocalTwinProvisioner()
    _local_twins.time_scale = time_scale
    return _local_twins


def close_local_twins() -> None:
    global _local_twins
    if _local_twins is not None:
        _local_twins.close()
        _local_twins = None


def _local_provisioner(s: OrchestrationSettings) -> Any:
    if s.endpoint_url:
        return ExistingEndpoint(s.endpoint_url, s.served_model or "")
    return local_twins(s.twin_time_scale)


def _aws_provisioners(s: OrchestrationSettings) -> Callable[[str], Any]:
    made: dict[str, Any] = {}

    def get(deployment: str) -> Any:
        if deployment not in made:
            if deployment == "sagemaker":
                from sizing.deploy.sagemaker import SageMakerProvisioner

                made[deployment] = SageMakerProvisioner(s.sagemaker_role_arn)
            else:
                from sizing.deploy.eks import EksProvisioner
                from sizing.deploy.kube import ClusterConfig

                made[deployment] = EksProvisioner.from_config(ClusterConfig(name=s.eks_cluster or ""))
        return made[deployment]

    return get


# --- Estimate ------------------------------------------------------------------------------------------------
def _hardware_key(a: Architecture) -> str:
    """What decides a replica's performance: the accelerator, TP, quantization and engine. Two instance types
    with the same accelerators (p5e and p5en: 8 x H200) are measured once; the cheaper one is provisioned."""
    return f"{a.accelerator}:tp{a.tensor_parallel}:{a.quantization}:{a.engine}"


def choose_candidates(
    result: dict[str, Any], top_k: int, architecture_ids: list[str] | None = None
) -> list[Candidate]:
    """The top K distinct hardware options of the ranking (EKS and SageMaker on the same accelerators perform
    the same: one measurement serves all of them). Bedrock is measured by its own client, not provisioned.

    `architecture_ids` names exactly what to measure (Slack's "Measure these N" lists them): one candidate per
    id, in that order, each deployed as itself (a SageMaker row on SageMaker, even beside an EKS row of the same
    hardware). Rows not named that share a named row's hardware still show its figures, marked measured on it.
    NothingToMeasure names any id the estimate no longer ranks or that cannot be provisioned."""
    archs = [Architecture.model_validate(raw) for raw in result["architectures"]]
    if architecture_ids is not None:
        return _named_candidates(archs, architecture_ids)
    chosen: dict[str, tuple[Architecture, list[str]]] = {}
    for a in archs:
        if a.deployment == "bedrock":
            continue
        key = _hardware_key(a)
        if key in chosen:
            chosen[key][1].append(a.id)
            continue
        if len(chosen) < top_k:
            chosen[key] = (a, [a.id])
    return [_candidate(i, a, applies_to) for i, (a, applies_to) in enumerate(chosen.values(), start=1)]


def _named_candidates(archs: list[Architecture], ids: list[str]) -> list[Candidate]:
    by_id = {a.id: a for a in archs}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise NothingToMeasure(
            "nothing to measure: the estimate no longer ranks "
            + ", ".join(unknown)
            + " (prices or the catalog"
            " changed since they were listed); estimate again and choose from the new ranking"
        )
    bedrock = [i for i in ids if by_id[i].deployment == "bedrock"]
    if bedrock:
        raise NothingToMeasure(
            "nothing to measure: "
            + ", ".join(bedrock)
            + " is Bedrock, which is serverless: there is nothing to"
            " provision and load-test"
        )
    chosen = [(by_id[i], [i]) for i in dict.fromkeys(ids)]
    #: hardware -> the named candidate that also stands for the unnamed rows on it (the first named)
    first_of: dict[str, list[str]] = {}
    for a, applies_to in chosen:
        first_of.setdefault(_hardware_key(a), applies_to)
    for a in archs:
        if a.id not in ids and a.deployment != "bedrock" and _hardware_key(a) in first_of:
            first_of[_hardware_key(a)].append(a.id)
    return [_candidate(i, a, applies_to) for i, (a, applies_to) in enumerate(chosen, start=1)]


def _candidate(i: int, a: Architecture, applies_to: list[str]) -> Candidate:
    knee = max(1, round(a.per_replica.max_concurrency if a.per_replica else 1))
    levels = sorted({max(1, math.ceil(knee * f)) for f in LEVEL_FACTORS})
    return Candidate(candidate_id=f"c{i}", architecture=a, applies_to=applies_to, levels=levels)


def estimate_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Estimate, choose the top K, and refuse when measuring them would exceed the run's budget."""
    inp = step_input(EstimateInput, event)
    run_id = inp.run_id
    spec = parse_spec(inp.spec, prefix="spec")
    # deferred: the search and its simulator are the estimate step's alone, not the other steps' cold starts
    from sizing.plan.search import estimate

    typed = estimate(spec, catalog=svc.catalog)
    result = typed.document()
    targets = spec.slo.targets()
    top_k = 1 if svc.settings.endpoint_url else inp.top_k or DEFAULT_TOP_K
    named = None if svc.settings.endpoint_url else inp.architecture_ids
    try:
        candidates = choose_candidates(result, top_k, named)
    except NothingToMeasure as exc:
        svc.store.transition(run_id, "FAILED", expected_from="RUNNING", error=exc.message)
        raise
    svc.store.put_architectures(run_id, result["architectures"])
    cost = measurement_cost(
        [c.architecture.as_json() for c in candidates],
        svc.catalog,
        [
            planned_sweep_s(c.architecture, svc.settings, bool(targets), [p for _, p, _ in targets])
            for c in candidates
        ],
        [
            sweep_workers(
                svc.settings.loadtest_workers,
                c.levels,
                kernel_stamped(svc.settings.endpoint_url, c.architecture.deployment),
            )
            for c in candidates
        ],
        spec.constraints.region,
    )
    settings = MachineSettings.model_validate(svc.settings.machine_settings())
    if not candidates:
        reason = (typed.infeasible.message if typed.infeasible else None) or "no architecture to measure"
        svc.store.transition(run_id, "FAILED", expected_from="RUNNING", error=f"nothing to measure: {reason}")
        raise NothingToMeasure(f"nothing to measure: {reason}")
    budget = inp.budget_usd
    if budget is not None and cost["usd"] > budget:
        reason = (
            f"measuring the top {len(candidates)} candidates would cost ${cost['usd']:,.2f}, over the budget of"
            f" ${budget:,.2f}: " + "; ".join(p["arithmetic"] for p in cost["candidates"] if "arithmetic" in p)
        )
        svc.store.transition(run_id, "REFUSED", expected_from="RUNNING", error=reason)
        refused = EstimateOutput(
            settings=settings,
            measurement_cost=cost,
            workload=result["workload"],
            refused=True,
            reason=reason,
            candidates=[],
        )
        return refused.model_dump(mode="json")
    plan = _load_plan(spec, typed.workload)
    for c in candidates:
        c.workload = plan
    out = EstimateOutput(
        settings=settings,
        measurement_cost=cost,
        workload=result["workload"],
        refused=False,
        reason=None,
        candidates=candidates,
    )
    return out.model_dump(mode="json")


class NothingToMeasure(SizingError):
    """No architecture meets the SLOs, so there is nothing to provision."""


def _load_plan(spec: WorkloadSpec, workload: WorkloadFigures | dict[str, Any] | None = None) -> LoadPlan:
    """What the load generator needs from the workload (the estimate's block, typed or as its JSON): token
    distributions, SLO targets. A workload built from a trace gives no token specs of its own: its measured
    lengths (mean and p95) stand for them, and its shared prefix is the trace's."""
    w = WorkloadFigures.model_validate(workload) if isinstance(workload, dict) else workload
    inp, out = spec.tokens.input, spec.tokens.output
    prefix = spec.tokens.shared_prefix or 0
    if spec.trace is not None and w is not None and (inp is None or out is None):
        inp = _measured_tokens(w.input_tokens)
        out = _measured_tokens(w.output_tokens)
        prefix = int(w.shared_prefix_tokens or 0)
    return LoadPlan(
        input_tokens=inp,
        output_tokens=out,
        slo=spec.slo.targets(),
        shared_prefix_tokens=prefix,
        trace=_replayed_trace(spec, w),
    )


def _replayed_trace(spec: WorkloadSpec, workload: WorkloadFigures | None) -> TraceLoad | None:
    """The trace the load tests replay: the spec's, where the estimate replayed it (`trace.replay`), with the
    digest of what the estimate read."""
    t = spec.trace
    figures = workload.trace if workload is not None else None
    if t is None or not t.replay or figures is None or not figures.digest:
        return None
    return TraceLoad(path=t.path, format=t.format, model=t.model, digest=figures.digest)


def replay_rates(arch: Architecture) -> list[float]:
    """The rates (req/s) a candidate's replayed trace is time-scaled to: below, at and above its predicted
    capacity under the SLOs (the estimate replayed the same trace to find it), as LEVEL_FACTORS place the
    closed-loop levels around the knee; its predicted rate where it has no SLO capacity."""
    per = arch.per_replica
    edge = (per.rps_slo_limit or per.rps) if per is not None else 0.0
    edge = edge if edge > 0 else MIN_REPLAY_RPS
    return sorted({max(MIN_REPLAY_RPS, round(edge * f, 4)) for f in LEVEL_FACTORS})


def _measured_tokens(block: TokenSummary | None) -> TokenSpec | None:
    """A lognormal token spec with a trace's mean and p95 (fixed where they are equal); None where unknown."""
    if block is None or not block.mean:
        return None
    mean, p95 = float(block.mean), float(block.p95 or block.mean)
    try:
        if p95 <= mean:
            return TokenSpec(fixed=max(1, round(mean)))
        return TokenSpec(mean=mean, p95=p95)
    except ValidationError:  # a shape no lognormal has (p95 far above the mean): its mean alone
        return TokenSpec(fixed=max(1, round(mean)))


# --- Provision / ready / teardown ------------------------------------------------------------------------------
class RunCancelled(SizingError):
    """The run was cancelled (or already finished): provision and measure nothing more."""


def ensure_active(svc: Services, run_id: str) -> None:
    """Refuse to spend on a run that is cancelling or finished, even if StopExecution has not landed yet."""
    status = svc.store.get_run(run_id).status
    if status != "RUNNING":
        raise RunCancelled(f"run {run_id} is {status}: nothing more is provisioned or measured")


def provision_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    inp = step_input(ProvisionInput, event)
    ensure_active(svc, inp.run_id)
    cand = inp.candidate
    prov = svc.provisioner_for(cand.architecture.deployment)
    endpoint = prov.apply(cand.architecture.as_json(), inp.run_id, cand.candidate_id)
    return dict(endpoint.model_dump(mode="json"))


def check_ready_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    inp = step_input(CheckReadyInput, event)
    attempts = (inp.attempts or 0) + 1
    prov = svc.provisioner_for(inp.candidate.architecture.deployment)
    ready = bool(prov.ready(inp.endpoint))
    give_up = not ready and attempts >= inp.settings.ready_max_attempts
    reason = (
        f"{inp.endpoint.url} was not ready after {attempts} checks {inp.settings.ready_poll_s} s apart"
        if give_up
        else ""
    )
    return ReadyCheck(ready=ready, give_up=give_up, attempts=attempts, reason=reason).model_dump(mode="json")


def teardown_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    inp = step_input(TeardownInput, event)
    cand = inp.candidate
    prov = svc.provisioner_for(cand.architecture.deployment)
    report = prov.teardown(inp.run_id, cand.candidate_id)
    deleted, remaining = _removed(report)
    done = Teardown(candidate_id=cand.candidate_id, outcome=inp.outcome, deleted=deleted, remaining=remaining)
    return done.model_dump(mode="json")


def _removed(report: Any) -> tuple[list[str], list[str]]:
    """A teardown report's (deleted, remaining); a provisioner that reports nothing removed nothing."""
    if report is None:
        return [], []
    return list(report.deleted), list(report.remaining)


# --- Load test -------------------------------------------------------------------------------------------------
def level_seconds(arch: Architecture, settings: OrchestrationSettings) -> tuple[float, float]:
    """(window, warm-up) of a candidate's levels: from its predicted e2e (WINDOW_ANSWERS, WARMUP_ANSWERS), the
    settings' seconds as the floor."""
    predicted = arch.predicted
    e2e_p50 = float(predicted.e2e_s.p50 or 0.0) if predicted else 0.0
    e2e_p95 = float(predicted.e2e_s.p95 or e2e_p50) if predicted else 0.0
    return max(settings.step_s, WINDOW_ANSWERS * e2e_p95), max(settings.warmup_s, WARMUP_ANSWERS * e2e_p50)


def planned_sweep_s(
    arch: Architecture, settings: OrchestrationSettings, has_slo: bool = True, percentiles: Sequence[str] = ("p95",)
) -> float:  # fmt: skip
    """Seconds a candidate's load test keeps its instance busy, as the budget counts them: each closed-loop level a
    warm-up and a window; with the capacity search (settings, and SLO targets to search for) CAPACITY_LEVELS more
    levels of a warm-up and a window grown to its cap (`capacity_window_cap`: as long as the SLO `percentiles`
    need near the edge at the predicted capacity). A level's tail (its window's last answers) is seconds unless
    the level is overloaded, and is not counted."""
    window, warmup = level_seconds(arch, settings)
    seconds = (window + warmup) * len(LEVEL_FACTORS)
    if settings.capacity_search and has_slo:
        rate = arch.per_replica.rps_slo_limit if arch.per_replica else 0.0
        cap = capacity_window_cap(window, rate, percentiles, settings.capacity_max_level_s)
        seconds += CAPACITY_LEVELS * (warmup + cap)
    return seconds


def load_task(inp: LoadTestInput, settings: OrchestrationSettings) -> LoadTask:
    """The load generator's task for a provisioned candidate: its sweep at the candidate's levels with the
    run's workload, reported to the run's table and its task token."""
    cand = inp.candidate
    plan = cand.workload or LoadPlan()
    window, warmup = level_seconds(cand.architecture, settings)
    return LoadTask(
        task_token=inp.task_token,
        run_id=inp.run_id,
        candidate_id=cand.candidate_id,
        endpoint=inp.endpoint.url,
        model=inp.endpoint.model or cand.architecture.model,
        # the configuration the endpoint serves: every stored step belongs to it
        serving=cand.architecture.serving.model_dump(mode="json") if cand.architecture.serving else None,
        levels=cand.levels,
        input_tokens=plan.input_tokens or TokenSpec(fixed=DEFAULT_INPUT_TOKENS),
        output_tokens=plan.output_tokens or TokenSpec(fixed=DEFAULT_OUTPUT_TOKENS),
        slo=plan.slo,
        shared_prefix_tokens=plan.shared_prefix_tokens,
        step_s=window,
        warmup_s=warmup,
        workers=sweep_workers(
            settings.loadtest_workers,
            cand.levels,
            kernel_stamped(inp.endpoint.url, cand.architecture.deployment),
        ),
        table_name=settings.table_name,
        heartbeat_s=inp.settings.heartbeat_s,
        out_dir=f"{settings.out_dir}/{inp.run_id}/{cand.candidate_id}",
        time_scale=inp.endpoint.time_scale,
        trace=plan.trace,
        rates=replay_rates(cand.architecture) if plan.trace is not None else [],
        capacity_max_level_s=settings.capacity_max_level_s,
        capacity_from=(
            cand.architecture.per_replica.rps_slo_limit
            if settings.capacity_search
            and plan.slo
            and cand.architecture.per_replica
            and cand.architecture.per_replica.rps_slo_limit > 0
            else None
        ),
    )


def start_loadtest_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Hand the sweep to the load generator (Fargate master + workers, or a local child process) with the task
    token; the generator stores its steps and completes the token."""
    inp = step_input(LoadTestInput, event)
    ensure_active(svc, inp.run_id)
    return svc.launcher.start(load_task(inp, svc.settings).model_dump(mode="json"))


# --- Collect and rank ------------------------------------------------------------------------------------------
def collect_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Merge measured figures into the estimated architectures, write the ranking, append calibration rows."""
    # deferred, as the learning loop in `_learn`: only the collect state needs them, and they cost the other
    # states' cold starts ~40 ms (-X importtime)
    from sizing.orchestrate.merge import merge_measurements

    inp = step_input(CollectInput, event)
    run_id = inp.run_id
    outcomes = inp.measured or []
    measured = [m.as_json() for m in outcomes]
    architectures = svc.store.get_architectures(run_id)
    steps = [m.model_dump(mode="json") for m in svc.store.list_measurements(run_id)]
    run = svc.store.get_run(run_id)
    spec = parse_spec(run.spec)
    # a local run without SIZING_ENDPOINT measured twins, which serve at the estimator's own predicted pace
    twins = svc.settings.backend == "local" and not svc.settings.endpoint_url
    merged = merge_measurements(
        architectures,
        measured,
        steps,
        spec,
        svc.catalog,
        run_id=run_id,
        origin=TWIN if twins else ENDPOINT,
    )
    svc.store.put_architectures(run_id, merged["architectures"])
    ok = [m for m in outcomes if m.status == "MEASURED"]

    ranking = Ranking(
        status="SUCCEEDED" if ok else "FAILED",
        workload=build_model(spec, svc.catalog.model(spec.model).id).derived(),
        measured=len(ok),
        failed=[
            FailedCandidate(candidate_id=m.candidate_id, status=m.status, error=_error_text(m.error))
            for m in outcomes
            if m.status != "MEASURED"
        ],
        top=[
            {k: a.get(k) for k in ("rank", "id", "meets_slo", "cost", "predicted", "measured")}
            for a in merged["architectures"][:5]
        ],
        calibration_rows=merged["calibration_rows"],
        learning=_learn(svc, merged["architectures"], measured, steps, run_id, spec, twins),
    )
    svc.store.put_ranking(run_id, ranking.model_dump(mode="json"))
    if ranking.status == "SUCCEEDED":
        svc.store.transition(run_id, "SUCCEEDED", expected_from="RUNNING")
    else:
        cause = "; ".join(f"{f.candidate_id}: {f.error}" for f in ranking.failed) or "no candidate measured"
        svc.store.transition(run_id, "FAILED", expected_from=("RUNNING", "CANCELLING"), error=cause)
    return ranking.output()


def _learn(
    svc: Services,
    architectures: list[dict[str, Any]],
    measured: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    run_id: str,
    spec: Any,
    twins: bool,
) -> dict[str, Any]:
    """The learning loop's part of the ranking (`sizing.learn.loop.after_collect`): the measured levels stored
    as items, drift flags, the refit (in-process locally, queued for the calibration function on AWS). A fault
    here is stated in the block and never fails the run."""
    from sizing.learn.loop import after_collect

    try:
        return after_collect(
            store=svc.store,
            backend=svc.settings.backend,
            architectures=architectures,
            measured=measured,
            steps=steps,
            run_id=run_id,
            origin="twin" if twins else "endpoint",
            wm=build_model(spec, svc.catalog.model(spec.model).id),
            catalog=svc.catalog,
        )
    except Exception as exc:  # the ranking stands without its learning block
        return {"measured_levels": 0, "error": f"{type(exc).__name__}: {exc}"}


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('Error', 'Error')}: {error.get('Cause', '')}".strip(": ")
    return str(error or "")


def fail_run_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Mark the run FAILED with the cause and tear down anything of the run still up."""
    inp = step_input(FailRunInput, event)
    run_id = inp.run_id
    cause = _error_text(inp.error)
    run = svc.store.get_run(run_id)
    if not run.finished:
        svc.store.transition(
            run_id, "FAILED", expected_from=("RUNNING", "PENDING", "CANCELLING"), error=cause
        )
    swept: list[str] = []
    for deployment in ("eks", "sagemaker"):
        try:
            swept += _removed(svc.provisioner_for(deployment).teardown(run_id, None))[0]
        except SizingError:
            continue
    return RunFailure(error=cause, torn_down=swept).model_dump(mode="json")
