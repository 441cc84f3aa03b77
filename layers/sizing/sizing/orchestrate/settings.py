"""Environment of the step functions, parsed once into a typed model (logic never reads os.environ)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sizing.base.envsettings import EnvSettings

#: How often the state machine polls a provisioned candidate, and for how long. On AWS a GPU node takes minutes
#: (Karpenter launch 80-100 s, image pull 5-10 min, weights; docs/serving-facts.md s4): 30 s x 60 = 30 min.
READY_POLL_S_AWS = 30
READY_MAX_ATTEMPTS_AWS = 60
#: Candidates measured at once. Each is a real deployment: two bound the run's parallel GPU spend.
MAX_CONCURRENCY_AWS = 2
#: The load-test master sends a heartbeat every minute; five missed minutes fail the task.
HEARTBEAT_S = 300
#: Upper bound of one candidate's load test (sweep + SLA search) on AWS.
LOADTEST_TIMEOUT_S_AWS = 3 * 3600
#: Seconds one sweep level runs (after its warm-up): 60 s on AWS gives >= a few hundred requests per level.
STEP_S_AWS = 60.0
WARMUP_S_AWS = 15.0
#: Longest a capacity-search level near the SLO edge runs on AWS (its window, seconds) while it reads the requests
#: its percentile needs there (`sizing.loadtest.capacity.level_requests`, `sizing.orchestrate.contracts.
#: capacity_window_cap`): a bound on a candidate's time, not a model figure. A replica whose level_requests take
#: longer at its predicted capacity (a p99 at under 4 req/s) decides on what 15 minutes hold; 800 requests for a
#: p95 fit in it from 0.9 req/s up.
CAPACITY_MAX_LEVEL_S = 900.0


class OrchestrationSettings(EnvSettings):
    """What the sizing-run steps need; `backend` picks AWS parts (EKS, SageMaker, Fargate) or local ones (twins,
    child processes)."""

    OWNER = "the sizing-run function"

    table_name: str = Field(alias="TABLE_NAME", min_length=3, max_length=255)
    backend: Literal["aws", "local"] = Field(default="aws", alias="SIZING_BACKEND")
    stage: str = Field(default="dev", alias="STAGE")
    ready_poll_s: int = Field(default=READY_POLL_S_AWS, alias="READY_POLL_S", ge=1)
    ready_max_attempts: int = Field(default=READY_MAX_ATTEMPTS_AWS, alias="READY_MAX_ATTEMPTS", ge=1)
    max_concurrency: int = Field(default=MAX_CONCURRENCY_AWS, alias="MAP_MAX_CONCURRENCY", ge=1)
    heartbeat_s: int = Field(default=HEARTBEAT_S, alias="HEARTBEAT_S", ge=10)
    loadtest_timeout_s: int = Field(default=LOADTEST_TIMEOUT_S_AWS, alias="LOADTEST_TIMEOUT_S", ge=30)
    step_s: float = Field(default=STEP_S_AWS, alias="LOADTEST_STEP_S", gt=0)
    warmup_s: float = Field(default=WARMUP_S_AWS, alias="LOADTEST_WARMUP_S", ge=0)
    endpoint_url: str | None = Field(
        default=None, alias="SIZING_ENDPOINT", description="measure this URL instead"
    )
    served_model: str | None = Field(
        default=None,
        alias="SIZING_SERVED_MODEL",
        description="the name SIZING_ENDPOINT serves the workload's model under (vLLM's --served-model-name)",
    )
    out_dir: str = Field(default="/tmp/sizing-runs", alias="SIZING_OUT_DIR")
    twin_time_scale: float = Field(
        default=1.0,
        alias="TWIN_TIME_SCALE",
        ge=1.0,
        description="local twins run this many times faster than real time (the load test reads their figures"
        " back in their time: sizing.loadtest.timescale)",
    )
    capacity_search: bool = Field(
        default=True,
        alias="LOADTEST_CAPACITY_SEARCH",
        description="after the closed-loop levels, search each candidate's arrival rate at the SLO edge",
    )
    capacity_max_level_s: float = Field(
        default=CAPACITY_MAX_LEVEL_S,
        alias="LOADTEST_CAPACITY_MAX_LEVEL_S",
        gt=0,
        description="longest a capacity-search level near the SLO edge runs while it reads the requests its"
        " percentile needs there (seconds of the endpoint's time; sizing.orchestrate.contracts.capacity_window_cap)",
    )
    # AWS parts (unused locally)
    eks_cluster: str | None = Field(default=None, alias="EKS_CLUSTER_NAME")
    namespace: str = Field(default="llm-sizing", alias="K8S_NAMESPACE")
    ecs_cluster: str | None = Field(default=None, alias="LOADTEST_CLUSTER_ARN")
    master_task_definition: str | None = Field(default=None, alias="LOADTEST_MASTER_TASK_DEF")
    worker_task_definition: str | None = Field(default=None, alias="LOADTEST_WORKER_TASK_DEF")
    subnets: str | None = Field(default=None, alias="LOADTEST_SUBNETS")
    security_groups: str | None = Field(default=None, alias="LOADTEST_SECURITY_GROUPS")
    loadtest_workers: int = Field(default=2, alias="LOADTEST_WORKERS", ge=0)
    sagemaker_role_arn: str | None = Field(default=None, alias="SAGEMAKER_EXECUTION_ROLE_ARN")

    def machine_settings(self) -> dict[str, int]:
        """The numbers the state machine reads from the Estimate step's output (Wait, Map, heartbeat, timeout)."""
        return {
            "ready_poll_s": self.ready_poll_s,
            "ready_max_attempts": self.ready_max_attempts,
            "max_concurrency": self.max_concurrency,
            "heartbeat_s": self.heartbeat_s,
            "loadtest_timeout_s": self.loadtest_timeout_s,
        }
