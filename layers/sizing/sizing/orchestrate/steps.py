"""The sizing run's steps, one function per state of `statemachines/sizing_run.asl.json`.

Each takes the state's input (plain JSON) and a `Services` bundle (store, catalog, provisioners, load-test
launcher) and returns the state's output. Handlers in `functions/steps/` are one-line wrappers around these."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sizing.catalog import Catalog, load_catalog
from sizing.errors import InvalidInput, Problem, SizingError
from sizing.orchestrate.budget import measurement_cost
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.store import SizingStore
from sizing.workload import parse_spec

#: Sweep levels around the predicted SLO-limit concurrency c of one replica: below, at and above the knee.
LEVEL_FACTORS = (0.5, 1.0, 1.5)


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
        from sizing.orchestrate.launchers import LocalLauncher

        provisioner = _local_provisioner(s)
        return Services(s, store, lambda _deployment: provisioner, LocalLauncher(s), catalog)
    from sizing.orchestrate.launchers import FargateLauncher

    return Services(s, store, _aws_provisioners(s), FargateLauncher(s), catalog)


def _catalog(s: OrchestrationSettings, store: SizingStore) -> Callable[[], Catalog]:
    """The shipped catalog plus the models added at runtime from release events (kept in the table)."""
    from sizing.releases.catalog import LiveCatalog, ModelRegistry

    return LiveCatalog(ModelRegistry(s.table_name, store.client))


_local_twins: Any = None


def local_twins() -> Any:
    """The process-wide twin provisioner of the embedded default (handlers run in-process there, so the twins
    they start outlive one invocation and are stopped by `close_local_twins`)."""
    global _local_twins
    if _local_twins is None:
        from sizing_local.twins import LocalTwinProvisioner

        _local_twins = LocalTwinProvisioner()
    return _local_twins


def close_local_twins() -> None:
    global _local_twins
    if _local_twins is not None:
        _local_twins.close()
        _local_twins = None


def _local_provisioner(s: OrchestrationSettings) -> Any:
    if s.endpoint_url:
        from sizing.deploy.base import ExistingEndpoint

        return ExistingEndpoint(s.endpoint_url)
    return local_twins()


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
def _hardware_key(a: dict[str, Any]) -> str:
    """What decides a replica's performance: the accelerator, TP, quantization and engine. Two instance types
    with the same accelerators (p5e and p5en: 8 x H200) are measured once; the cheaper one is provisioned."""
    return f"{a['accelerator']}:tp{a['tensor_parallel']}:{a['quantization']}:{a['engine']}"


def choose_candidates(result: dict[str, Any], top_k: int) -> list[dict[str, Any]]:
    """The top K distinct hardware options of the ranking (EKS and SageMaker on the same accelerators perform
    the same: one measurement serves all of them). Bedrock is measured by its own client, not provisioned."""
    chosen: dict[str, dict[str, Any]] = {}
    for a in result["architectures"]:
        if a["deployment"] == "bedrock":
            continue
        key = _hardware_key(a)
        if key in chosen:
            chosen[key]["applies_to"].append(a["id"])
            continue
        if len(chosen) < top_k:
            chosen[key] = {"architecture": a, "applies_to": [a["id"]]}
    out = []
    for i, c in enumerate(chosen.values(), start=1):
        a = c["architecture"]
        knee = max(1, round(a["per_replica"]["max_concurrency"]))
        levels = sorted({max(1, math.ceil(knee * f)) for f in LEVEL_FACTORS})
        out.append(
            {"candidate_id": f"c{i}", "architecture": a, "applies_to": c["applies_to"], "levels": levels}
        )
    return out


def estimate_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Estimate, choose the top K, and refuse when measuring them would exceed the run's budget."""
    from sizing.plan import estimate

    run_id = event["run_id"]
    spec = parse_spec(event["spec"], prefix="spec")
    result = estimate(spec, catalog=svc.catalog)
    top_k = 1 if svc.settings.endpoint_url else int(event.get("top_k") or 3)
    candidates = choose_candidates(result, top_k)
    svc.store.put_architectures(run_id, result["architectures"])
    sweep_s = (svc.settings.step_s + svc.settings.warmup_s) * len(LEVEL_FACTORS)
    cost = measurement_cost(
        [c["architecture"] for c in candidates],
        svc.catalog,
        sweep_s,
        svc.settings.loadtest_workers,
        spec.constraints.region,
    )
    budget = event.get("budget_usd")
    base = {
        "settings": svc.settings.machine_settings(),
        "measurement_cost": cost,
        "workload": result["workload"],
    }
    if not candidates:
        reason = result.get("infeasible", {}).get("message") or "no architecture to measure"
        svc.store.transition(run_id, "FAILED", expected_from="RUNNING", error=f"nothing to measure: {reason}")
        raise NothingToMeasure(f"nothing to measure: {reason}")
    if budget is not None and cost["usd"] > float(budget):
        reason = (
            f"measuring the top {len(candidates)} candidates would cost ${cost['usd']:,.2f}, over the budget of"
            f" ${float(budget):,.2f}: "
            + "; ".join(p["arithmetic"] for p in cost["candidates"] if "arithmetic" in p)
        )
        svc.store.transition(run_id, "REFUSED", expected_from="RUNNING", error=reason)
        return {**base, "refused": True, "reason": reason, "candidates": []}
    for c in candidates:
        c["workload"] = _load_plan(spec)
    return {**base, "refused": False, "reason": None, "candidates": candidates}


class NothingToMeasure(SizingError):
    """No architecture meets the SLOs, so there is nothing to provision."""


def _load_plan(spec: Any) -> dict[str, Any]:
    """What the load generator needs from the workload: token distributions, SLO targets, the model name."""
    tokens = spec.tokens.model_dump(mode="json", exclude_none=True)
    return {
        "input_tokens": tokens.get("input"),
        "output_tokens": tokens.get("output"),
        "slo": [list(t) for t in spec.slo.targets()],
    }


# --- Provision / ready / teardown ------------------------------------------------------------------------------
class RunCancelled(SizingError):
    """The run was cancelled (or already finished): provision and measure nothing more."""


def ensure_active(svc: Services, run_id: str) -> None:
    """Refuse to spend on a run that is cancelling or finished, even if StopExecution has not landed yet."""
    status = svc.store.get_run(run_id).status
    if status != "RUNNING":
        raise RunCancelled(f"run {run_id} is {status}: nothing more is provisioned or measured")


def provision_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    ensure_active(svc, event["run_id"])
    cand = event["candidate"]
    arch = cand["architecture"]
    prov = svc.provisioner_for(arch["deployment"])
    endpoint = prov.apply(arch, event["run_id"], cand["candidate_id"])
    return dict(endpoint.model_dump(mode="json"))


def check_ready_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    from sizing.deploy.base import Endpoint

    cand = event["candidate"]
    attempts = int(event.get("attempts") or 0) + 1
    prov = svc.provisioner_for(cand["architecture"]["deployment"])
    endpoint = Endpoint.model_validate(event["endpoint"])
    ready = bool(prov.ready(endpoint))
    limit = int(event["settings"]["ready_max_attempts"])
    give_up = not ready and attempts >= limit
    reason = (
        f"{endpoint.url} was not ready after {attempts} checks {event['settings']['ready_poll_s']} s apart"
        if give_up
        else ""
    )
    return {"ready": ready, "give_up": give_up, "attempts": attempts, "reason": reason}


def teardown_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    cand = event["candidate"]
    prov = svc.provisioner_for(cand["architecture"]["deployment"])
    report = prov.teardown(event["run_id"], cand["candidate_id"])
    return {"candidate_id": cand["candidate_id"], "outcome": event.get("outcome"), **_report_dict(report)}


def _report_dict(report: Any) -> dict[str, Any]:
    if report is None:
        return {"deleted": [], "remaining": []}
    return {"deleted": list(report.deleted), "remaining": list(report.remaining)}


# --- Load test -------------------------------------------------------------------------------------------------
def start_loadtest_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Hand the sweep to the load generator (Fargate master + workers, or a local child process) with the task
    token; the generator stores its steps and completes the token."""
    ensure_active(svc, event["run_id"])
    cand = event["candidate"]
    endpoint = event["endpoint"]
    plan = cand.get("workload") or {}
    task = {
        "task_token": event["task_token"],
        "run_id": event["run_id"],
        "candidate_id": cand["candidate_id"],
        "endpoint": endpoint["url"],
        "model": endpoint.get("model") or cand["architecture"]["model"],
        # the configuration the endpoint serves: every stored step belongs to it
        "serving": cand["architecture"].get("serving"),
        "levels": cand["levels"],
        "input_tokens": plan.get("input_tokens") or {"fixed": 512},
        "output_tokens": plan.get("output_tokens") or {"fixed": 128},
        "slo": plan.get("slo") or [],
        "step_s": svc.settings.step_s,
        "warmup_s": svc.settings.warmup_s,
        "workers": svc.settings.loadtest_workers,
        "table_name": svc.settings.table_name,
        "heartbeat_s": event["settings"]["heartbeat_s"],
        "out_dir": f"{svc.settings.out_dir}/{event['run_id']}/{cand['candidate_id']}",
    }
    return svc.launcher.start(task)


# --- Collect and rank ------------------------------------------------------------------------------------------
def collect_step(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    """Merge measured figures into the estimated architectures, write the ranking, append calibration rows."""
    from sizing.orchestrate.merge import merge_measurements
    from sizing.perf.calibration import TWIN_ORIGIN

    run_id = event["run_id"]
    measured = event.get("measured") or []
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
        origin=TWIN_ORIGIN if twins else "endpoint",
    )
    svc.store.put_architectures(run_id, merged["architectures"])
    ok = [m for m in measured if m.get("status") == "MEASURED"]
    status = "SUCCEEDED" if ok else "FAILED"
    from sizing.workload import build_model

    ranking = {
        "status": status,
        "workload": build_model(spec, svc.catalog.model(spec.model).id).derived(),
        "measured": len(ok),
        "failed": [
            {
                "candidate_id": m.get("candidate_id"),
                "status": m.get("status"),
                "error": _error_text(m.get("error")),
            }
            for m in measured
            if m.get("status") != "MEASURED"
        ],
        "top": [
            {k: a.get(k) for k in ("rank", "id", "meets_slo", "cost", "predicted", "measured")}
            for a in merged["architectures"][:5]
        ],
        "calibration_rows": merged["calibration_rows"],
        "learning": _learn(svc, merged["architectures"], measured, steps, run_id, spec, twins),
    }
    svc.store.put_ranking(run_id, ranking)
    if status == "SUCCEEDED":
        svc.store.transition(run_id, "SUCCEEDED", expected_from="RUNNING")
    else:
        cause = (
            "; ".join(f"{f['candidate_id']}: {f['error']}" for f in ranking["failed"])
            or "no candidate measured"
        )
        svc.store.transition(run_id, "FAILED", expected_from=("RUNNING", "CANCELLING"), error=cause)
    return {k: v for k, v in ranking.items() if k != "calibration_rows"}


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
    from sizing.workload import build_model

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
    run_id = event["run_id"]
    cause = _error_text(event.get("error"))
    run = svc.store.get_run(run_id)
    if not run.finished:
        svc.store.transition(
            run_id, "FAILED", expected_from=("RUNNING", "PENDING", "CANCELLING"), error=cause
        )
    swept = []
    for deployment in ("eks", "sagemaker"):
        try:
            report = svc.provisioner_for(deployment).teardown(run_id, None)
            swept += _report_dict(report)["deleted"]
        except SizingError:
            continue
    return {"status": "FAILED", "error": cause, "torn_down": swept}


def check_event(event: Any, *required: str) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise InvalidInput("the step's input must be an object", [Problem("event", "not an object")])
    missing = [k for k in required if k not in event]
    if missing:
        raise InvalidInput("the step's input is incomplete", [Problem(k, "missing") for k in missing])
    return event
