"""The provisioner interface: apply a candidate architecture → an endpoint; is it ready?; tear it down.

Implementations: `EksProvisioner` (Karpenter + vLLM on EKS), `SageMakerProvisioner` (a real-time endpoint),
`LocalTwinProvisioner` (simulated endpoints on loopback) and `ExistingEndpoint` (a URL someone else runs).
`Endpoint` is plain data so it can travel between Lambda tasks of the state machine."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from sizing.base.strict import Strict
from sizing.deploy.architecture import DeployTarget
from sizing.results import Architecture as Answer

EndpointKind = Literal["eks", "sagemaker", "local-twin", "existing"]
#: How often `wait_ready` asks by default (s): a GPU pod takes minutes, so 10 s costs nothing.
DEFAULT_POLL_S = 10.0
#: One /health request (s).
HEALTH_TIMEOUT_S = 2.0


class Endpoint(Strict):
    """Where a provisioned candidate answers. `url` is the server root: OpenAI routes are under `/v1`."""

    url: str
    kind: EndpointKind
    run_id: str
    candidate_id: str
    #: The model name to put in requests (vLLM's --served-model-name).
    model: str = ""
    details: dict[str, str] = Field(default_factory=dict)
    #: the server's clock runs this many times faster than the wall's (a time-scaled local twin); 1: real time
    time_scale: float = Field(default=1.0, ge=1.0)

    @property
    def openai_base_url(self) -> str:
        return self.url.rstrip("/") + "/v1"


class TeardownReport(Strict):
    """What teardown removed, and what was still going away when it stopped waiting."""

    deleted: list[str] = Field(default_factory=list)
    remaining: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.remaining


def as_target(arch: DeployTarget | Answer | dict[str, Any]) -> DeployTarget:
    """What to deploy, from a target, a typed answer or an architecture's JSON."""
    if isinstance(arch, DeployTarget):
        return arch
    if isinstance(arch, Answer):
        return DeployTarget.from_answer(arch)
    return DeployTarget.from_dict(arch)


def http_healthy(url: str, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    """True when GET {url}/health answers 200."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Provisioner(ABC):
    """Apply → Endpoint; ready(endpoint); teardown(run, candidate). Teardown is safe to repeat."""

    kind: EndpointKind

    @abstractmethod
    def apply(
        self, architecture: DeployTarget | dict[str, Any], run_id: str, candidate_id: str | None = None
    ) -> Endpoint:
        """Provision the candidate (idempotent) and return where it will answer. On failure, everything it
        created is torn down before the error propagates."""

    @abstractmethod
    def ready(self, endpoint: Endpoint) -> bool:
        """One non-blocking check: does the endpoint serve yet?"""

    @abstractmethod
    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:
        """Remove what was provisioned for the run (or one candidate of it)."""

    def wait_ready(
        self,
        endpoint: Endpoint,
        timeout_s: float,
        poll_s: float = DEFAULT_POLL_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> bool:
        """Poll `ready` until it is true or `timeout_s` has passed."""
        deadline = clock() + timeout_s
        while True:
            if self.ready(endpoint):
                return True
            if clock() >= deadline:
                return False
            sleep(poll_s)


class ExistingEndpoint(Provisioner):
    """A URL the user runs: nothing to create or remove; ready when its /health answers."""

    kind: EndpointKind = "existing"

    def __init__(self, url: str, model: str = "") -> None:
        self.url, self.model = url.rstrip("/"), model

    def apply(
        self, architecture: DeployTarget | dict[str, Any], run_id: str, candidate_id: str | None = None
    ) -> Endpoint:
        arch = as_target(architecture) if architecture else None
        model = self.model or (arch.model if arch else "")
        cand = candidate_id or (arch.id if arch else "existing")
        return Endpoint(url=self.url, kind=self.kind, run_id=run_id, candidate_id=cand, model=model)

    def ready(self, endpoint: Endpoint) -> bool:
        return http_healthy(endpoint.url)

    # the Deployer interface: nothing was deployed, so nothing of the run's is torn down
    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:  # noqa: ARG002
        return TeardownReport()
